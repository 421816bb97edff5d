"""Which Hudi index keeps a partitioned silver state table right, and what its upsert costs.

A silver model with `partition_by` keeps each key once, in the partition of its latest
values: an update that changes a partition column moves the row, a delete moves its
flagged row (values nulled) to Hudi's default partition, a late older event changes
nothing, a re-insert moves it back. Hudi does that only with a global index that
updates the partition path. This builds a state-table-shaped table of `--keys` rows over
`--partitions` partitions for each candidate below (the state table's other properties
as cdc_state_table_options sets them: merge-on-read, inline compaction every 5 delta
commits), then upserts `--rounds` batches into each, the candidates alternated round by
round: moves between partitions, updates in place, deletes, re-inserts of deleted keys
in another partition, late events older than the stored row, new keys; last a reset
(rows upserted back with the delete marker, as cdc_apply_resets does). After every
statement each table is compared row by row with the expected state, computed apart
in plain SQL (per key the row of the greatest `_cdc_order` over the initial rows and
every batch): no key twice, every row in the folder of its partition value. The
choice in cdc_partition_options is made from its output
(docs/decisions/silver-partitioned-global-index.md).

    python -m benchmarks.silver_partition_index [--keys 100000] [--partitions 50] [--rounds 6]
        [--only TEXT] [--master local[2]] [--out benchmarks/results/silver_partition_index.csv]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from benchmarks.measure import timed_sql
from core.spark import get_session

SCHEMA = "bench_scratch"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
STATE = {"type": "mor", "primaryKey": "address_id", "preCombineField": "_cdc_order",
         "hoodie.parquet.compression.codec": "zstd", "hoodie.parquet.max.file.size": str(16 * 2**20),
         "hoodie.parquet.small.file.limit": str(12 * 2**20), "hoodie.compact.inline": "true",
         "hoodie.compact.inline.max.delta.commits": "5"}
UPSERT = {"hoodie.spark.sql.insert.into.operation": "upsert", "hoodie.combine.before.upsert": "false",
          "hoodie.payload.delete.field": "_cdc_op", "hoodie.payload.delete.marker": "_cdc_delete"}
SPARK_MERGER = {"hoodie.write.record.merge.custom.implementation.classes": "org.apache.hudi.DefaultSparkRecordMerger"}
# candidate -> (partitioned, its properties over STATE and UPSERT)
CANDIDATES: dict[str, tuple[bool, dict[str, str]]] = {
    "BUCKET 4, unpartitioned (today's layout, for its cost)": (False, {
        "hoodie.index.type": "BUCKET", "hoodie.index.bucket.engine": "SIMPLE",
        "hoodie.bucket.index.num.buckets": "4", **SPARK_MERGER}),
    "GLOBAL_SIMPLE, update partition path": (True, {
        "hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.simple.index.update.partition.path": "true"}),
    "GLOBAL_BLOOM, update partition path": (True, {
        "hoodie.index.type": "GLOBAL_BLOOM", "hoodie.bloom.index.update.partition.path": "true"}),
    "GLOBAL_SIMPLE, update partition path, copy-on-write": (True, {
        "type": "cow", "hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.simple.index.update.partition.path": "true"}),
    "RECORD_INDEX, metadata table on for this table": (True, {
        "hoodie.index.type": "RECORD_INDEX", "hoodie.record.index.update.partition.path": "true",
        "hoodie.metadata.enable": "true", "hoodie.metadata.record.index.enable": "true"}),
    "GLOBAL_SIMPLE, update partition path off (control)": (True, {
        "hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.simple.index.update.partition.path": "false"}),
    # Run only when --only names it: in the partition move's merged lookup it fails the
    # upsert or crashes the JVM (SIGSEGV), which ends the run for every candidate.
    "GLOBAL_SIMPLE, update partition path, Spark-native merger": (True, {
        "hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.simple.index.update.partition.path": "true", **SPARK_MERGER}),
}
OPT_IN = ("Spark-native merger",)
COMPACTION = ("hoodie.compact.inline", "hoodie.compact.inline.max.delta.commits")
VALUES = ["address_id", "city_id", "address", "district", "phone", "last_update"]
COLUMNS = VALUES + ["_cdc_op", "_cdc_order", "_cdc_deleted"]


def _initial_sql(keys: int, partitions: int) -> str:
    return f"""
        select cast(id as int) as address_id, cast(pmod(id * 7919, {partitions}) as int) as city_id,
            concat(cast(id as string), ' Main Street') as address, concat('district ', cast(pmod(id, 97) as string))
                as district, lpad(cast(id as string), 10, '5') as phone,
            timestamp_seconds(1700000000 + id) as last_update, 'r' as _cdc_op,
            concat('0000|', lpad(cast(id as string), 12, '0')) as _cdc_order, false as _cdc_deleted
        from range(0, {keys})"""


def _batch_sql(state: str, round_: int, keys: int, partitions: int, new_keys: int) -> str:
    """Round `round_`'s changes, at most one per key, chosen from the expected state
    `state` by a hash of the key: 2% move, 1% update in place, 1% delete, 20% of the
    deleted keys come back in another partition, 1% of the keys changed before get a
    late event older than their stored one (deleted keys too), plus `new_keys` keys."""
    order = f"concat('{round_:04d}|', lpad(cast(address_id as string), 12, '0'))"
    step = f"1 + pmod(hash(address_id, {round_}, 'city'), {partitions - 1})"
    other_city = f"cast(pmod(coalesce(city_id, 0) + {step}, {partitions}) as int)"
    return f"""
        with chosen as (
            select *, pmod(hash(address_id, {round_}), 1000) as bucket from {state}
        )
        select address_id, {other_city} as city_id, concat(address, ' moved') as address, district, phone,
            last_update, 'u' as _cdc_op, {order} as _cdc_order, false as _cdc_deleted
        from chosen where not _cdc_deleted and bucket < 20
        union all
        select address_id, city_id, concat(address, ' v{round_}'), district, phone, last_update, 'u', {order}, false
        from chosen where not _cdc_deleted and bucket >= 20 and bucket < 30
        union all
        select address_id, null, null, null, null, null, 'd', {order}, true
        from chosen where not _cdc_deleted and bucket >= 30 and bucket < 40
        union all
        select address_id, {other_city}, concat(cast(address_id as string), ' again'), 'back', '0',
            timestamp_seconds(1800000000), 'c', {order}, false
        from chosen where _cdc_deleted and bucket < 200
        union all
        select address_id, {other_city}, 'late', 'late', 'late', timestamp_seconds(1600000000), 'u',
            concat('0000|late', lpad(cast(address_id as string), 12, '0')), false
        from chosen where _cdc_order >= '0001' and bucket >= 600 and bucket < 610
        union all
        select cast(id as int), cast(pmod(id, {partitions}) as int), 'new', 'new', 'new', timestamp_seconds(1900000000),
            'c', concat('{round_:04d}|', lpad(cast(id as string), 12, '0')), false
        from range({keys + (round_ - 1) * new_keys}, {keys + round_ * new_keys})"""


def _reset_sql(state: str) -> str:
    """1% of the stored rows, live or deleted, upserted back with the delete marker."""
    names = ", ".join("'_cdc_delete' as _cdc_op" if c == "_cdc_op" else c for c in COLUMNS)
    return f"select {names} from {state} where pmod(address_id, 100) = 7"


def _apply(spark: SparkSession, expected: str, changes: str) -> None:
    """The expected state after `changes`: per key the row of the greatest `_cdc_order`,
    an incoming row of equal order winning; rows carrying the delete marker removed."""
    names = ", ".join(COLUMNS)
    spark.sql(f"""
        create table {expected}_next using parquet as
        select {names} from (
            select *, row_number() over (partition by address_id order by _cdc_order desc, incoming desc) as n
            from (select {names}, 0 as incoming from {expected} union all select {names}, 1 from {changes})
        ) where n = 1 and _cdc_op != '_cdc_delete'""")
    spark.sql(f"drop table {expected}")
    spark.sql(f"alter table {expected}_next rename to {expected}")


def _check(spark: SparkSession, table: str, expected: str, partitioned: bool) -> str:
    """'' when `table` equals `expected` row by row, each key once and in its folder, else what differs."""
    names = ", ".join(COLUMNS)
    stored = spark.sql(f"select {names}, _hoodie_partition_path from {table}")
    rows, keys = stored.selectExpr("count(*)", "count(distinct address_id)").first()
    if rows != keys:
        return f"{rows - keys} keys stored twice"
    want = spark.sql(f"select {names} from {expected}")
    missing, extra = want.exceptAll(stored.drop("_hoodie_partition_path")).count(), \
        stored.drop("_hoodie_partition_path").exceptAll(want).count()
    if missing or extra:
        return f"{missing} expected rows missing, {extra} rows not expected"
    if partitioned:
        misplaced = stored.where(
            f"_hoodie_partition_path != concat('city_id=', coalesce(cast(city_id as string), '{DEFAULT_PARTITION}'))"
        ).count()
        if misplaced:
            return f"{misplaced} rows outside the folder of their partition value"
    return ""


def _table_folder(spark: SparkSession, table: str) -> Path:
    location = next(row.data_type for row in spark.sql(f"describe formatted {table}").collect()
                    if row.col_name == "Location")
    return Path(location.removeprefix("file:"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.silver_partition_index", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--only", default="", help="only the candidates whose name contains this text")
    ap.add_argument("--master", default=None,
                    help="Spark master when this starts Spark (default: the profile's); ignored in a running session")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/silver_partition_index.csv"))
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.keys < 1000 or args.partitions < 2:
        ap.error("need --rounds >= 1, --keys >= 1000 and --partitions >= 2")
    candidates = {name: c for name, c in CANDIDATES.items()
                  if args.only in name and (args.only or not any(text in name for text in OPT_IN))}
    if not candidates:
        ap.error(f"no candidate's name contains {args.only!r}; the candidates are: {', '.join(CANDIDATES)}")
    spark = get_session("local", {"spark.ui.showConsoleProgress": "false",
                                  **({"spark.master": args.master} if args.master else {})})
    spark.sql(f"create database if not exists {SCHEMA}")
    expected, batch = f"{SCHEMA}.partition_index_expected", f"{SCHEMA}.partition_index_batch"
    tables = {name: f"{SCHEMA}.partition_index_{i}" for i, name in enumerate(candidates)}
    for table in [expected, batch, f"{expected}_next", *tables.values()]:
        spark.sql(f"drop table if exists {table} purge")
    spark.sql(f"create table {expected} using parquet as {_initial_sql(args.keys, args.partitions)}")

    samples: dict[tuple[str, str], list[float]] = {}
    verdicts: dict[str, str] = {}
    notes: dict[str, str] = {}

    def run(name: str, measure: str, sql: str) -> None:
        if verdicts.get(name):
            return
        partitioned, _ = candidates[name]
        try:
            seconds = timed_sql(spark, sql)
        except Exception as error:  # a candidate that fails is a result, not the end of the run
            verdicts[name] = f"failed in {measure}: {str(error).splitlines()[0][:300]}"
            print(f"{name}: {verdicts[name]}", flush=True)
            return
        samples.setdefault((name, measure), []).append(seconds)
        verdicts[name] = _check(spark, tables[name], expected, partitioned)
        print(f"{name}: {measure} {seconds:.2f} s{' WRONG: ' + verdicts[name] if verdicts[name] else ''}", flush=True)

    for name, (partitioned, properties) in candidates.items():
        props = {**STATE, **properties}
        if props["type"] == "cow":  # Hudi refuses to compact a copy-on-write table
            props = {k: v for k, v in props.items() if k not in COMPACTION}
        run(name, "ctas", f"create table {tables[name]} using hudi "
            + ("partitioned by (city_id) " if partitioned else "")
            + "tblproperties (" + ", ".join(f"'{k}' = '{v}'" for k, v in props.items()) + ") "
            + f"as select {', '.join(COLUMNS)} from {expected}")
        if not verdicts.get(name):
            spark.sql(f"alter table {tables[name]} set tblproperties ("
                      + ", ".join(f"'{k}' = '{v}'" for k, v in UPSERT.items()) + ")")
    new_keys = max(args.keys // 200, 1)
    for round_ in range(1, args.rounds + 2):
        last = round_ == args.rounds + 1
        source = _reset_sql(expected) if last else _batch_sql(expected, round_, args.keys, args.partitions, new_keys)
        spark.sql(f"drop table if exists {batch} purge")
        spark.sql(f"create table {batch} using parquet as {source}")
        changes = spark.table(batch).count()
        _apply(spark, expected, batch)
        print(f"round {round_}: {changes} {'reset rows' if last else 'changes'}", flush=True)
        for name in candidates:
            run(name, "reset" if last else "upsert",
                f"insert into {tables[name]} ({', '.join(COLUMNS)}) select {', '.join(COLUMNS)} from {batch}")
    for name, table in tables.items():
        if "metadata table" in name:
            created = (_table_folder(spark, table) / ".hoodie" / "metadata").exists()
            notes[name] = "metadata table created" if created else "no metadata table created"
            print(f"{name}: {notes[name]}", flush=True)
    for table in [expected, batch, *tables.values()]:
        spark.sql(f"drop table if exists {table} purge")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["candidate", "measure", "master", "keys", "partitions", "samples", "median", "min", "max",
                         "verdict", "note"])
        for name in candidates:
            for measure in ("ctas", "upsert", "reset"):
                values = samples.get((name, measure), [])
                stats = [f"{v:.2f}" for v in (statistics.median(values), min(values), max(values))] if values \
                    else ["", "", ""]
                writer.writerow([name, measure, spark.sparkContext.master, args.keys, args.partitions, len(values),
                                 *stats, verdicts.get(name) or "equal to the expected state", notes.get(name, "")])
    print(f"wrote {args.out} ({time.strftime('%Y-%m-%d')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
