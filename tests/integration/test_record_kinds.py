"""Records that are not plain row changes, through a real ingestion run of sink files:
each lands, is skipped by a stated rule and counted, or is quarantined with a reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion.pipeline import IngestConfig, RunSummary, run
from tests.support.lakehouse import drop_schemas

pytestmark = pytest.mark.integration

SCHEMA = "bronze_record_kinds"
ACTOR = "pg.public.actor"
TX = "pg.transaction"
SOURCES_YML = """\
version: 2
sources:
  - name: bronze
    tables:
      - name: pg_public_actor
        meta: {topic: pg.public.actor, primary_key: [actor_id]}
"""


def envelope(op: str, lsn: int, before: dict | None, after: dict | None) -> dict:
    source = {"connector": "postgresql", "db": "pagila", "schema": "public", "table": "actor", "lsn": lsn,
              "txId": 7, "ts_ms": 1_700_000_000_000, "snapshot": "false"}
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1_700_000_000_000}


TX_BEGIN = {"status": "BEGIN", "id": "7:100", "event_count": None, "data_collections": None, "ts_ms": 1}
TX_END = {"status": "END", "id": "7:100", "event_count": 1, "ts_ms": 2,
          "data_collections": [{"data_collection": ACTOR, "event_count": 1}]}

# offset -> (line, expected outcome); outcome: ("landed", op) | ("skipped",) | ("quarantined", reason)
ACTOR_LINES: list[tuple[str, tuple]] = [
    (json.dumps(envelope("c", 10, None, {"actor_id": 1, "first_name": "ANNA"})), ("landed", "c")),
    (json.dumps(TX_BEGIN), ("skipped",)),  # a transaction record in a table's topic: never in its change log
    (json.dumps({"actor_id": 2}), ("quarantined", "a Kafka record key, not a change event (only the primary key "
                                                  "column(s) [actor_id], no op): are the sink's keys written into "
                                                  "its value files?")),
    (json.dumps({"actor_id": 3, "first_name": "FLAT"}), ("landed", None)),  # flattened row without __op
    # two records on one line: neither lands (the delete would be lost if the first did)
    (json.dumps(envelope("c", 11, None, {"actor_id": 4})) + " " + json.dumps(envelope("d", 12, {"actor_id": 4}, None)),
     ("quarantined", "more than one JSON value on the line (text after the first JSON object): "
                     "a line must hold exactly one record")),
    (json.dumps({"actor_id": 5, "__op": "d", "__deleted": "TRUE"}),
     ("quarantined", 'field __deleted is \'TRUE\' (expected "true" or "false")')),
]
TX_LINES = [json.dumps(TX_BEGIN), json.dumps(TX_END)]


def write(root: Path, topic: str, start: int, lines: list[str]) -> str:
    folder = root / topic / "partition=0"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{topic}+0+{start}.json"
    path.write_text("".join(line + "\n" for line in lines))
    return "file:" + str(path)


@pytest.fixture(scope="module")
def landed(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("record-kinds")
    root = base / "topics"
    files = {ACTOR: write(root, ACTOR, 0, [line for line, _ in ACTOR_LINES]), TX: write(root, TX, 0, TX_LINES)}
    (base / "sources.yml").write_text(SOURCES_YML)
    drop_schemas(spark, [SCHEMA])
    summary = run(spark, IngestConfig(input_uri=str(root), bronze_schema=SCHEMA, sources_yml=base / "sources.yml"))
    yield files, summary
    drop_schemas(spark, [SCHEMA])


def test_summary_counts_every_record(landed):
    _, summary = landed
    expected_actor = [outcome[0] for _, outcome in ACTOR_LINES]
    got = {t.table: (t.events_read, t.landed, t.quarantined, t.tombstones, t.skipped) for t in summary.tables}
    assert got == {
        "pg_public_actor": (len(ACTOR_LINES), expected_actor.count("landed"), expected_actor.count("quarantined"), 0,
                            expected_actor.count("skipped")),
        "pg_transaction": (2, 0, 0, 0, 2),
    }
    assert "skipped" in summary.render().splitlines()[0]


def test_bronze_and_quarantine_rows(spark, landed):
    files, _ = landed
    bronze = [tuple(r) for r in spark.sql(
        f"select _offset, _op from {SCHEMA}.pg_public_actor order by _offset").collect()]
    assert bronze == [(offset, outcome[1]) for offset, (_, outcome) in enumerate(ACTOR_LINES) if outcome[0] == "landed"]
    assert spark.sql(f"select count(*) from {SCHEMA}.pg_transaction").first()[0] == 0
    quarantine = [tuple(r) for r in spark.sql(
        f"select _source_file, _offset, reason, raw from {SCHEMA}._quarantine order by _offset").collect()]
    assert quarantine == [(files[ACTOR], offset, outcome[1], line)
                          for offset, (line, outcome) in enumerate(ACTOR_LINES) if outcome[0] == "quarantined"]
    ledger = [tuple(r) for r in spark.sql(
        f"select _source_file, lines, landed, quarantined, tombstones from {SCHEMA}._ingested_files "
        "order by _source_file").collect()]
    outcomes = [outcome[0] for _, outcome in ACTOR_LINES]
    assert sorted(ledger) == sorted([
        (files[ACTOR], len(ACTOR_LINES), outcomes.count("landed"), outcomes.count("quarantined"), 0),
        (files[TX], 2, 0, 0, 0)])
