"""End-to-end ingestion runs over hand-made Kafka Connect S3-sink files.

Hudi writes cost seconds each, so one module-scoped first run covers every record
shape and problem at once; later tests replay, extend and re-read that input."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from ingestion import load
from ingestion.cli import main
from ingestion.extract import SourceFile, share_offsets
from ingestion.load import created_alongside
from ingestion.pipeline import IngestConfig, RunSummary, run
from tests.support.lakehouse import drop_schemas, table_folder

SCHEMA = "bronze_it_pipeline"

ACTOR = "pg.public.actor"
CUSTOMERS = "my.inventory.customers"
FILM = "pg.public.film"  # not declared in the sources YAML: landed without key check
BAD_TOPIC = "9lives"  # maps to `9lives`, not a valid identifier

SOURCES_YML = """\
version: 2
sources:
  - name: bronze
    tables:
      - name: pg_public_actor
        meta: {topic: pg.public.actor, primary_key: [actor_id]}
      - name: my_inventory_customers
        meta: {topic: my.inventory.customers, primary_key: [id]}
  - name: other
    tables:
      - name: pg_public_film
        meta: {topic: pg.public.film, primary_key: [film_id]}
"""

PG_SOURCE = {"connector": "postgresql", "db": "pagila", "schema": "public", "table": "actor",
             "lsn": 24023128, "txId": 555, "ts_ms": 1700000000000, "snapshot": "false"}


def envelope(op: str | None, before: dict | None, after: dict | None, source: dict = PG_SOURCE, ts_ms: int = 1700000000100) -> dict:
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": ts_ms, "transaction": None}


def wrapped(payload: object) -> dict:
    return {"schema": {"type": "struct", "optional": False}, "payload": payload}


def line(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def write_file(root: Path, topic: str, name: str, values: list[object], partition: int = 0) -> Path:
    folder = root / topic / f"partition={partition}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(line(v) + "\n" for v in values))
    return path


def uri(path: Path) -> str:
    return "file:" + str(path)


ACTOR_LINES: list[object] = [
    wrapped(envelope("c", None, {"actor_id": 1, "first_name": "PENELOPE"})),  # offset 100
    envelope("u", {"actor_id": 1, "first_name": "PENELOPE"}, {"actor_id": 1, "first_name": "PENNY"}),  # 101
    "",  # 102 tombstone
    "null",  # 103 tombstone
    "{not json",  # 104 malformed
    envelope("x", None, {"actor_id": 2}),  # 105 unknown op
    envelope("c", None, {"actor_id": None, "first_name": "NOKEY"}),  # 106 null key
    envelope("d", {"actor_id": 1, "first_name": "PENNY"}, None),  # 107 delete, key from `before`
    envelope("t", None, None),  # 108 truncate: no key needed
    wrapped(None),  # 109 wrapped tombstone
]

MY_SOURCE = {"connector": "mysql", "file": "mysql-bin.000003", "pos": 154, "row": 0, "gtid": "abc:1"}

CUSTOMER_LINES: list[object] = [
    wrapped({"id": 1, "name": "Sally", "__op": "c", "__file": "mysql-bin.000003", "__pos": 154, "__row": 0,
             "__source_ts_ms": 1700000000000, "__ts_ms": 1700000000200, "__deleted": "false"}),  # offset 0
    {"id": 1, "name": "Sally", "__deleted": "true", "__source_ts_ms": 1700000000300},  # 1: delete without __op
    {"id": 2, "name": "Z", "__op": "z"},  # 2 unknown __op
    {"name": "no id", "__op": "c"},  # 3 key missing
    "[1, 2]",  # 4 not an object
    envelope("r", None, {"id": 3, "name": "Snap"}, source=MY_SOURCE, ts_ms=5),  # 5 MySQL envelope
]


@pytest.fixture(scope="module")
def sink(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("ingestion-pipeline")
    root = base / "topics"
    write_file(root, ACTOR, f"{ACTOR}+0+100.json", ACTOR_LINES)
    write_file(root, CUSTOMERS, f"{CUSTOMERS}+0+0.json", CUSTOMER_LINES)
    write_file(root, FILM, f"{FILM}+2+7.json", [envelope("r", None, {"film_id": 9, "title": "X"})], partition=2)
    write_file(root, ACTOR, "actor-export.json", [envelope("c", None, {"actor_id": 5}), ""])
    write_file(root, BAD_TOPIC, f"{BAD_TOPIC}+0+0.json", [{"a": 1}])
    (base / "sources.yml").write_text(SOURCES_YML)
    return root


@pytest.fixture(scope="module")
def first_run(spark, sink) -> RunSummary:
    return run(spark, IngestConfig(input_uri=str(sink), bronze_schema=SCHEMA, sources_yml=sink.parent / "sources.yml"))


def rows(spark, table: str, order: str, schema: str = SCHEMA) -> list[dict]:
    df = spark.sql(f"SELECT * FROM `{schema}`.`{table}` ORDER BY {order}")
    return [{k: v for k, v in r.asDict().items() if not k.startswith("_hoodie")} for r in df.collect()]


def test_summary(first_run):
    s = {t.table: (t.files, t.events_read, t.landed, t.quarantined, t.tombstones, t.key_checked) for t in first_run.tables}
    assert s == {
        "pg_public_actor": (2, 12, 4, 5, 3, True),
        "my_inventory_customers": (1, 6, 3, 3, 0, True),
        "pg_public_film": (1, 1, 1, 0, 0, False),
        "(unmappable: 9lives)": (1, 1, 0, 1, 0, False),
    }
    assert first_run.quarantined == 9
    assert first_run.files_skipped == 0
    rendered = first_run.render()
    assert "pg_public_film" in rendered and "not in sources yml" in rendered


BRONZE_FIELDS = ["_topic", "_partition", "_offset", "_source_file", "_source_line", "_shape", "_op", "_deleted",
                 "_source_lsn", "_source_binlog_file", "_source_binlog_pos", "_source_binlog_row", "_source_ts_ms",
                 "_source_tx_id", "_source_snapshot", "_ts_ms", "_before", "_after", "_source"]


def compact(value: dict) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_bronze_columns_are_the_contract(spark, first_run):
    df = spark.table(f"`{SCHEMA}`.`pg_public_actor`")
    assert [(n, t) for n, t in df.dtypes if not n.startswith("_hoodie")] == [
        ("_topic", "string"), ("_partition", "int"), ("_offset", "bigint"), ("_source_file", "string"),
        ("_source_line", "int"), ("_shape", "string"), ("_op", "string"), ("_deleted", "boolean"),
        ("_source_lsn", "bigint"), ("_source_binlog_file", "string"), ("_source_binlog_pos", "bigint"),
        ("_source_binlog_row", "int"), ("_source_ts_ms", "bigint"), ("_source_tx_id", "string"),
        ("_source_snapshot", "string"), ("_ts_ms", "bigint"), ("_before", "string"), ("_after", "string"),
        ("_source", "string"), ("_ingested_at", "timestamp"),
    ]


def test_bronze_envelope_rows(spark, sink, first_run):
    file = uri(sink / ACTOR / "partition=0" / f"{ACTOR}+0+100.json")
    pg = (24023128, None, None, None, 1700000000000, "555", "false", 1700000000100)
    got = rows(spark, "pg_public_actor", "_offset")
    assert [tuple(r[f] for f in BRONZE_FIELDS) for r in got] == [
        (ACTOR, 0, 100, file, 1, "envelope", "c", False, *pg,
         None, compact({"actor_id": 1, "first_name": "PENELOPE"}), compact(PG_SOURCE)),  # wrapped
        (ACTOR, 0, 101, file, 2, "envelope", "u", False, *pg, compact({"actor_id": 1, "first_name": "PENELOPE"}),
         compact({"actor_id": 1, "first_name": "PENNY"}), compact(PG_SOURCE)),
        (ACTOR, 0, 107, file, 8, "envelope", "d", True, *pg,
         compact({"actor_id": 1, "first_name": "PENNY"}), None, compact(PG_SOURCE)),
        (ACTOR, 0, 108, file, 9, "envelope", "t", False, *pg, None, None, compact(PG_SOURCE)),
    ]
    stamps = {r["_ingested_at"] for r in got}
    assert len(stamps) == 1 and isinstance(stamps.pop(), datetime)


def test_bronze_flattened_and_mysql_rows(spark, sink, first_run):
    file = uri(sink / CUSTOMERS / "partition=0" / f"{CUSTOMERS}+0+0.json")
    got = [{f: r[f] for f in BRONZE_FIELDS} for r in rows(spark, "my_inventory_customers", "_offset")]
    for r in got:  # flattened JSON text is checked as data (key order is not part of the contract)
        r["_after"] = json.loads(r["_after"]) if r["_after"] else None
        r["_source"] = json.loads(r["_source"])
    head = {"_topic": CUSTOMERS, "_partition": 0, "_source_file": file, "_before": None}
    assert got == [
        {**head, "_offset": 0, "_source_line": 1, "_shape": "flattened", "_op": "c", "_deleted": False,
         "_source_lsn": None, "_source_binlog_file": "mysql-bin.000003", "_source_binlog_pos": 154,
         "_source_binlog_row": 0, "_source_ts_ms": 1700000000000, "_source_tx_id": None, "_source_snapshot": None,
         "_ts_ms": 1700000000200,
         "_after": {"id": "1", "name": "Sally"},  # flattened values are JSON strings
         "_source": {"__op": "c", "__file": "mysql-bin.000003", "__pos": "154", "__row": "0",
                     "__source_ts_ms": "1700000000000", "__ts_ms": "1700000000200", "__deleted": "false"}},
        {**head, "_offset": 1, "_source_line": 2, "_shape": "flattened", "_op": "d", "_deleted": True,
         "_source_lsn": None, "_source_binlog_file": None, "_source_binlog_pos": None, "_source_binlog_row": None,
         "_source_ts_ms": 1700000000300, "_source_tx_id": None, "_source_snapshot": None, "_ts_ms": None,
         "_after": {"id": "1", "name": "Sally"},
         "_source": {"__deleted": "true", "__source_ts_ms": "1700000000300"}},
        {**head, "_offset": 5, "_source_line": 6, "_shape": "envelope", "_op": "r", "_deleted": False,
         "_source_lsn": None, "_source_binlog_file": "mysql-bin.000003", "_source_binlog_pos": 154,
         "_source_binlog_row": 0, "_source_ts_ms": None, "_source_tx_id": "abc:1", "_source_snapshot": None,
         "_ts_ms": 5, "_after": {"id": 3, "name": "Snap"}, "_source": MY_SOURCE},
    ]


def test_undeclared_topic_is_landed_unchecked(spark, first_run):
    got = rows(spark, "pg_public_film", "_offset")
    assert [(r["_partition"], r["_offset"], r["_op"], r["_after"]) for r in got] == [
        (2, 7, "r", compact({"film_id": 9, "title": "X"}))
    ]


def test_quarantine_rows(spark, sink, first_run):
    actor = uri(sink / ACTOR / "partition=0" / f"{ACTOR}+0+100.json")
    export = uri(sink / ACTOR / "partition=0" / "actor-export.json")
    customers = uri(sink / CUSTOMERS / "partition=0" / f"{CUSTOMERS}+0+0.json")
    lives = uri(sink / BAD_TOPIC / "partition=0" / f"{BAD_TOPIC}+0+0.json")
    bad_name = ("bad file name 'actor-export.json': expected <topic>+<partition>+<startOffset>.json "
                "(or .avro, [.<codec>].parquet) inside pg.public.actor/partition=<n>")
    got = rows(spark, "_quarantine", "_source_file, _source_line")
    fields = ["_topic", "_partition", "_offset", "_source_file", "_source_line", "reason", "raw"]
    assert [tuple(r[f] for f in fields) for r in got] == [
        (BAD_TOPIC, 0, 0, lives, 1,
         "topic '9lives' cannot be mapped to a bronze table name: table name '9lives' must match ^[a-z_][a-z0-9_]*$",
         '{"a":1}'),
        (CUSTOMERS, 0, 2, customers, 3, "unknown __op 'z' (expected one of c, u, d, r, t)", line(CUSTOMER_LINES[2])),
        (CUSTOMERS, 0, 3, customers, 4, "primary key column(s) [id] missing or null in row image `row fields` (op 'c')",
         line(CUSTOMER_LINES[3])),
        (CUSTOMERS, 0, 4, customers, 5, "malformed JSON or not a JSON object", "[1, 2]"),
        (ACTOR, 0, None, export, 1, bad_name, line(envelope("c", None, {"actor_id": 5}))),
        (ACTOR, 0, None, export, 2, bad_name, ""),
        (ACTOR, 0, 104, actor, 5, "malformed JSON or not a JSON object", "{not json"),
        (ACTOR, 0, 105, actor, 6, "unknown op 'x' (expected one of c, u, d, r, t)", line(ACTOR_LINES[5])),
        (ACTOR, 0, 106, actor, 7, "primary key column(s) [actor_id] missing or null in row image `after` (op 'c')",
         line(ACTOR_LINES[6])),
    ]


def counts(spark) -> dict[str, int]:
    tables = ["pg_public_actor", "my_inventory_customers", "pg_public_film", "_quarantine", "_ingested_files"]
    return {t: spark.table(f"`{SCHEMA}`.`{t}`").count() for t in tables}


def timeline(spark, table: str) -> list[str]:
    """The completed instants on a table's Hudi timeline (a write adds one)."""
    folder = table_folder(spark, SCHEMA, table) / ".hoodie"
    return sorted(p.name for p in folder.rglob("*") if p.suffix in (".commit", ".deltacommit", ".replacecommit"))


def test_rerun_new_file_and_replay(spark, sink, first_run):
    args = ["--input", str(sink), "--bronze-schema", SCHEMA, "--sources-yml", str(sink.parent / "sources.yml")]
    before = counts(spark)
    assert before == {"pg_public_actor": 4, "my_inventory_customers": 3, "pg_public_film": 1,
                      "_quarantine": 9, "_ingested_files": 5}

    # Same input again: every file is in the ledger, nothing is read or written.
    assert main(args) == 0
    assert counts(spark) == before

    # A file the sink wrote later is picked up; its malformed line makes the exit code 3.
    write_file(sink, ACTOR, f"{ACTOR}+0+110.json", [envelope("c", None, {"actor_id": 7}), "{bad"])
    assert main(args) == 3
    after = counts(spark)
    assert after == {**before, "pg_public_actor": 5, "_quarantine": 10, "_ingested_files": 6}
    new = rows(spark, "pg_public_actor", "_offset")[-1]
    assert (new["_offset"], new["_source_line"], new["_after"]) == (110, 1, '{"actor_id":7}')
    bad = rows(spark, "_quarantine", "_offset DESC NULLS LAST")[0]
    assert (bad["_offset"], bad["_source_line"], bad["raw"]) == (111, 2, "{bad")

    # Replay ignoring the ledger (as after a crash before the ledger write): keys drop every
    # duplicate, the summary says so, and no table gets a commit that adds nothing.
    commits = {t: timeline(spark, t) for t in after}
    replay = run(spark, IngestConfig(input_uri=str(sink), bronze_schema=SCHEMA, topics=r"pg\.public\.actor",
                                     sources_yml=sink.parent / "sources.yml", reprocess=True))
    assert [t.table for t in replay.tables] == ["pg_public_actor"]
    assert counts(spark) == after
    actor = replay.table("pg_public_actor")
    assert (actor.landed, actor.held) == (0, after["pg_public_actor"])
    assert replay.render().splitlines()[-1].startswith(
        f"1 table(s), {actor.files} file(s) read again (--reprocess), 0 record(s) added, {actor.held} held already")
    assert {t: timeline(spark, t) for t in after} == commits


def _file(topic: str, partition: int | None, start: int | None, error: str | None = None) -> SourceFile:
    name = f"{topic}+{partition}+{start}.json"
    return SourceFile(uri=name, read_path=name, topic=topic, partition=partition, start_offset=start, table="t",
                      error=error)


@pytest.mark.parametrize(("files", "lines", "shared"), [
    # back to back, in any listing order: nothing shared
    ([_file("a", 0, 3), _file("a", 0, 0)], {"a+0+0.json": 3, "a+0+3.json": 2}, False),
    # one range written again from a later start offset
    ([_file("a", 0, 0), _file("a", 0, 2)], {"a+0+0.json": 3, "a+0+2.json": 2}, True),
    # a long range covering two later files
    ([_file("a", 0, 0), _file("a", 0, 5), _file("a", 0, 7)], {"a+0+0.json": 9, "a+0+5.json": 1, "a+0+7.json": 1},
     True),
    # same offsets in other partitions or topics are other records
    ([_file("a", 0, 0), _file("a", 1, 0), _file("b", 0, 0)], {"a+0+0.json": 3, "a+1+0.json": 3, "b+0+0.json": 3},
     False),
    # files with a file-level error go to quarantine, not bronze
    ([_file("a", 0, 0), _file("a", 0, 1, error="bad name")], {"a+0+0.json": 3, "a+0+1.json": 3}, False),
])
def test_share_offsets(files, lines, shared):
    assert share_offsets(files, lines) is shared


def test_files_sharing_offsets_land_each_offset_once(spark, tmp_path):
    """A range the sink wrote again under another start offset: bronze holds each offset
    once, with the record the files agree on."""
    root = tmp_path / "topics"
    records = [envelope("c", None, {"actor_id": i}) for i in range(5)]
    write_file(root, ACTOR, f"{ACTOR}+0+0.json", records[:3])  # offsets 0-2
    write_file(root, ACTOR, f"{ACTOR}+0+2.json", records[2:])  # offsets 2-4
    write_file(root, ACTOR, f"{ACTOR}+1+0.json", records[:1], partition=1)  # another partition's offset 0
    (tmp_path / "sources.yml").write_text(SOURCES_YML)
    schema = "bronze_it_shared_offsets"
    drop_schemas(spark, [schema])
    try:
        summary = run(spark, IngestConfig(input_uri=str(root), bronze_schema=schema,
                                          sources_yml=tmp_path / "sources.yml"))
        actor = summary.table("pg_public_actor")
        # every line read; the shared one lands once, its other copy is counted as a duplicate
        assert (actor.events_read, actor.landed, actor.duplicates, actor.quarantined) == (7, 6, 1, 0)
        landed = [(r["_partition"], r["_offset"], r["_after"]) for r in
                  spark.sql(f"SELECT * FROM {schema}.pg_public_actor ORDER BY _partition, _offset").collect()]
        assert landed == [(0, i, f'{{"actor_id":{i}}}') for i in range(5)] + [(1, 0, '{"actor_id":0}')]
    finally:
        drop_schemas(spark, [schema])


def test_conflicting_copies_of_an_offset_are_quarantined(spark, tmp_path):
    """Three files of a partition overlap: offset 2 is held twice with the same record
    (kept once), offset 3 twice with different records (a conflict: both copies go to
    quarantine, naming both files), offset 4 twice the same again; a tombstone written
    as `null` in one file and as an empty line in another is the same tombstone."""
    root = tmp_path / "topics"
    r = [envelope("c", None, {"actor_id": i}) for i in range(6)]
    other = envelope("u", None, {"actor_id": 3, "first_name": "CHANGED"})
    a = write_file(root, ACTOR, f"{ACTOR}+0+0.json", [r[0], r[1], r[2]])  # offsets 0-2
    b = write_file(root, ACTOR, f"{ACTOR}+0+2.json", [r[2], r[3], r[4], "null"])  # offsets 2-5
    c = write_file(root, ACTOR, f"{ACTOR}+0+3.json", [other, r[4], ""])  # offsets 3-5
    (tmp_path / "sources.yml").write_text(SOURCES_YML)
    schema = "bronze_it_conflicts"
    drop_schemas(spark, [schema])
    try:
        summary = run(spark, IngestConfig(input_uri=str(root), bronze_schema=schema,
                                          sources_yml=tmp_path / "sources.yml"))
        landed = [(r["_offset"], r["_source_file"], r["_after"]) for r in
                  spark.sql(f"SELECT * FROM {schema}.pg_public_actor ORDER BY _offset").collect()]
        # the copy kept is the one of the first file (by URI) holding the offset
        assert landed == [(0, uri(a), '{"actor_id":0}'), (1, uri(a), '{"actor_id":1}'),
                          (2, uri(a), '{"actor_id":2}'), (4, uri(b), '{"actor_id":4}')]
        reason = (f"conflicting copies of offset 3 (topic {ACTOR}, partition 0): files {uri(b)}, {uri(c)} "
                  "hold different records at it")
        quarantined = [tuple(r) for r in spark.sql(
            f"SELECT _offset, _source_file, _source_line, reason, raw FROM {schema}._quarantine "
            "ORDER BY _source_file").collect()]
        assert quarantined == [(3, uri(b), 2, reason, line(r[3])), (3, uri(c), 1, reason, line(other))]
        actor = summary.table("pg_public_actor")
        assert (actor.events_read, actor.landed, actor.quarantined, actor.tombstones, actor.duplicates) == (10, 4, 2, 1, 3)
        assert summary.quarantined == 2
        assert "skipped by rule: 3 duplicate record(s) (an offset another file of the run holds with the same record)" \
            in summary.render().splitlines()
        ledger = {r[0]: tuple(r[1:]) for r in spark.sql(
            f"SELECT _source_file, lines, landed, quarantined, tombstones FROM {schema}._ingested_files").collect()}
        assert ledger == {uri(a): (3, 3, 0, 0), uri(b): (4, 1, 1, 1), uri(c): (3, 0, 1, 0)}
    finally:
        drop_schemas(spark, [schema])


def test_large_shares_land_with_bulk_insert(spark, sink, first_run, monkeypatch):
    """With every table's share over load.BULK_INSERT_MIN_BYTES, the bronze tables go in
    with bulk_insert and hold the same rows as the plain inserts of the first run; a
    replay adds nothing."""
    monkeypatch.setattr(load, "BULK_INSERT_MIN_BYTES", 1)
    calls: list[tuple[str, bool]] = []
    insert = load._insert_new_rows  # every insert, of one table or several, goes through it

    def spy(spark, table_insert, schema):  # noqa: ANN001, ANN202
        calls.append((table_insert.table, table_insert.bulk))
        return insert(spark, table_insert, schema)

    monkeypatch.setattr(load, "_insert_new_rows", spy)
    schema = "bronze_it_bulk"
    config = IngestConfig(input_uri=str(sink), bronze_schema=schema, sources_yml=sink.parent / "sources.yml")
    tables = ["pg_public_actor", "my_inventory_customers", "pg_public_film", "_quarantine"]
    drop_schemas(spark, [schema])
    try:
        run(spark, config)
        # quarantine and ledger rows are few and go in as plain inserts
        assert sorted(calls) == sorted([("_quarantine", False), ("_ingested_files", False), ("pg_public_actor", True),
                                        ("my_inventory_customers", True), ("pg_public_film", True)])
        order = "_source_file, _source_line"
        for table in tables:  # the first run's schema holds every file of the sink too
            got = [{k: v for k, v in r.items() if k != "_ingested_at"} for r in rows(spark, table, order, schema)]
            want = [{k: v for k, v in r.items() if k != "_ingested_at"} for r in rows(spark, table, order)]
            assert got == want, table
        before = {t: spark.table(f"{schema}.{t}").count() for t in tables}
        run(spark, replace(config, reprocess=True))
        assert {t: spark.table(f"{schema}.{t}").count() for t in tables} == before
    finally:
        drop_schemas(spark, [schema])


@pytest.mark.parametrize("job_runs", [True, False])
def test_tables_created_alongside_a_job_or_without_one(spark, job_runs):
    """created_alongside gives its tables whether a job ran in its block (its thread
    creates them once one runs) or none did (then they are created when asked), and says
    which this call created: a table already there, or a second call, created none."""
    schema = "bronze_it_alongside"
    tables = [(name, load.LEDGER_COLUMNS, load.LEDGER_KEY) for name in ("t_one", "t_two")]
    drop_schemas(spark, [schema])
    try:
        load.ensure_schema(spark, schema)
        spark.sql(f"CREATE TABLE {schema}.t_two (_topic string) USING parquet")  # already there
        with created_alongside(spark, schema, tables) as ensured:
            if job_runs:
                spark.range(3_000_000).selectExpr("sum(id * id % 7)").collect()
            assert ensured() == {"t_one": True, "t_two": False}
        assert load.table_exists(spark, schema, "t_one")
        with created_alongside(spark, schema, tables) as ensured:
            assert ensured() == {"t_one": False, "t_two": False}
    finally:
        drop_schemas(spark, [schema])


def test_avro_and_parquet_shares_weigh_as_the_json_lines_their_records_are_read_as():
    """load.use_bulk_insert's threshold is set on JSON bytes: an Avro or Parquet file counts
    the bytes of its records as JSON lines (split_stats' `bytes`), not its own, which are
    a few times fewer for the same records; a JSON file counts its size."""
    from ingestion.pipeline import _input_bytes

    def sink_file(name: str, kind: str, size: int, table: str = "t", error: str | None = None) -> SourceFile:
        return SourceFile(uri=f"file:/in/{name}", read_path=f"/in/{name}", topic="x", partition=0, start_offset=0,
                          table=table, error=error, size=size, format=kind)

    files = [sink_file("a.json", "json", 100), sink_file("b.avro", "avro", 30), sink_file("c.parquet", "parquet", 20),
             sink_file("d.avro", "avro", 40, table="u"), sink_file("e.avro", "avro", 50, error="cut short")]
    splits = [{"_source_file": "file:/in/b.avro", "bytes": 70}, {"_source_file": "file:/in/b.avro", "bytes": 60},
              {"_source_file": "file:/in/c.parquet", "bytes": 55}, {"_source_file": "file:/in/d.avro", "bytes": 90}]
    assert _input_bytes(files, splits) == {"t": 100 + 130 + 55, "u": 90}
    # before the records are counted, every table that may land is named
    assert _input_bytes(files) == {"t": 100, "u": 0}


def test_only_the_closed_metastore_client_is_run_again():
    """The message of the failure seen in a landing with four insert threads (Spark's
    AnalysisException as PySpark raises it) is the one retried; other errors are not."""
    seen = ('org.apache.hadoop.hive.ql.metadata.HiveException: Unable to fetch table pagila_public_category. '
            'Cannot invoke "org.apache.hadoop.hive.metastore.IMetaStoreClient.getTable(String, String)" because '
            'the return value of "org.apache.hadoop.hive.ql.metadata.Hive.getMSC()" is null')
    assert load.is_metastore_client_closed(RuntimeError(seen))
    assert not load.is_metastore_client_closed(RuntimeError("Table or view not found: bronze.pagila_public_category"))
    assert not load.is_metastore_client_closed(RuntimeError("Hive.getMSC() failed"))


CLOSED = RuntimeError('Unable to fetch table t. ... the return value of "org.apache.hadoop.hive.ql.metadata.Hive.getMSC()" is null')
OTHER = RuntimeError("Table or view not found: bronze.t")


@pytest.mark.parametrize("failures, lands, holds_none_per_call", [
    ([CLOSED], True, [True, False]),  # run again once, then lands
    ([CLOSED, CLOSED], True, [True, False, False]),  # the last attempt lands
    ([CLOSED, CLOSED, CLOSED], False, [True, False, False]),  # three attempts, then the error stands
    ([OTHER], False, [True]),  # never run again
])
def test_an_insert_runs_again_only_after_the_closed_client_and_then_checks_held_keys(
        monkeypatch, failures, lands, holds_none_per_call):
    """A retried insert may follow a failed attempt that committed: it must check the keys
    the table holds (holds_none off), and it stops after METASTORE_CLIENT_ATTEMPTS."""
    calls = []

    def once(spark, insert, schema):
        calls.append(insert.holds_none)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return 7

    monkeypatch.setattr(load, "_insert_new_rows_once", once)
    insert = load.TableInsert("t", None, [], ["id"], holds_none=True)
    if lands:
        assert load._insert_new_rows(None, insert, "bronze") == 7
    else:
        with pytest.raises(RuntimeError) as raised:
            load._insert_new_rows(None, insert, "bronze")
        assert raised.value is failures[-1]
    assert calls == holds_none_per_call
