"""The whole pipeline on real Spark and Hudi: the sample change streams (14 Pagila
tables and the MariaDB movies table) are ingested and built by `dbt build`: batches 1
and 2 together (one window holding the snapshot and changes of its rows), then batch 3
(the project's data tests with it), whose changes go through the incremental merge
against the silver tables the first build wrote; every silver table is compared row by row with the
current state the oracle computes from the raw files (the history tables with the
versions it computes), and the gold tables with the same joins computed in Python. Then a
--full-refresh build must give the same tables, a build with no new input must change
nothing, and silver's parquet files must be zstd. The decode macros are also checked on
encodings the sample does not contain (tstzrange, ZonedTimestamp, infinity bounds, ...)."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from ingestion.pipeline import IngestConfig, run as ingest
from tests.support import oracle
from tests.support.lakehouse import dbt, drop_tables, history_rows, parquet_codecs, silver_rows
from tests.support.paths import require_pagila
from tools.sample_data import DEFAULT_SEED, generate, outbox, polled

# The batches landed before each build. Batch 3's cases that refer to batch 2 must find
# batch 2 in silver, not in the same window: the unchanged-TOAST placeholders of staff 1
# and film f_toast (filled from silver's stored values only then), the late events older
# than what silver holds, MariaDB's binlog rotation. Batch 2's changes of snapshot rows
# need no build of their own: batch 3 updates, deletes and re-inserts rows an earlier
# build wrote too, and a full-sample build is the costliest step of the test suite.
BUILDS = ((1, 2), (3,))
# The project's data tests (114 queries, about a minute of a build) run with the last
# build only: the row-by-row comparisons after every build are the stronger check, and
# the tests on the final tables still run as `dbt build` runs them.
WITHOUT_DATA_TESTS = ("--exclude-resource-type", "test", "--exclude-resource-type", "unit_test")
META_COLUMNS = ["_cdc_op", "_cdc_order", "_cdc_source_ts", "_cdc_commit_time"]
HISTORY = ["actor", "movies"]  # tables with a history model, `<table>_history`
HISTORY_META = ["_cdc_valid_from", "_cdc_valid_to", "_cdc_is_current", "_cdc_op", "_cdc_order", "_cdc_valid_to_order",
                "_cdc_commit_time"]

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("empty_project_schemas")]


def snapshot_silver(spark) -> dict[str, list[dict]]:
    """Every silver table with its CDC metadata columns, to compare builds exactly."""
    tables = {
        table: silver_rows(spark, table, list(spec["columns"]) + META_COLUMNS, spec["primary_key"])
        for table, spec in oracle.TABLES.items()
    }
    for table in HISTORY:
        spec = oracle.TABLES[table]
        tables[f"{table}_history"] = silver_rows(spark, f"{table}_history", list(spec["columns"]) + HISTORY_META,
                                                 spec["primary_key"] + ["_cdc_order"])
    return tables


def assert_silver_matches_oracle(spark, batch_dirs: list[Path]) -> None:
    for table, spec in oracle.TABLES.items():
        expected = oracle.expected_current_state_from_batches(batch_dirs, table)
        actual = silver_rows(spark, table, list(spec["columns"]), spec["primary_key"])
        assert len(actual) == len(expected), f"silver.{table}: {len(actual)} rows, expected {len(expected)}"
        for got, want in zip(actual, expected):
            assert got == want, f"silver.{table} differs from the oracle:\n got  {got}\n want {want}"
    for table in HISTORY:
        spec = oracle.TABLES[table]
        expected = oracle.expected_history(oracle.files_in(batch_dirs, table), table)
        actual = history_rows(spark, f"silver.{table}_history", list(spec["columns"]), spec["primary_key"])
        assert len(actual) == len(expected), f"silver.{table}_history: {len(actual)} rows, expected {len(expected)}"
        for got, want in zip(actual, expected):
            assert got == want, f"silver.{table}_history differs from the oracle:\n got  {got}\n want {want}"


def expected_address_locations(batch_dirs: list[Path]) -> list[dict]:
    """The columns of gold.address_locations this test reads, from the oracle's join."""
    files = [f for table in ("address", "city", "country") for f in oracle.files_in(batch_dirs, table)]
    return [{c: row[c] for c in ("address_id", "city", "country")} for row in oracle.expected_address_locations(files)]


def expected_revenue_by_category_month(batch_dirs: list[Path]) -> list[dict]:
    """payment -> rental -> inventory -> film_category -> category, per category name and
    month of payment_date; a payment counts for every category of its film, or for a
    null category when the chain breaks."""
    def state(table: str) -> list[dict]:
        return oracle.expected_current_state_from_batches(batch_dirs, table)

    rentals = {r["rental_id"]: r for r in state("rental")}
    inventory = {r["inventory_id"]: r for r in state("inventory")}
    categories = {r["category_id"]: r["name"] for r in state("category")}
    film_categories = defaultdict(list)
    for r in state("film_category"):
        film_categories[r["film_id"]].append(r["category_id"])
    totals: dict[tuple, list] = {}
    for payment in state("payment"):
        rental = rentals.get(payment["rental_id"])
        item = inventory.get(rental["inventory_id"]) if rental else None
        names = [categories.get(c) for c in film_categories.get(item["film_id"], [])] if item else []
        month = date(payment["payment_date"].year, payment["payment_date"].month, 1)
        for name in names or [None]:
            total = totals.setdefault((name, month), [Decimal("0.00"), 0])
            total[0] += payment["amount"]
            total[1] += 1
    return [{"category_name": name, "payment_month": month, "revenue": revenue, "payment_count": count}
            for (name, month), (revenue, count) in sorted(totals.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))]


def assert_gold_matches(spark, batch_dirs: list[Path]) -> None:
    gold = [row.asDict() for row in spark.sql(
        "select address_id, city, country from gold.address_locations order by address_id").collect()]
    assert gold == expected_address_locations(batch_dirs)
    revenue = [row.asDict() for row in spark.sql(
        "select category_name, payment_month, revenue, payment_count from gold.revenue_by_category_month "
        "order by coalesce(category_name, ''), payment_month").collect()]
    expected = expected_revenue_by_category_month(batch_dirs)
    assert len(revenue) == len(expected), f"revenue_by_category_month: {len(revenue)} rows, expected {len(expected)}"
    for got, want in zip(revenue, expected):
        assert got == want, f"gold.revenue_by_category_month differs:\n got  {got}\n want {want}"
    # The outbox's orders as the generator's model holds them after the last batch landed.
    batch = int(batch_dirs[-1].name)
    events = outbox.build()
    # The event log's facts, then the same orders from the current document per order.
    facts = [("orders", events.expected_orders(batch)), ("order_items", events.expected_items(batch)),
             ("outbox_orders", events.expected_documents(batch)), ("outbox_order_items", events.expected_items(batch))]
    for gold, expected_rows in facts:
        columns = ", ".join(expected_rows[0])
        key = "order_id, product_id" if "product_id" in expected_rows[0] else "order_id"
        got = [row.asDict() for row in spark.sql(f"select {columns} from gold.{gold} order by {key}").collect()]
        assert got == expected_rows, f"gold.{gold} differs from the generator's model"
    # The query-based table: every polled row, by updated-at.
    products = [row.asDict() for row in spark.sql(
        "select product_id, product_name, unit_price, updated_at from silver.products order by product_id").collect()]
    assert products == polled.build().expected_rows(batch)


# Recreated as silver tables were before the state table (a Hudi table of the live rows,
# without the upsert's properties, beside a tombstone table): hard deletes (staff,
# payment) and a MariaDB table (movies); all have changes in the later batches.
OLD_STYLE_TABLES = ("staff", "payment", "movies")
UPSERT_PROPERTIES = {"hoodie.spark.sql.insert.into.operation", "hoodie.payload.delete.field",
                     "hoodie.payload.delete.marker", "hoodie.write.record.merge.custom.implementation.classes",
                     "hoodie.combine.before.upsert"}


def recreate_earlier_layout(spark, table: str, primary_key: list[str]) -> None:
    """silver.`table` as the layout before the state table left it: a copy-on-write Hudi
    table of the live rows with the CDC properties but not the upsert's, and a tombstone
    table of the deleted keys."""
    state = f"silver.{table}__cdc_state"
    properties = dict(spark.sql(f"show tblproperties {state}").collect())
    kept = {name: properties[name] for name in (
        "cdc.watermark", "cdc.resets", "hoodie.parquet.compression.codec", "hoodie.parquet.max.file.size",
        "hoodie.parquet.small.file.limit") if name in properties}
    columns = ", ".join(f"`{f.name}`" for f in spark.table(f"silver.{table}").schema)
    spark.sql(f"create table silver.{table}__copy using parquet as select {columns} from silver.{table}")
    spark.sql(f"create table silver.{table}__tomb using parquet as select {', '.join(primary_key)}, _cdc_order, "
              f"_cdc_source_ts as _cdc_deleted_at, _cdc_commit_time from {state} where _cdc_deleted")
    drop_tables(spark, [("silver", table), ("silver", f"{table}__cdc_state")])
    options = {"type": "cow", "primaryKey": ",".join(primary_key), "preCombineField": "_cdc_order", **kept}
    for name, copy in ((table, f"{table}__copy"), (f"{table}__cdc_tombstones", f"{table}__tomb")):
        spark.sql(f"create table silver.{name} using hudi tblproperties ("
                  + ", ".join(f"{sql_text(k)} = {sql_text(v)}" for k, v in options.items())
                  + f") as select * from silver.{copy}")
        spark.sql(f"drop table silver.{copy}")
    stored = " ".join(dict(spark.sql(f"show tblproperties silver.{table}").collect()))
    assert not [p for p in UPSERT_PROPERTIES if p in stored], stored


@pytest.fixture(scope="module")
def sample(run_dir: Path) -> Path:
    out = run_dir / "sample"
    generate(require_pagila(), out, DEFAULT_SEED)
    return out


def test_batches_incremental_full_refresh_and_rerun(spark, sample: Path, run_dir: Path):
    landing = run_dir / "landing" / "topics"
    landing.mkdir(parents=True)
    seen: list[Path] = []

    for build, batches in enumerate(BUILDS):
        before = list(seen)
        for batch in batches:
            batch_dir = sample / "batches" / str(batch)
            # The S3 sink adds new files next to the old ones.
            shutil.copytree(batch_dir / "topics", landing, dirs_exist_ok=True)
            seen.append(batch_dir)

        summary = ingest(spark, IngestConfig(input_uri=str(landing), bronze_schema="bronze"))
        assert summary.quarantined == 0, summary.render()
        assert summary.files_skipped == sum(len(list((d / "topics").rglob("*.json"))) for d in before)

        dbt("build", *(() if build == len(BUILDS) - 1 else WITHOUT_DATA_TESTS))
        assert_silver_matches_oracle(spark, seen)
        assert_gold_matches(spark, seen)
        if build == 1:
            # The tables recreated in the earlier layout were rebuilt as a view over a state table.
            for table in OLD_STYLE_TABLES:
                assert spark.catalog.getTable(f"silver.{table}").tableType == "VIEW", table
                assert not spark.catalog.tableExists(f"silver.{table}__cdc_tombstones"), table
        if build == 0:
            # Tables as a build before the state table left them: the next build must
            # rebuild them (above), not merge into them.
            for table in OLD_STYLE_TABLES:
                recreate_earlier_layout(spark, table, oracle.TABLES[table]["primary_key"])

    # Exactly the state tables that had an incremental build got the upsert's properties
    # (a full refresh creates them without: its CTAS is faster so): those of the tables
    # the third batch brought records for, but the recreated ones (rebuilt then).
    restored = {t for t in oracle.TABLES
                if UPSERT_PROPERTIES <= dict(spark.sql(f"show tblproperties silver.{t}__cdc_state").collect()).keys()}
    third = {t for t in oracle.TABLES if oracle.read_records(oracle.files_in(seen[-1:], t))}
    assert third and restored == third - set(OLD_STYLE_TABLES), (sorted(restored), sorted(third))
    assert set(OLD_STYLE_TABLES) <= third, "a recreated table had no records in the last batch: its rebuild untested"

    incremental = snapshot_silver(spark)

    dbt("build", "--full-refresh", *WITHOUT_DATA_TESTS)
    assert snapshot_silver(spark) == incremental, "--full-refresh gave other tables than the incremental builds"

    # No new input: ingestion lands nothing, the build commits nothing to silver.
    stored_tables = [*(f"{t}__cdc_state" for t in oracle.TABLES), *(f"{h}_history" for h in HISTORY)]
    commits_before = {t: spark.sql(f"call show_commits(table => 'silver.{t}', limit => 100)").count()
                      for t in stored_tables}
    summary = ingest(spark, IngestConfig(input_uri=str(landing), bronze_schema="bronze"))
    assert summary.tables == [] and summary.files_skipped > 0
    dbt("build", *WITHOUT_DATA_TESTS)
    assert snapshot_silver(spark) == incremental
    commits_after = {t: spark.sql(f"call show_commits(table => 'silver.{t}', limit => 100)").count()
                     for t in stored_tables}
    assert commits_after == commits_before, "a build with no new bronze commits wrote to silver"

    # `dbt source freshness`: every bronze table landed just now, as its own newest row says.
    freshness = run_dir / "sources.json"
    dbt("source", "freshness", "--output", str(freshness))
    results = {r["unique_id"].rsplit(".", 1)[1]: r for r in json.loads(freshness.read_text())["results"]}
    assert {oracle.TABLES[t]["topic"].replace(".", "_") for t in oracle.TABLES} <= set(results), sorted(results)
    for table, result in results.items():
        newest = spark.sql(f"select max(_ingested_at) from bronze.`{table}`").first()[0]
        assert result["status"] == "pass" and result["max_loaded_at"].startswith(newest.isoformat()), (table, result)

    # The profile turns Hudi's metadata table off for the ingestion and dbt alike.
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    timelines = sorted(warehouse.glob("*.db/*/.hoodie"))
    assert {t.parent.parent.name for t in timelines} >= {"bronze.db", "silver.db"}, timelines
    assert not [t for t in timelines if (t / "metadata").exists()], "a Hudi table has a metadata table"

    # Silver's tables are zstd (cdc_hudi_tblproperties), the files merges rewrote too.
    codecs = parquet_codecs(spark, warehouse / "silver.db")
    assert len(codecs) > len(oracle.TABLES) and all(c == {"ZSTD"} for c in codecs.values()), codecs
    # ... and cap their files at 16 MiB, so a MERGE rewrites a larger table as several tasks.
    # (The sample is far smaller; benchmarks/silver_index.py measures the effect.)
    for table in oracle.TABLES:
        properties = dict(spark.sql(f"show tblproperties silver.{table}__cdc_state").collect())
        assert (properties.get("hoodie.parquet.max.file.size"),
                properties.get("hoodie.parquet.small.file.limit")) == (str(16 * 2**20), str(12 * 2**20)), table


# Encodings the sample does not contain, through the same decode macros the models use.
RANGE = "struct<lower:timestamp,upper:timestamp,lower_inclusive:boolean,upper_inclusive:boolean,is_empty:boolean>"
DATE_RANGE = "struct<lower:date,upper:date,lower_inclusive:boolean,upper_inclusive:boolean,is_empty:boolean>"
DECODE_CASES = [
    # (raw JSON text as bronze holds it, data_type, expected value)
    ("2022-02-15T09:46:56.123456Z", "timestamp", datetime(2022, 2, 15, 9, 46, 56, 123456)),  # ZonedTimestamp
    ("2022-02-15T09:46:56Z", "timestamp", datetime(2022, 2, 15, 9, 46, 56)),
    ("-1", "timestamp", datetime(1969, 12, 31, 23, 59, 59, 999999)),  # MicroTimestamp
    ("-1", "date", date(1969, 12, 31)),
    ("gA==", "decimal(4,2)", Decimal("-1.28")),
    ("AIA=", "decimal(4,2)", Decimal("1.28")),
    ('["2005-05-24 22:53:30+00","2005-05-26 22:04:30.5+02")', RANGE,  # tstzrange: UTC instants
     {"lower": datetime(2005, 5, 24, 22, 53, 30), "upper": datetime(2005, 5, 26, 20, 4, 30, 500000),
      "lower_inclusive": True, "upper_inclusive": False, "is_empty": False}),
    ('["2005-05-24 22:53:30",infinity]', RANGE,
     {"lower": datetime(2005, 5, 24, 22, 53, 30), "upper": None,
      "lower_inclusive": True, "upper_inclusive": True, "is_empty": False}),
    ("(,)", RANGE, {"lower": None, "upper": None, "lower_inclusive": False, "upper_inclusive": False,
                    "is_empty": False}),
    ("empty", RANGE, {"lower": None, "upper": None, "lower_inclusive": False, "upper_inclusive": False,
                      "is_empty": True}),
    ("[2005-05-24,2005-05-26)", DATE_RANGE,  # daterange: bounds not quoted
     {"lower": date(2005, 5, 24), "upper": date(2005, 5, 26), "lower_inclusive": True,
      "upper_inclusive": False, "is_empty": False}),
    ('["__debezium_unavailable_value"]', "array<string>", ["__debezium_unavailable_value"]),
]
UNAVAILABLE_CASES = [
    ("__debezium_unavailable_value", True),
    ('["__debezium_unavailable_value"]', True),
    ("X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==", True),
    ('["__debezium_unavailable_value","x"]', False),
    ("__debezium_unavailable_value ", False),
]


def sql_text(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def test_decode_macros_on_other_encodings(spark):
    columns = [f"{{{{ cdc_decode_value({sql_text(sql_text(raw))!s}, {data_type!r}) }}}} as c{i}"
               for i, (raw, data_type, _) in enumerate(DECODE_CASES)]
    columns += [f"{{{{ cdc_is_unavailable({sql_text(sql_text(raw))!s}) }}}} as u{i}"
                for i, (raw, _) in enumerate(UNAVAILABLE_CASES)]
    compiled = dbt("compile", "--inline", "select " + ", ".join(columns)).results[0].node.compiled_code
    row = spark.sql(compiled).collect()[0].asDict(recursive=True)
    for i, (raw, data_type, want) in enumerate(DECODE_CASES):
        assert row[f"c{i}"] == want, f"{raw!r} as {data_type}: got {row[f'c{i}']!r}"
    for i, (raw, want) in enumerate(UNAVAILABLE_CASES):
        assert row[f"u{i}"] is want, f"cdc_is_unavailable({raw!r})"
