"""The S3 sink's Avro and Parquet files land the same bronze rows, and build the same
silver tables, as its JSON files of the same events.

The events are real Debezium output (tests/fixtures/debezium, recorded with
JsonConverter, schemas on) and a typed table carrying every Debezium semantic type. The
JSON files hold the recorded values as JsonConverter wrote them; the Avro and Parquet
files hold the same records under the Avro schema AvroData derives from the recorded
Connect schema (testdata/sink_formats.py), as the sink's formats store them."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
from pathlib import Path

import pytest
import yaml

from core.spark import session_settings
from ingestion.pipeline import IngestConfig, run as ingest
from ingestion.transform import BRONZE_COLUMNS
from tests.integration.test_column_types import COLUMNS, EPOCH, debezium, micros, row
from tests.support.lakehouse import MODEL_TABLE_SUFFIXES, dbt_invoke, drop_schemas, drop_tables
from tests.support.paths import ROOT
from testdata.sink_formats import recorded_avro, recorded_values, write_avro, write_avro_bodies, write_parquet

pytestmark = pytest.mark.integration

FIXTURES = ROOT / "tests" / "fixtures" / "debezium" / "pagila-envelope"
# The recorded topics with every Debezium type the recording holds: Decimal, Enum, arrays,
# Tsvector, MicroTimestamp (film), Date (customer), ZonedTimestamp and a column added
# mid-stream (rental).
RECORDED_TOPICS = ("pagila.public.film", "pagila.public.customer", "pagila.public.rental")
# What the sink's flush.size would give: files of a few records.
FLUSH_SIZE = 3
# Every bronze column but the file a row came from and the time it landed.
COMPARED = [name for name, _ in BRONZE_COLUMNS if name not in ("_source_file", "_ingested_at")]
# The formats the mixed input cycles through, file by file: (suffix, Avro codec or Parquet codec).
MIXED = [(".avro", "null"), (".snappy.parquet", "SNAPPY"), (".avro", "deflate"), (".gz.parquet", "GZIP"),
         (".json", None), (".parquet", "UNCOMPRESSED")]


def runs(values: list[tuple[int, dict | None]]) -> list[tuple[int, list[dict]]]:
    """(start offset, values) of the files the sink writes: consecutive offsets of one
    Connect schema, at most FLUSH_SIZE each. Tombstones are left out (the Avro formats
    cannot hold a null value) and end a file, so each file's offsets stay start + index."""
    files: list[tuple[int, list[dict]]] = []
    previous = None
    for offset, value in values:
        if value is None:
            previous = None
            continue
        current = files[-1] if files and previous is not None else None
        if current is None or len(current[1]) == FLUSH_SIZE or current[1][0]["schema"] != value["schema"]:
            files.append((offset, [value]))
        else:
            current[1].append(value)
        previous = offset
    return files


def write_file(spark, root: Path, topic: str, start: int, values: list[dict], suffix: str, codec: str | None,
               block_records: int = 1000, old_lists: bool = True) -> None:
    """One sink file of `values` in the format its suffix names, in partition 0 of `topic` under `root`."""
    folder = root / topic / "partition=0"
    name = folder / f"{topic}+0+{start}"
    if suffix == ".json":
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name.name}.json").write_text("".join(json.dumps(v, separators=(",", ":")) + "\n" for v in values))
        return
    avro_file = folder / f"{name.name}.avro"
    write_avro(avro_file, values, block_records=block_records, codec=codec if suffix == ".avro" else "null")
    if suffix.endswith(".parquet"):
        write_parquet(spark, avro_file, folder / f"{name.name}{suffix}", codec, old_lists)
        avro_file.unlink()


def bronze_rows(spark, schema: str, table: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(
        f"select {', '.join(COMPARED)} from `{schema}`.`{table}` order by _partition, _offset").collect()]


@pytest.fixture
def schemas(spark):
    made: list[str] = []
    yield made
    drop_schemas(spark, made)


def test_recorded_debezium_events_land_the_same_bronze_rows_from_every_format(spark, tmp_path: Path, schemas):
    # Each format's files under a topic of its own (`<format>.<topic>`), landed in one run.
    topics = {path.stem: runs(recorded_values(path)) for path in sorted(FIXTURES.glob("*.jsonl"))
              if path.stem in RECORDED_TOPICS}
    root = tmp_path / "topics"
    cycle = itertools.cycle(MIXED)
    for topic, files in topics.items():
        for start, values in files:
            write_file(spark, root, f"json.{topic}", start, values, ".json", None)
            suffix, codec = next(cycle)
            # One record per Avro block: a file of several blocks, read in several splits below.
            write_file(spark, root, f"mixed.{topic}", start, values, suffix, codec, block_records=1)
    schema = "bronze_sink_formats"
    schemas.append(schema)
    drop_schemas(spark, [schema])
    # Splits of 1 kB: an Avro file's blocks are read by several tasks, whose lines must
    # still be numbered in file order.
    with session_settings(spark, {"spark.sql.files.maxPartitionBytes": "1024", "spark.sql.files.openCostInBytes": "0"}):
        summary = ingest(spark, IngestConfig(input_uri=str(root), bronze_schema=schema, sources_yml=tmp_path / "none.yml"))

    for topic, files in topics.items():
        table = topic.replace(".", "_")
        # The independent expectation: the recorded records, by offset.
        expected = {start + i: v["payload"] for start, values in files for i, v in enumerate(values)}
        json_rows = bronze_rows(spark, schema, f"json_{table}")
        assert [r[COMPARED.index("_offset")] for r in json_rows] == sorted(expected), topic
        for r in json_rows:
            payload = expected[r[COMPARED.index("_offset")]]
            assert (r[COMPARED.index("_op")], _parsed(r[COMPARED.index("_after")]),
                    _parsed(r[COMPARED.index("_before")])) == (payload["op"], payload["after"], payload["before"]), topic
        got = bronze_rows(spark, schema, f"mixed_{table}")
        assert len(got) == len(json_rows), topic
        for want_row, got_row in zip(json_rows, got):
            differing = {c: (g, w) for c, g, w in zip(COMPARED, got_row, want_row) if g != w and c != "_topic"}
            assert not differing, f"{table} offset {want_row[2]}: (got, want) {differing}"
    assert summary.quarantined == 0
    assert sum(t.landed for t in summary.tables) == 2 * sum(len(v) for f in topics.values() for _, v in f)


AVRO_FIXTURES = ROOT / "tests" / "fixtures" / "debezium-avro"
AVRO_TOPICS = ("pagila_avro.public.film", "pagila_avro.public.customer", "pagila_avro.public.rental")
# The row images and what orders them; the source block differs between the two
# connectors that recorded the twins (their names, their own snapshot positions).
TWIN_COLUMNS = ["_offset", "_op", "_deleted", "_before", "_after", "_source_lsn", "_source_tx_id"]


def test_recorded_avro_records_land_as_their_json_twins(spark, tmp_path: Path, schemas):
    """Records Debezium's Avro converter wrote (Apicurio registry, recorded), in the Avro
    files the sink writes from them, land the row images the JSON connector's records of
    the same events land."""
    writer_schemas = {int(k): v for k, v in json.loads((AVRO_FIXTURES / "schemas.json").read_text()).items()}
    root = tmp_path / "topics"
    files = 0
    for topic in AVRO_TOPICS:
        records = recorded_avro(AVRO_FIXTURES / "pagila-avro" / f"{topic}.jsonl")
        runs_of: list[tuple[int, list[dict]]] = []
        previous = None
        for offset, record in records:
            if record is None:
                previous = None
                continue
            last = runs_of[-1][1] if runs_of and previous is not None else None
            if last is None or len(last) == FLUSH_SIZE or last[0]["schema_id"] != record["schema_id"]:
                runs_of.append((offset, [record]))
            else:
                last.append(record)
            previous = offset
        for start, run in runs_of:
            write_avro_bodies(root / f"avro.{topic}" / "partition=0" / f"avro.{topic}+0+{start}.avro",
                              writer_schemas[run[0]["schema_id"]], [r["body"] for r in run])
            folder = root / f"json.{topic}" / "partition=0"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"json.{topic}+0+{start}.json").write_text("".join(r["json_value"] + "\n" for r in run))
            files += 1
    schema = "bronze_avro_twins"
    schemas.append(schema)
    drop_schemas(spark, [schema])

    summary = ingest(spark, IngestConfig(input_uri=str(root), bronze_schema=schema, sources_yml=tmp_path / "none.yml"))

    assert summary.quarantined == 0
    assert sum(t.files for t in summary.tables) == 2 * files
    for topic in AVRO_TOPICS:
        table = topic.replace(".", "_")
        select = f"select {', '.join(TWIN_COLUMNS)} from `{schema}`.`{{}}` order by _offset"
        want = [tuple(r) for r in spark.sql(select.format(f"json_{table}")).collect()]
        got = [tuple(r) for r in spark.sql(select.format(f"avro_{table}")).collect()]
        assert len(got) == len(want) > 0, topic
        for want_row, got_row in zip(want, got):
            differing = {c: (g, w) for c, g, w in zip(TWIN_COLUMNS, got_row, want_row) if g != w}
            assert not differing, f"{table} offset {want_row[0]}: (got, want) {differing}"


def _parsed(text: str | None):
    return None if text is None else json.loads(text)


# The typed table of test_column_types with the Debezium types silver does not declare
# there: they land in bronze as JsonConverter writes them; those declared here decode in silver.
EXTRA_COLUMNS = {
    "c_enum": ("string", None),
    "c_uuid": ("string", None),
    "c_json": ("string", None),
    "c_connect_date": ("date", None),
    "c_connect_ts": ("timestamp", "millis"),
}
TYPED_TOPIC = "test.public.typed"
MODEL = "typed"


def _field(column: str, kind: str, optional: bool = True, **extra) -> dict:
    return {"type": kind, "optional": optional, **extra, "field": column}


def _named(column: str, kind: str, connect_name: str, **extra) -> dict:
    return _field(column, kind, True, name=connect_name, version=1, **extra)


ROW_SCHEMA = {
    "type": "struct", "optional": True, "name": "test.public.typed.Value", "fields": [
        _field("id", "int32", False),
        _field("c_tinyint", "int16"), _field("c_smallint", "int16"), _field("c_int", "int32"),
        _field("c_bigint", "int64"), _field("c_boolean", "boolean"), _field("c_double", "float64"),
        _field("c_float", "float32"),
        _named("c_date", "int32", "io.debezium.time.Date"),
        _named("c_ts", "int64", "io.debezium.time.MicroTimestamp"),
        _named("c_ts_millis", "int64", "io.debezium.time.Timestamp"),
        _named("c_ts_nanos", "int64", "io.debezium.time.NanoTimestamp"),
        _named("c_tstz", "string", "io.debezium.time.ZonedTimestamp"),
        _field("c_decimal", "bytes", True, name="org.apache.kafka.connect.data.Decimal", version=1,
               parameters={"scale": "2", "connect.decimal.precision": "9"}),
        _field("c_dec_string", "string"), _field("c_dec_double", "float64"),
        {"type": "array", "items": {"type": "string", "optional": True}, "optional": True, "field": "c_array"},
        _field("c_binary", "bytes"),
        _field("c_tsrange", "string"), _field("c_intrange", "string"), _field("c_string", "string"),
        _named("c_enum", "string", "io.debezium.data.Enum", parameters={"allowed": "G,PG,PG-13"}),
        _named("c_uuid", "string", "io.debezium.data.Uuid"),
        _named("c_json", "string", "io.debezium.data.Json"),
        _field("c_connect_date", "int32", True, name="org.apache.kafka.connect.data.Date", version=1),
        _field("c_connect_ts", "int64", True, name="org.apache.kafka.connect.data.Timestamp", version=1),
        _named("c_time", "int32", "io.debezium.time.Time"),
        _named("c_microtime", "int64", "io.debezium.time.MicroTime"),
        {"type": "struct", "optional": True, "name": "io.debezium.data.VariableScaleDecimal", "version": 1,
         "doc": "Variable scaled decimal", "field": "c_numeric",
         "fields": [_field("scale", "int32", False), _field("value", "bytes", False)]},
        {"type": "struct", "optional": True, "name": "io.debezium.data.geometry.Point", "version": 1,
         "doc": "Geometry (POINT)", "field": "c_point",
         "fields": [_field("x", "float64", False), _field("y", "float64", False), _field("wkb", "bytes"),
                    _field("srid", "int32")]},
        {"type": "array", "optional": True, "field": "c_int_array",
         "items": {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                   "parameters": {"scale": "1"}}},
    ]}
SOURCE_SCHEMA = {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source", "fields": [
    _field("connector", "string", False), _field("db", "string", False), _field("schema", "string", False),
    _field("table", "string", False), _field("lsn", "int64"), _field("txId", "int64"), _field("ts_ms", "int64", False),
    _named("snapshot", "string", "io.debezium.data.Enum", parameters={"allowed": "true,last,false"})]}
ENVELOPE_SCHEMA = {"type": "struct", "optional": False, "name": "test.public.typed.Envelope", "version": 2, "fields": [
    {**ROW_SCHEMA, "field": "before"}, {**ROW_SCHEMA, "field": "after"}, {**SOURCE_SCHEMA, "field": "source"},
    _field("op", "string", False), _field("ts_ms", "int64")]}
# Float32 values whose text Python and Java's Float.toString (JsonConverter) write alike.
FLOATS = [1.5, -0.25, 65504.0, 0.0]


def _bytes_of(unscaled: int) -> str:
    """Base64 of BigInteger.toByteArray: the fewest two's-complement bytes."""
    size = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


def typed_values(key: int, n: int) -> dict:
    """The row image of `key` in version `n`, as JsonConverter writes it."""
    source = row(key, n)
    sign = -1 if (key + n) % 2 else 1
    return {
        **debezium({**source, "c_float": FLOATS[(key + n) % 4]}),
        "c_enum": ["G", "PG", "PG-13"][(key + n) % 3],
        "c_uuid": f"a0eebc99-9c0b-4ef8-bb6d-6bb9bd38{key:02d}{n:02d}",
        "c_json": json.dumps({"k": key, "n": [n, None]}),
        "c_connect_date": (source["c_date"] - EPOCH.date()).days,
        "c_connect_ts": micros(source["c_ts_millis"]) // 1000,
        "c_time": (key * 3600 + n) * 1000,
        "c_microtime": (key * 3600 + n) * 1_000_000 + 7,
        "c_numeric": {"scale": key, "value": _bytes_of(sign * (10**20 * key + n))},
        "c_point": {"x": 1.5 * key, "y": -2.0 * n, "wkb": base64.b64encode(bytes([1, key, n])).decode(), "srid": None},
        "c_int_array": [_bytes_of(-128 * key), _bytes_of(127 + n), None],
    }


def typed_event(op: str, lsn: int, before: dict | None, after: dict | None) -> dict:
    source = {"connector": "postgresql", "db": "test", "schema": "public", "table": "typed", "lsn": lsn,
              "txId": lsn, "ts_ms": 1_700_000_000_000 + lsn, "snapshot": "false"}
    return {"schema": ENVELOPE_SCHEMA,
            "payload": {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1_700_000_000_000 + lsn}}


def typed_project(root: Path) -> Path:
    """A copy of the project with a bronze source and a silver model per format: topic
    `<format>.test.public.typed`, model `typed_<format>`."""
    project = root / "project"
    project.mkdir()
    for name in ("dbt_project.yml", "macros", "models", "seeds"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, project / name)
    sources_yml = project / "models" / "silver" / "_silver__sources.yml"
    sources = yaml.safe_load(sources_yml.read_text())
    models_yml = project / "models" / "silver" / "_silver__models.yml"
    spec = yaml.safe_load(models_yml.read_text())
    model_sql = (ROOT / "models" / "silver" / "actor.sql").read_text()
    for kind in FORMATS:
        table = f"{kind}_test_public_typed"
        sources["sources"][0]["tables"].append(
            {"name": table, "meta": {"topic": f"{kind}.{TYPED_TOPIC}", "primary_key": ["id"]}})
        spec["models"].append({
            "name": f"{MODEL}_{kind}",
            "columns": [{"name": name, "data_type": data_type, **({"meta": {"debezium_encoding": enc}} if enc else {})}
                        for name, (data_type, enc) in {**COLUMNS, **EXTRA_COLUMNS}.items()],
        })
        (project / "models" / "silver" / f"{MODEL}_{kind}.sql").write_text(model_sql.replace("pagila_public_actor", table))
    sources_yml.write_text(yaml.safe_dump(sources, sort_keys=False))
    models_yml.write_text(yaml.safe_dump(spec, sort_keys=False))
    return project


def silver_typed(spark, kind: str) -> list[dict]:
    """`select *` of the typed silver table of `kind`, its declared columns, by key."""
    declared = {**COLUMNS, **EXTRA_COLUMNS}
    rows = [r.asDict(recursive=True) for r in spark.sql(f"select * from silver.{MODEL}_{kind} order by id").collect()]
    return [{k: bytes(v) if isinstance(v, (bytearray, memoryview)) else v for k, v in r.items() if k in declared}
            for r in rows]


FORMATS = {"json": [(".json", None)], "avro": [(".avro", "bzip2"), (".avro", "deflate")],
           "parquet": [(".snappy.parquet", "SNAPPY"), (".gz.parquet", "GZIP")]}
SILVER_TABLES = [f"{MODEL}_{kind}{suffix}" for kind in FORMATS for suffix in MODEL_TABLE_SUFFIXES]


def test_every_debezium_type_decodes_in_silver_as_from_json(spark, tmp_path: Path, schemas):
    events = [typed_event("c", 100 + k, None, typed_values(k, 0)) for k in (1, 2, 3, 4)]
    events += [typed_event("u", 200, typed_values(1, 0), typed_values(1, 1)),
               typed_event("d", 201, typed_values(3, 0), None),
               typed_event("u", 202, typed_values(2, 0), typed_values(2, 2))]
    root = tmp_path / "topics"
    for kind, suffixes in FORMATS.items():
        for i, start in enumerate(range(0, len(events), FLUSH_SIZE)):
            suffix, codec = suffixes[i % len(suffixes)]
            # Three-level Parquet lists: the two-level ones cannot hold c_int_array's null.
            write_file(spark, root, f"{kind}.{TYPED_TOPIC}", start, events[start:start + FLUSH_SIZE], suffix, codec,
                       block_records=2, old_lists=False)
    project = typed_project(tmp_path)
    schema = "bronze_typed_formats"
    schemas.append(schema)
    drop_schemas(spark, [schema])
    drop_tables(spark, [("silver", t) for t in SILVER_TABLES])
    # as a Hudi read in the same session leaves it (the gold models' incremental reads)
    with session_settings(spark, {"spark.sql.parquet.enableVectorizedReader": "false"}):
        summary = ingest(spark, IngestConfig(input_uri=str(root), bronze_schema=schema,
                                             sources_yml=project / "models/silver/_silver__sources.yml"))
    assert summary.quarantined == 0
    assert [t.landed for t in summary.tables] == [len(events)] * 3

    json_bronze = bronze_rows(spark, schema, "json_test_public_typed")
    assert [_parsed(r[COMPARED.index("_after")]) for r in json_bronze] == [e["payload"]["after"] for e in events]
    for kind in ("avro", "parquet"):
        got = bronze_rows(spark, schema, f"{kind}_test_public_typed")
        assert len(got) == len(json_bronze), kind
        for want_row, got_row in zip(json_bronze, got):
            differing = {c: (g, w) for c, g, w in zip(COMPARED, got_row, want_row) if g != w and c != "_topic"}
            assert not differing, f"{kind} offset {want_row[2]}: (got, want) {differing}"

    try:
        result = dbt_invoke("run", "--select", *[f"{MODEL}_{kind}" for kind in FORMATS], "--vars",
                            json.dumps({"cdc_bronze_schema": schema}), "--target-path", str(project / "target"),
                            project=project)
        assert result.success, f"dbt run failed: {str(result.exception or [r.message for r in result.result])[:2000]}"
        for kind in FORMATS:
            assert spark.sql(f"select count(*) from silver.{MODEL}_{kind}__cdc_rejected").collect()[0][0] == 0, kind
        # Silver from JSON against the source rows; from the other formats against it.
        versions = {1: 1, 2: 2, 4: 0}
        want = []
        for key, n in versions.items():
            source, values = row(key, n), typed_values(key, n)
            want.append({**source, "c_float": FLOATS[(key + n) % 4], "c_enum": values["c_enum"],
                         "c_uuid": values["c_uuid"], "c_json": values["c_json"], "c_connect_date": source["c_date"],
                         "c_connect_ts": source["c_ts_millis"]})
        from_json = silver_typed(spark, "json")
        assert from_json == want
        for kind in ("avro", "parquet"):
            assert silver_typed(spark, kind) == from_json, kind
    finally:
        drop_tables(spark, [("silver", t) for t in SILVER_TABLES])


def test_files_spark_cannot_read_are_quarantined_whole_and_the_rest_lands(spark, tmp_path: Path, schemas):
    topic = "pagila.public.actor"
    files = runs(recorded_values(FIXTURES / f"{topic}.jsonl"))
    root = tmp_path / "topics"
    folder = root / topic / "partition=0"
    (start, values), (cut_start, cut_values) = files[0], files[1]
    write_file(spark, root, topic, start, values, ".avro", "deflate")
    write_file(spark, root, topic, cut_start, cut_values, ".avro", "null", block_records=1)
    cut = folder / f"{topic}+0+{cut_start}.avro"
    cut.write_bytes(cut.read_bytes()[:-7])
    (folder / f"{topic}+0+900.avro").write_text(json.dumps(values[0]) + "\n")
    write_file(spark, root, topic, 901, values[:1], ".snappy.parquet", "SNAPPY")
    parquet = folder / f"{topic}+0+901.snappy.parquet"
    parquet.write_bytes(parquet.read_bytes()[:-3])
    schema = "bronze_sink_formats_bad"
    schemas.append(schema)
    drop_schemas(spark, [schema])

    summary = ingest(spark, IngestConfig(input_uri=str(tmp_path / "topics"), bronze_schema=schema,
                                         sources_yml=ROOT / "models/silver/_silver__sources.yml"))

    quarantine = {(Path(r[0]).name, r[1], r[2]) for r in spark.sql(
        f"select _source_file, _offset, reason from `{schema}`._quarantine").collect()}
    whole_cut = cut.read_bytes()
    assert quarantine == {
        (cut.name, None,
         f"{cut.name}: cut short or damaged: an Avro container file ends with its sync marker "
         f"{_sync_marker(whole_cut)}, this one ends with {whole_cut[-16:].hex()} ({len(whole_cut)} bytes)"),
        (f"{topic}+0+900.avro", None,
         f"{topic}+0+900.avro: not an Avro container file (the first bytes are b'{{\"sc', expected b'Obj\\x01')"),
        (parquet.name, None,
         f"{parquet.name}: not a whole Parquet file: it starts with b'PAR1' and ends with "
         f"{parquet.read_bytes()[-4:]!r}, expected b'PAR1' at both ends (cut short?)"),
    }
    landed = [tuple(r) for r in spark.sql(f"select _offset, _after from `{schema}`.pagila_public_actor order by _offset").collect()]
    assert [(o, _parsed(a)) for o, a in landed] == [(start + i, v["payload"]["after"]) for i, v in enumerate(values)]
    assert (summary.quarantined, summary.table("pagila_public_actor").landed) == (3, len(values))


def _sync_marker(avro_file: bytes) -> str:
    """The sync marker of a fastavro-written file: its header's last 16 bytes (the first block follows)."""
    from ingestion.avro import container_header

    return container_header(avro_file, "x").sync.hex()


@pytest.mark.parametrize("precision", [9, 38])
def test_parquet_decimals_render_as_connect_decimal_bytes(spark, precision):
    """Parquet files without the writer's Avro schema give decimals: rendered as the bytes
    of BigInteger.toByteArray of their unscaled value, as JsonConverter writes them."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType

    from ingestion.avro import decimal_bytes

    scale = 2
    unscaled = [0, 1, -1, 127, 128, -128, -129, 255, 256, -32768, 10**(precision - 1), -(10**precision - 1)]
    # Text, not Python's Decimal, whose context keeps 28 digits.
    texts = [("-" if u < 0 else "") + str(abs(u)).rjust(scale + 1, "0") for u in unscaled]
    frame = spark.createDataFrame([(f"{t[:-scale]}.{t[-scale:]}",) for t in texts], "u string").select(
        F.col("u").cast(DecimalType(precision, scale)).alias("d"))
    got = [base64.b64encode(bytes(r[0])).decode() for r in frame.select(
        decimal_bytes(F.col("d"), DecimalType(precision, scale))).collect()]
    assert got == [_bytes_of(u) for u in unscaled]
