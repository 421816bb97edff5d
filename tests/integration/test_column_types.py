"""Every data_type of the README's type table (and tinyint) through a silver model of
its own: declared in the YAML, built in full, read back with `select *`, then built
incrementally twice, each time equal row by row to the current state computed here in
Python from the same events. And a value that does not fit its declared type exactly
(a fraction for an int, "yes" for a boolean, an overflowing double, a decimal that
would lose digits, a date that does not parse, ...) is a rejected event naming the
column and its type, while every encoding Debezium legitimately sends is applied."""

from __future__ import annotations

import base64
import json
import shutil
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from ingestion.pipeline import IngestConfig, run as ingest
from tests.support.lakehouse import MODEL_TABLE_SUFFIXES, dbt_invoke, drop_schemas, drop_tables
from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

MODEL = "typed"
TOPIC = "test.public.typed"
RANGE = "struct<lower:{0},upper:{0},lower_inclusive:boolean,upper_inclusive:boolean,is_empty:boolean>"
# column -> (data_type, meta.debezium_encoding)
COLUMNS = {
    "id": ("int", None),
    "c_tinyint": ("tinyint", None),
    "c_smallint": ("smallint", None),
    "c_int": ("int", None),
    "c_bigint": ("bigint", None),
    "c_boolean": ("boolean", None),
    "c_double": ("double", None),
    "c_float": ("float", None),
    "c_date": ("date", None),
    "c_ts": ("timestamp", None),
    "c_ts_millis": ("timestamp", "millis"),
    "c_ts_nanos": ("timestamp", "nanos"),
    "c_tstz": ("timestamp", None),
    "c_decimal": ("decimal(9,2)", None),
    "c_dec_string": ("decimal(9,2)", "string"),
    "c_dec_double": ("decimal(9,2)", "double"),
    "c_array": ("array<string>", None),
    "c_binary": ("binary", None),
    "c_tsrange": (RANGE.format("timestamp"), None),
    "c_intrange": (RANGE.format("int"), None),
    "c_string": ("string", None),
}
EPOCH = datetime(1970, 1, 1)


def project_with_typed_model(root: Path) -> Path:
    """A copy of the project with one more bronze source (TOPIC) and silver model MODEL
    declaring COLUMNS."""
    project = root / "project"
    project.mkdir()
    for name in ("dbt_project.yml", "macros", "models", "seeds"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, project / name)
    sources_yml = project / "models" / "silver" / "_silver__sources.yml"
    sources = yaml.safe_load(sources_yml.read_text())
    sources["sources"][0]["tables"].append(
        {"name": "test_public_typed", "meta": {"topic": TOPIC, "primary_key": ["id"]}})
    sources_yml.write_text(yaml.safe_dump(sources, sort_keys=False))
    models_yml = project / "models" / "silver" / "_silver__models.yml"
    spec = yaml.safe_load(models_yml.read_text())
    spec["models"].append({
        "name": MODEL,
        "columns": [{"name": name, "data_type": data_type, **({"meta": {"debezium_encoding": enc}} if enc else {})}
                    for name, (data_type, enc) in COLUMNS.items()],
    })
    models_yml.write_text(yaml.safe_dump(spec, sort_keys=False))
    model_sql = (ROOT / "models" / "silver" / "actor.sql").read_text()
    (project / "models" / "silver" / f"{MODEL}.sql").write_text(
        model_sql.replace("pagila_public_actor", "test_public_typed"))
    return project


def row(key: int, n: int) -> dict:
    """The source row `key` in version `n`: plain Python values, extremes included."""
    sign = -1 if (key + n) % 2 else 1
    ts = datetime(2024, 2, 29, 23, 59, 58, 123456) + timedelta(days=key * 40 + n, microseconds=n)
    return {
        "id": key,
        "c_tinyint": [127, -128, 5, 0][(key + n) % 4],
        "c_smallint": [32767, -32768, 300 + n, 0][(key + n) % 4],
        "c_int": [2147483647, -2147483648, 70000 + n, 0][(key + n) % 4],
        "c_bigint": [9223372036854775807, -9223372036854775808, 5_000_000_000 + n, 0][(key + n) % 4],
        "c_boolean": (key + n) % 2 == 0,
        "c_double": [1e300, -0.1, 2.5e-300, 0.0][(key + n) % 4],
        "c_float": [1.5, -0.25, 2.0**127, 0.0][(key + n) % 4],
        "c_date": date(1969, 12, 31) + timedelta(days=key * 100 * sign + n),
        "c_ts": ts,
        "c_ts_millis": ts.replace(microsecond=ts.microsecond // 1000 * 1000),
        "c_ts_nanos": ts,
        "c_tstz": ts + timedelta(hours=key),
        "c_decimal": Decimal(sign * (1234567 * key + n)).scaleb(-2),
        "c_dec_string": Decimal(-sign * (76543 * key + n)).scaleb(-2),
        "c_dec_double": Decimal(sign * (1000 * key + n)).scaleb(-2),
        "c_array": [f"a{key}", f"v{n}", "x,y"][: key % 3 + 1],
        "c_binary": bytes([key, n, 0, 255, 128]),
        "c_tsrange": {"lower": datetime(2005, 5, 24, 22, 53, 30) + timedelta(seconds=key), "upper": None if n else datetime(2005, 5, 26),
                      "lower_inclusive": True, "upper_inclusive": False, "is_empty": False},
        "c_intrange": {"lower": -key, "upper": 10 * n + 5, "lower_inclusive": True, "upper_inclusive": False,
                       "is_empty": False},
        "c_string": f"  name {key}.{n} ",
    }


def micros(value: datetime) -> int:
    return (value - EPOCH) // timedelta(microseconds=1)


def debezium(values: dict) -> dict:
    """A row's values as Debezium's JSON converter encodes them (PostgreSQL connector,
    decimal.handling.mode=precise but for the columns whose meta says string or double,
    binary.handling.mode=bytes)."""
    unscaled = int(values["c_decimal"].scaleb(2))
    tsrange, intrange = values["c_tsrange"], values["c_intrange"]
    return {
        **values,
        "c_date": (values["c_date"] - EPOCH.date()).days,
        "c_ts": micros(values["c_ts"]),
        "c_ts_millis": micros(values["c_ts_millis"]) // 1000,
        "c_ts_nanos": micros(values["c_ts_nanos"]) * 1000 + 789,
        "c_tstz": values["c_tstz"].isoformat(timespec="microseconds") + "Z",
        "c_decimal": base64.b64encode(unscaled.to_bytes(8, "big", signed=True).lstrip(
            b"\xff" if unscaled < 0 else b"\x00") or b"\x00").decode(),
        "c_dec_string": str(values["c_dec_string"]),
        "c_dec_double": float(values["c_dec_double"]),
        "c_binary": base64.b64encode(values["c_binary"]).decode(),
        "c_tsrange": f'["{tsrange["lower"]}",{"" if tsrange["upper"] is None else chr(34) + str(tsrange["upper"]) + chr(34)})',
        "c_intrange": f"[{intrange['lower']},{intrange['upper']})",
    }


def envelope(op: str, lsn: int, before: dict | None, after: dict | None) -> str:
    source = {"connector": "postgresql", "db": "test", "schema": "public", "table": "typed", "lsn": lsn,
              "txId": lsn, "ts_ms": 1_700_000_000_000 + lsn, "snapshot": "false"}
    return json.dumps({"before": before, "after": after, "source": source, "op": op,
                       "ts_ms": 1_700_000_000_000 + lsn})


def flattened(op: str, lsn: int, values: dict) -> str:
    """ExtractNewRecordState's record: the row's fields, every scalar as a JSON string
    (numbers, booleans) as a connector with string-typed fields sends them."""
    fields = {k: v if isinstance(v, (str, list)) else json.dumps(v) for k, v in values.items()}
    return json.dumps({**fields, "__op": op, "__lsn": str(lsn), "__source_ts_ms": str(1_700_000_000_000 + lsn),
                       "__deleted": "false"})


def land(spark, root: Path, schema: str, offset: int, lines: list[str]) -> None:
    """`lines` as the sink file of TOPIC starting at `offset`, ingested into bronze `schema`."""
    folder = root / "topics" / TOPIC / "partition=0"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{TOPIC}+0+{offset:010d}.json").write_text("".join(line + "\n" for line in lines))
    ingest(spark, IngestConfig(input_uri=str(root / "topics"), bronze_schema=schema))


def build(project: Path, schema: str) -> str:
    """`dbt run --select MODEL` on `project` against bronze `schema`; its result message."""
    result = dbt_invoke("run", "--select", MODEL, "--vars", json.dumps({"cdc_bronze_schema": schema}),
                        "--target-path", str(project / "target"), project=project)
    assert result.success, f"dbt run failed: {str(result.exception or [r.message for r in result.result])[:2000]}"
    return result.result.results[0].message


def silver(spark) -> list[dict]:
    """`select *` of the silver table: its declared columns, by key, as plain Python."""
    rows = [r.asDict(recursive=True) for r in spark.sql(f"select * from silver.{MODEL} order by id").collect()]
    return [{k: bytes(v) if isinstance(v, (bytearray, memoryview)) else v for k, v in r.items() if k in COLUMNS}
            for r in rows]


def assert_rows(got: list[dict], want: list[dict]) -> None:
    """Equal row by row; a failure names the key and the columns that differ."""
    assert [r["id"] for r in got] == [r["id"] for r in want]
    for got_row, want_row in zip(got, want):
        differing = {c: (got_row[c], want_row[c]) for c in COLUMNS if got_row[c] != want_row[c]}
        assert not differing, f"id {got_row['id']}: (got, want) {differing}"


@pytest.fixture
def cleanup(spark):
    schemas = []
    yield schemas
    drop_schemas(spark, schemas)
    drop_tables(spark, [("silver", MODEL + s) for s in MODEL_TABLE_SUFFIXES])


def test_every_declared_type_builds_and_merges(spark, tmp_path: Path, cleanup):
    schema = "bronze_column_types"
    cleanup.append(schema)
    project = project_with_typed_model(tmp_path)
    state: dict[int, dict] = {}

    # batch 1: three inserts (envelope, JSON numbers); full build
    land(spark, tmp_path, schema, 0, [envelope("c", 100 + k, None, debezium(row(k, 0))) for k in (1, 2, 3)])
    state.update({k: row(k, 0) for k in (1, 2, 3)})
    assert build(project, schema) == "full refresh"
    assert_rows(silver(spark), [state[k] for k in sorted(state)])

    # batch 2: an update and an insert, flattened (numbers and booleans as strings); merged
    land(spark, tmp_path, schema, 3, [flattened("u", 200, debezium(row(1, 1))), flattened("c", 201, debezium(row(4, 1)))])
    state.update({1: row(1, 1), 4: row(4, 1)})
    assert build(project, schema) != "full refresh"
    assert_rows(silver(spark), [state[k] for k in sorted(state)])

    # batch 3: an update and a delete (envelope); merged
    land(spark, tmp_path, schema, 5, [envelope("u", 300, None, debezium(row(2, 2))),
                               envelope("d", 301, debezium(row(3, 0)), None)])
    state[2] = row(2, 2)
    del state[3]
    assert build(project, schema) != "full refresh"
    assert_rows(silver(spark), [state[k] for k in sorted(state)])


# (column, value sent in the envelope's row image, the declared type the rejection names)
NOT_FITTING = [
    ("c_int", 1.9, "int"), ("c_int", "1.9", "int"), ("c_int", "12abc", "int"), ("c_int", " 12", "int"),
    ("c_int", "1e3", "int"), ("c_int", 2147483648, "int"),
    ("c_tinyint", 128, "tinyint"), ("c_tinyint", "-129", "tinyint"),
    ("c_smallint", 32768, "smallint"), ("c_smallint", "1.5", "smallint"),
    ("c_bigint", "9223372036854775808", "bigint"), ("c_bigint", "0x10", "bigint"),
    ("c_boolean", "yes", "boolean"), ("c_boolean", "1", "boolean"), ("c_boolean", 0, "boolean"),
    ("c_boolean", "TRUE", "boolean"),
    ("c_double", "1e400", "double"), ("c_double", "-1e400", "double"), ("c_double", "NaN", "double"),
    ("c_double", "Infinity", "double"), ("c_double", "1e-400", "double"), ("c_double", "1,5", "double"),
    ("c_float", 1e39, "float"), ("c_float", "1e-50", "float"), ("c_float", "-Infinity", "float"),
    ("c_decimal", "not base64!", "decimal(9,2)"), ("c_decimal", "", "decimal(9,2)"),
    ("c_decimal", base64.b64encode((10**9).to_bytes(5, "big", signed=True)).decode(), "decimal(9,2)"),
    ("c_dec_string", "1.239", "decimal(9,2)"), ("c_dec_string", "1.2e3", "decimal(9,2)"),
    ("c_dec_string", "12345678.9", "decimal(9,2)"),
    ("c_dec_double", 1.2345, "decimal(9,2)"), ("c_dec_double", 1e-05, "decimal(9,2)"),
    ("c_date", "2020-02-30", "date"), ("c_date", "2020-01-01 junk", "date"), ("c_date", "2020-1-1", "date"),
    ("c_date", 2932897, "date"),
    ("c_ts", "not a time", "timestamp"), ("c_ts", "2020-01-01 25:00:00", "timestamp"), ("c_ts", "2020-01-01T10", "timestamp"),
    ("c_ts_millis", 9223372036854775807, "timestamp"),
    ("c_tstz", "2024-03-01T10:20:30Zjunk", "timestamp"),
    ("c_binary", "@@@@", "binary"), ("c_binary", "AQI", "binary"),
    ("c_tsrange", '["junk",)', RANGE.format("timestamp")),
    ("c_intrange", "[1.5,3)", RANGE.format("int")),
]
# (column, value as Debezium may send it, the value silver must hold)
FITTING = [
    ("c_int", "-0042", -42), ("c_bigint", -9223372036854775808, -9223372036854775808),
    ("c_boolean", "false", False),
    ("c_double", "1.0E10", 1e10), ("c_double", -0.0, -0.0), ("c_double", "1.7976931348623157E308", 1.7976931348623157e308),
    ("c_float", "3.4028235E38", 3.4028234663852886e38),
    ("c_dec_string", "-1.230", Decimal("-1.23")), ("c_dec_double", 0.01, Decimal("0.01")),
    ("c_dec_double", 1.0e6, Decimal("1000000.00")),
    ("c_date", "2024-02-29", date(2024, 2, 29)), ("c_date", "2020", EPOCH.date() + timedelta(days=2020)),
    ("c_ts", "-1", EPOCH - timedelta(microseconds=1)), ("c_tstz", "2024-03-01T10:20:00Z", datetime(2024, 3, 1, 10, 20)),
    ("c_tstz", "2024-03-01T10:20:30+02:00", datetime(2024, 3, 1, 8, 20, 30)),
    ("c_tsrange", '["2005-05-24 22:53:30.5",infinity]',
     {"lower": datetime(2005, 5, 24, 22, 53, 30, 500000), "upper": None, "lower_inclusive": True,
      "upper_inclusive": True, "is_empty": False}),
]


def test_values_that_do_not_fit_their_type_are_rejected(spark, tmp_path: Path, cleanup):
    """Each event carries one value that does not fit its column exactly: it is kept in
    the rejected table with a reason naming the column and its declared type, and left
    out of silver; each event with a value Debezium legitimately sends is applied."""
    schema = "bronze_column_types_strict"
    cleanup.append(schema)
    project = project_with_typed_model(tmp_path)
    bad = {100 + i: case for i, case in enumerate(NOT_FITTING)}
    good = {200 + i: case for i, case in enumerate(FITTING)}
    lines = [envelope("c", key, None, {**debezium(row(key, 0)), column: value})
             for key, (column, value, _) in {**bad, **good}.items()]
    land(spark, tmp_path, schema, 0, lines)
    build(project, schema)

    rejected = {r["id"]: r["_cdc_rejection"] for r in
                spark.sql(f"select id, _cdc_rejection from silver.{MODEL}__cdc_rejected").collect()}
    expected = {key: f'column {column}: "{text(value)}" is not a valid {data_type}'
                for key, (column, value, data_type) in bad.items()}
    assert rejected == expected
    assert_rows(silver(spark), [{**row(key, 0), column: held} for key, (column, _, held) in sorted(good.items())])


def text(value) -> str:
    """A row image's value as silver reads it: strings unquoted, numbers as JSON text, but
    fractional ones as Java's Double.toString writes them (Spark re-renders the image)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and not 1e-3 <= abs(value) < 1e7:
        mantissa, exponent = repr(value).split("e")
        return f"{mantissa if '.' in mantissa else mantissa + '.0'}E{int(exponent)}"
    return json.dumps(value)
