"""Bad input, one case each, through the real ingestion and the real silver build:
every bad record lands in quarantine (ingestion: `bronze._quarantine`; silver:
`<model>__cdc_rejected`) with its reason and coordinates, the summary and exit codes
say so, nothing from the data reaches SQL unquoted, and a later fixed record of the
same key is applied normally."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.cli.main import dbtRunner

from ingestion.cli import EXIT_QUARANTINED, main
from tests.support.lakehouse import MODEL_TABLE_SUFFIXES, dbt, drop_schemas, drop_tables, silver_rows
from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

SCHEMA = "bronze_bad_input"
ACTOR = "pagila.public.actor"
LIMIT = 2048  # --max-record-bytes
EVIL_TOPIC = "evil`;drop table silver.actor;--"
EVIL_COLUMN = "first_name`; drop table silver.actor; --"
VARS = json.dumps({"cdc_bronze_schema": SCHEMA})
SILVER = [("silver", "actor" + suffix) for suffix in MODEL_TABLE_SUFFIXES]


def envelope(op: str, lsn: int, after: dict | None, before: dict | None = None) -> str:
    source = {"connector": "postgresql", "db": "pagila", "schema": "public", "table": "actor", "lsn": lsn,
              "txId": lsn, "ts_ms": 1_700_000_000_000 + lsn, "snapshot": "false"}
    return json.dumps({"before": before, "after": after, "source": source, "op": op, "ts_ms": 1_700_000_000_000 + lsn})


def actor(key, name: str, last_update: object = 1_700_000_000_000_000) -> dict:
    return {"actor_id": key, "first_name": name, "last_name": "DOE", "last_update": last_update}


def write(root: Path, topic: str, start: int, text: str) -> str:
    folder = root / topic / "partition=0"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{topic}+0+{start}.json"
    path.write_text(text)
    return "file:" + str(path)


@pytest.fixture(scope="module")
def landed(spark, tmp_path_factory):
    """The bad-input matrix, ingested once with the CLI; yields (files, exit code, summary)."""
    root = tmp_path_factory.mktemp("bad-input") / "topics"
    flattened = {"actor_id": 5, "first_name": "EVE", "last_name": "DOE", "last_update": "1700000000000000",
                 EVIL_COLUMN: "boom", "__op": "c", "__lsn": "170", "__deleted": "false"}
    lines = [
        envelope("c", 100, actor(1, "ANNA")),                                      # offset 0: fine
        '{"before": null, "after": {"actor_id": 2',                                # 1: invalid JSON
        envelope("x", 120, actor(2, "BOB")),                                       # 2: unknown op
        envelope("c", 130, actor(None, "NOKEY")),                                  # 3: null key
        envelope("c", 140, actor(3, "X" * LIMIT)),                                 # 4: oversized
        envelope("c", 150, actor(4, "DANA", "not a time")),                         # 5: wrong type
        json.dumps(flattened),                                                     # 6: unsafe column name
        envelope("c", 180, actor(2, "BOB")),                                       # 7: key 2 fixed
        envelope("u", 190, actor(4, "DANA")),                                      # 8: key 4 fixed
    ]
    files = {
        "matrix": write(root, ACTOR, 0, "\n".join(lines) + "\n"),
        "empty": write(root, ACTOR, 9, ""),
        "truncated": write(root, ACTOR, 10, envelope("c", 200, actor(6, "FERN")) + "\n"
                           + '{"before": null, "after": {"actor_id": 7, "first'),
        "a.b": write(root, "a.b", 0, envelope("c", 1, actor(1, "A")) + "\n"),
        "a_b": write(root, "a_b", 0, envelope("c", 1, actor(1, "A")) + "\n"),
        "evil": write(root, EVIL_TOPIC, 0, envelope("c", 1, actor(1, "E")) + "\n"),
    }
    code = main(["--input", str(root), "--bronze-schema", SCHEMA, "--max-record-bytes", str(LIMIT)])
    yield files, code
    drop_schemas(spark, [SCHEMA])
    drop_tables(spark, SILVER)


def test_exit_code_and_quarantine_rows(spark, landed):
    files, code = landed
    assert code == EXIT_QUARANTINED
    got = [tuple(r) for r in spark.sql(
        f"select _source_file, _source_line, _offset, reason from {SCHEMA}._quarantine "
        "order by _source_file, _source_line").collect()]
    collision = ("topics 'a.b', 'a_b' all map to bronze table 'a_b'; land them into separate bronze schemas "
                 "(--bronze-schema) or rename a topic")
    assert sorted(got) == sorted([
        (files["matrix"], 2, 1, "malformed JSON or not a JSON object"),
        (files["matrix"], 3, 2, "unknown op 'x' (expected one of c, u, d, r, t)"),
        (files["matrix"], 4, 3, "primary key column(s) [actor_id] missing or null in row image `after` (op 'c')"),
        (files["matrix"], 5, 4, f"record of {len(envelope('c', 140, actor(3, 'X' * LIMIT)))} bytes is over the "
                                f"limit of {LIMIT} bytes (--max-record-bytes)"),
        (files["empty"], 1, 9, "empty file (0 bytes): the S3 sink never writes one, so its upload may have failed"),
        (files["truncated"], 2, 11, "malformed JSON or not a JSON object (the file's last line has no newline: "
                                    "was the file cut short?)"),
        (files["a.b"], 1, 0, collision),
        (files["a_b"], 1, 0, collision),
    ])
    # the raw line is kept whole, nothing is lost
    raw = spark.sql(f"select raw from {SCHEMA}._quarantine where _offset = 4 and _source_file = '{files['matrix']}'")
    assert raw.collect()[0][0] == envelope("c", 140, actor(3, "X" * LIMIT))


def test_names_from_data_are_validated_and_quoted(spark, landed):
    files, _ = landed
    # a topic with SQL in its name lands in a table whose name keeps only [a-z0-9_]
    evil = [tuple(r) for r in spark.sql(
        f"select _topic, _offset from {SCHEMA}.`evil__drop_table_silver_actor___`").collect()]
    assert evil == [(EVIL_TOPIC, 0)]
    # a column name with SQL in it is data in bronze's row image, never an identifier
    after = spark.sql(f"select _after from {SCHEMA}.pagila_public_actor where _offset = 6").collect()[0][0]
    assert json.loads(after)[EVIL_COLUMN] == "boom"


def test_silver_rejects_wrong_types_and_applies_the_fixed_records(spark, landed):
    files, _ = landed
    dbt("run", "--select", "actor", "--vars", VARS)
    assert silver_rows(spark, "actor", ["actor_id", "first_name"], ["actor_id"]) == [
        {"actor_id": 1, "first_name": "ANNA"},
        {"actor_id": 2, "first_name": "BOB"},   # fixed record after the unknown op
        {"actor_id": 4, "first_name": "DANA"},  # fixed record after the wrong type
        {"actor_id": 5, "first_name": "EVE"},   # the unsafe column is ignored
        {"actor_id": 6, "first_name": "FERN"},  # the truncated file's complete line
    ]
    rejected = silver_rows(spark, "actor__cdc_rejected",
                           ["actor_id", "_cdc_rejection", "_cdc_source_file", "_cdc_source_line", "_cdc_offset"])
    assert rejected == [{"actor_id": 4, "_cdc_rejection": 'column last_update: "not a time" is not a valid timestamp',
                         "_cdc_source_file": files["matrix"], "_cdc_source_line": 6, "_cdc_offset": 5}]
    # `dbt test` reports it: the model's cdc_no_rejected_events test fails
    result = dbtRunner().invoke(["test", "--select", "actor,test_name:cdc_no_rejected_events", "--vars", VARS,
                                 "--project-dir", str(ROOT), "--profiles-dir", str(ROOT / "profiles")])
    assert not result.success
    assert [(r.node.name.startswith("cdc_no_rejected_events"), r.status, r.failures) for r in result.result
            if r.node.resource_type == "test"] == [
        (True, "fail", 1)]
