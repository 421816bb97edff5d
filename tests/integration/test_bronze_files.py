"""Bronze inserts and Hudi's small-file handling (load.INSERT_SETTINGS).

Hudi adds an insert's rows to a table file smaller than `hoodie.parquet.small.file.limit`
by rewriting that file. The ingestion caps the limit (load.SMALL_FILE_LIMIT_BYTES) so a
small run stops rewriting an ever larger file; this checks that the session setting
reaches Hudi's writer both ways, and that no row is lost or doubled either way. Large
shares of a run go in with bulk_insert instead (load.BULK_INSERT_MIN_BYTES), which
writes new files and leaves small ones alone. Both write Parquet without dictionaries.
"""

from __future__ import annotations

import pytest

from ingestion import load
from tests.support.lakehouse import drop_schemas, parquet_encodings, table_folder

SCHEMA = "bronze_files_test"
TABLE = "events"
COLUMNS = [("k", "string"), ("v", "string")]
KEY = ["k"]


@pytest.fixture
def table(spark):
    drop_schemas(spark, [SCHEMA])
    load.ensure_schema(spark, SCHEMA)
    load.ensure_table(spark, SCHEMA, TABLE, COLUMNS, KEY)
    yield f"{SCHEMA}.{TABLE}"
    drop_schemas(spark, [SCHEMA])


def _insert(spark, first: int, count: int, bulk: bool = False) -> None:
    rows = [(f"k{i:05d}", f"value {i}") for i in range(first, first + count)]
    load.insert_new_rows(spark, spark.createDataFrame(rows, "k string, v string"), SCHEMA, TABLE, COLUMNS, KEY, bulk)


def _file_groups(spark, table: str) -> int:
    # a Hudi data file is named <file group id>_<write token>_<instant>.parquet
    return spark.sql(f"select count(distinct split(_hoodie_file_name, '_')[0]) from {table}").first()[0]


def test_small_file_limit_reaches_hudi(spark, table, monkeypatch):
    assert load.INSERT_SETTINGS["hoodie.parquet.small.file.limit"] == str(load.SMALL_FILE_LIMIT_BYTES)

    _insert(spark, 0, 100)
    assert _file_groups(spark, table) == 1
    # a few KiB, under the limit: the next insert rewrites that file with its rows
    _insert(spark, 100, 100)
    assert _file_groups(spark, table) == 1
    # no file is small: the insert writes a file of its own and rewrites nothing
    monkeypatch.setitem(load.INSERT_SETTINGS, "hoodie.parquet.small.file.limit", "0")
    _insert(spark, 200, 100)
    assert _file_groups(spark, table) == 2
    _insert(spark, 250, 100)  # half of it already there: only k00300..k00349 are new
    assert _file_groups(spark, table) == 3

    keys = [row[0] for row in spark.sql(f"select k from {table}").collect()]
    assert sorted(keys) == [f"k{i:05d}" for i in range(350)]


def test_bulk_insert_writes_new_files_and_each_key_once(spark, table):
    _insert(spark, 0, 100)
    assert _file_groups(spark, table) == 1
    # half of it already there; bulk_insert writes k00100..k00149 to a new file, although
    # the table's file is small (an insert would have rewritten it, as above)
    _insert(spark, 50, 100, bulk=True)
    assert _file_groups(spark, table) == 2
    # a plain insert after it still adds to a small file
    _insert(spark, 150, 100)
    assert _file_groups(spark, table) == 2

    rows = [tuple(row) for row in spark.sql(f"select k, v from {table}").collect()]
    assert sorted(rows) == [(f"k{i:05d}", f"value {i}") for i in range(250)]


def test_inserts_write_no_dictionaries(spark, table):
    assert load.INSERT_SETTINGS["hoodie.parquet.dictionary.enabled"] == "false"
    _insert(spark, 0, 100)  # 100 short keys: Parquet's default would keep them in a dictionary
    _insert(spark, 100, 100, bulk=True)
    encodings = parquet_encodings(spark, table_folder(spark, SCHEMA, TABLE))
    assert {"k", "v", "_hoodie_record_key"} <= set(encodings)
    dictionary = {name: found for name, found in encodings.items() if any("DICTIONARY" in e for e in found)}
    assert dictionary == {}
    # the files of both writes were read
    assert spark.sql(f"select count(distinct _hoodie_commit_time) from {table}").first()[0] == 2


@pytest.mark.parametrize(("input_bytes", "bulk"), [
    (None, False),  # not known (Kafka micro-batch)
    (0, False),
    (load.BULK_INSERT_MIN_BYTES - 1, False),
    (load.BULK_INSERT_MIN_BYTES, True),
])
def test_use_bulk_insert(input_bytes, bulk):
    assert load.use_bulk_insert(input_bytes) is bulk


def test_within_key_bounds_keeps_the_rows_that_can_match_the_batch(spark):
    table_rows = [("a", p, o) for p in (0, 1) for o in range(0, 100, 7)] + [("b", 0, 50), ("c", 1, 60)]
    batch_rows = [("a", 0, 40), ("b", 1, 70), ("a", 1, 49)]
    schema = "t string, p int, o bigint"
    table, batch = spark.createDataFrame(table_rows, schema), spark.createDataFrame(batch_rows, schema)

    got = sorted(tuple(r) for r in load.within_key_bounds(table, batch, ["t", "p", "o"]).collect())
    bounds = [(min(col), max(col)) for col in zip(*batch_rows)]
    want = sorted(r for r in table_rows if all(lo <= v <= hi for v, (lo, hi) in zip(r, bounds)))
    assert got == want and ("b", 0, 50) in got and ("c", 1, 60) not in got
    # every row that shares a key with the batch is kept
    assert {r for r in table_rows if r in batch_rows} <= set(got)
    assert load.within_key_bounds(table, batch.limit(0), ["t", "p", "o"]).count() == 0


def test_replay_check_runs_only_on_tables_that_existed_before(spark, monkeypatch):
    """ensure_table says whether it created the table; an insert into a table the run
    created skips the known-key check (it holds no key), and every later insert keeps it:
    the keys already there are left out."""
    checks: list[str] = []
    check = load._without_known_keys

    def spy(table, df, key):  # noqa: ANN001, ANN202
        checks.append("check")
        return check(table, df, key)

    monkeypatch.setattr(load, "_without_known_keys", spy)
    drop_schemas(spark, [SCHEMA])
    load.ensure_schema(spark, SCHEMA)
    try:
        created = load.ensure_table(spark, SCHEMA, TABLE, COLUMNS, KEY)
        assert created is True
        rows = [(f"k{i:05d}", f"value {i}") for i in range(100)]
        load.insert_new_rows(spark, spark.createDataFrame(rows, "k string, v string"), SCHEMA, TABLE, COLUMNS, KEY,
                             holds_none=created)
        assert checks == []
        assert load.ensure_table(spark, SCHEMA, TABLE, COLUMNS, KEY) is False
        _insert(spark, 50, 100)  # k00050..k00099 are there: only k00100..k00149 go in
        assert checks == ["check"]
        keys = [row[0] for row in spark.sql(f"select k from {SCHEMA}.{TABLE}").collect()]
        assert sorted(keys) == [f"k{i:05d}" for i in range(150)]
    finally:
        drop_schemas(spark, [SCHEMA])


def test_tables_written_together_each_get_their_rows_and_an_error_is_raised(spark):
    """insert_new_rows_of_tables writes plain inserts several at a time: every table gets
    exactly its rows, a bulk one among them too, and an insert that fails (here: into a
    table that does not exist) is raised once the others are done, not swallowed."""
    drop_schemas(spark, [SCHEMA])
    load.ensure_schema(spark, SCHEMA)
    names = [f"t{i}" for i in range(4)]
    try:
        inserts = []
        for i, name in enumerate(names):
            created = load.ensure_table(spark, SCHEMA, name, COLUMNS, KEY)
            rows = [(f"{name}-k{j:03d}", f"value {j}") for j in range(10 * (i + 1))]
            df = spark.createDataFrame(rows, "k string, v string")
            inserts.append(load.TableInsert(name, df, COLUMNS, KEY, bulk=(i == 0), holds_none=created))
        missing = spark.createDataFrame([("x", "y")], "k string, v string")
        inserts.append(load.TableInsert("not_created", missing, COLUMNS, KEY, holds_none=True))
        with pytest.raises(Exception, match="not_created"):
            load.insert_new_rows_of_tables(spark, SCHEMA, inserts, threads=3)
        for i, name in enumerate(names):
            keys = sorted(row[0] for row in spark.sql(f"select k from {SCHEMA}.{name}").collect())
            assert keys == [f"{name}-k{j:03d}" for j in range(10 * (i + 1))], name
        # the session's settings are back as they were (the inserts set them for their time)
        assert spark.conf.get("hoodie.spark.sql.insert.into.operation", None) is None
    finally:
        drop_schemas(spark, [SCHEMA])
