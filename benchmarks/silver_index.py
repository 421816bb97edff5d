"""What the silver MERGE costs with each Hudi index, codec and file size, on the same data.

cdc_incremental applies a batch with one MERGE whose source is the precomputed actions
(insert / update / delete). Hudi first looks up where each incoming key lives (the
index), then rewrites every copy-on-write file group a key of the batch falls in, one
task per file group. This builds a silver-like table of `--keys` rows (the benchmark's
row width, keys in no order the changes follow) with CTAS from one input split, as
dbt's CTAS from the batch work table reads it (Spark packs files into splits of up to
128 MiB), then runs that MERGE shape with `--changes` actions (10% of them deletes, 10%
new keys, the rest updates, spread over every file), for each setting below on a fresh
table, `--rounds` times, settings alternated so that drift of the machine hits all of
them. Each MERGE is checked: the table must then hold exactly the expected number of
rows and updated values. The project's choices in cdc_hudi_tblproperties (Hudi's SIMPLE
index, zstd, files of at most 16 MiB) are made from its output (docs/decisions/silver-index-codec-file-size.md).
Since 69b56f6 silver takes a batch as a Hudi upsert (cdc_upsert_properties), not a
MERGE; this still times the MERGE its committed results were measured with. Both look
up the same keys and rewrite the same file groups, which is what the settings change.

    python -m benchmarks.silver_index [--keys 1000000] [--changes 100000] [--rounds 3]
        [--only TEXT] [--master local[2]] [--out benchmarks/results/silver_index.csv]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from benchmarks.measure import timed_sql
from core.spark import get_session

# setting -> extra table properties (on top of what cdc_hudi_tblproperties sets)
SETTINGS: dict[str, dict[str, str]] = {
    "SIMPLE index (Hudi default)": {},
    "BLOOM index": {"hoodie.index.type": "BLOOM"},
    "BUCKET index, 4 buckets": {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"},
    "BUCKET index, 4 buckets, zstd": {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4",
                                      "hoodie.parquet.compression.codec": "zstd"},
    "SIMPLE index, zstd": {"hoodie.parquet.compression.codec": "zstd"},
    "SIMPLE index, snappy": {"hoodie.parquet.compression.codec": "snappy"},
    # Hudi's defaults: files up to 120 MiB, small-file limit 100 MiB. Here the limit is 3/4 of
    # the size, as in cdc_hudi_tblproperties (16 and 12 MiB).
    **{f"SIMPLE index, zstd, files <= {mib} MiB": {
        "hoodie.parquet.compression.codec": "zstd",
        "hoodie.parquet.max.file.size": str(mib * 2**20),
        "hoodie.parquet.small.file.limit": str(mib * 3 // 4 * 2**20)} for mib in (32, 16, 8)},
}
SCHEMA = "bench_scratch"
COLUMNS = ["order_id", "customer_id", "status", "amount", "order_date", "updated_at", "note",
           "_cdc_op", "_cdc_order", "_cdc_source_ts", "_cdc_commit_time"]


def _rows_sql(first: int, count: int, version: str) -> str:
    """`count` silver rows with keys first.., about 200 bytes each; `version` goes into
    the ordering field, so a later version is greater."""
    return f"""
        select
            id as order_id,
            cast(pmod(id * 7919, 50000) as int) as customer_id,
            element_at(array('new', 'paid', 'shipped', 'returned'), cast(pmod(id, 4) + 1 as int)) as status,
            cast(pmod(id * 31, 100000) / 100.0 as decimal(12, 2)) as amount,
            date_add(date'2024-01-01', cast(pmod(id, 700) as int)) as order_date,
            timestamp_seconds(1700000000 + id) as updated_at,
            concat(md5(cast(id as string)), md5(cast(id * 3 as string)), md5(cast(id * 5 as string))) as note,
            'r' as _cdc_op,
            concat('{version}|', lpad(cast(id as string), 20, '0')) as _cdc_order,
            timestamp_seconds(1700000000 + id) as _cdc_source_ts,
            '20260101000000000' as _cdc_commit_time
        from range({first}, {first + count})"""


def drop_staging(spark: SparkSession) -> None:
    for name in ("rows", "actions"):
        spark.sql(f"drop table if exists {SCHEMA}.silver_index_{name} purge")


def prepare(spark: SparkSession, keys: int, changes: int) -> dict[str, int]:
    """Parquet staging tables: the rows (`rows`) and the batch of actions (`actions`);
    returns the count of each action."""
    spark.sql(f"create database if not exists {SCHEMA}")
    drop_staging(spark)
    spark.sql(f"create table {SCHEMA}.silver_index_rows using parquet as {_rows_sql(0, keys, 'a')}"
              " distribute by pmod(hash(order_id), 8)")  # keys in no particular order, as in silver
    inserts = changes // 10
    every = max(keys // (changes - inserts), 1)  # 1 in `every` stored keys changes
    spark.sql(f"""
        create table {SCHEMA}.silver_index_actions using parquet as
        select
            order_id, customer_id, 'updated' as status, amount + 1 as amount, order_date, updated_at, note,
            'u' as _cdc_op, concat('b', substr(_cdc_order, 2)) as _cdc_order, _cdc_source_ts, _cdc_commit_time,
            case when pmod(order_id, {every * 10}) = 0 then 'delete' else 'update' end as _cdc_action
        from {SCHEMA}.silver_index_rows
        where pmod(order_id, {every}) = 0
        union all
        select *, 'insert' as _cdc_action from ({_rows_sql(keys, inserts, 'b')})""")
    return {row[0]: row[1] for row in spark.sql(
        f"select _cdc_action, count(*) from {SCHEMA}.silver_index_actions group by 1").collect()}


def _table_folder(spark: SparkSession, table: str) -> Path:
    location = next(row.data_type for row in spark.sql(f"describe formatted {table}").collect()
                    if row.col_name == "Location")
    return Path(location.removeprefix("file:"))


def _parquet_mib(folder: Path) -> float:
    """MiB of the table's parquet files (right after the CTAS: one version of each row)."""
    return sum(f.stat().st_size for f in folder.rglob("*.parquet")) / 2**20


def _file_groups(folder: Path) -> int:
    """File groups of a non-partitioned Hudi table: its parquet files' distinct ids."""
    return len({f.name.split("_", 1)[0] for f in folder.rglob("*.parquet")})


def one_round(spark: SparkSession, properties: dict[str, str], keys: int, counts: dict[str, int]) -> dict[str, float]:
    """Seconds of the CTAS and of the MERGE on a fresh table with `properties`, and the
    table's MiB and file groups after the CTAS."""
    table = f"{SCHEMA}.silver_index"
    props = {"type": "cow", "primaryKey": "order_id", "preCombineField": "_cdc_order", **properties}
    names = ", ".join(COLUMNS)
    spark.sql(f"drop table if exists {table} purge")
    ctas = timed_sql(spark, (
        f"create table {table} using hudi tblproperties ("
        + ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        + f") as select /*+ COALESCE(1) */ {names} from {SCHEMA}.silver_index_rows"))
    folder = _table_folder(spark, table)
    size, file_groups = _parquet_mib(folder), _file_groups(folder)
    merge = timed_sql(spark, f"""
        merge into {table} as stored
        using (select * from {SCHEMA}.silver_index_actions) as change
        on stored.order_id = change.order_id
        when matched and change._cdc_action = 'delete' then delete
        when matched and change._cdc_action = 'update' then update set
            {", ".join(f"{c} = change.{c}" for c in COLUMNS)}
        when not matched and change._cdc_action = 'insert' then insert ({names})
            values ({", ".join(f"change.{c}" for c in COLUMNS)})""")
    total, updated = spark.sql(f"select count(*), count_if(status = 'updated') from {table}").first()
    expected = keys - counts.get("delete", 0) + counts.get("insert", 0)
    if (total, updated) != (expected, counts.get("update", 0)):
        raise RuntimeError(f"MERGE with {properties}: {total} rows ({updated} updated), "
                           f"expected {expected} ({counts.get('update', 0)} updated)")
    spark.sql(f"drop table if exists {table} purge")
    return {"ctas_s": ctas, "merge_s": merge, "size_mib": size, "file_groups": file_groups}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.silver_index", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--changes", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="only the settings whose name contains this text")
    ap.add_argument("--master", default=None,
                    help="Spark master when this starts Spark (default: the profile's); ignored in a running session")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/silver_index.csv"))
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.keys < 100 or not 10 <= args.changes <= args.keys:
        ap.error("need --rounds >= 1, --keys >= 100 and 10 <= --changes <= --keys")
    settings = {name: props for name, props in SETTINGS.items() if args.only in name}
    if not settings:
        ap.error(f"no setting's name contains {args.only!r}; the settings are: {', '.join(SETTINGS)}")
    spark = get_session("local", {"spark.master": args.master} if args.master else None)
    counts = prepare(spark, args.keys, args.changes)
    print(f"{args.keys} rows; actions {counts}", flush=True)
    one_round(spark, {}, args.keys, counts)  # JIT and class loading, not measured
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name, properties in settings.items():
            for measure, value in one_round(spark, properties, args.keys, counts).items():
                samples.setdefault((name, measure), []).append(value)
                print(f"{name}: {measure} {value:.2f}", flush=True)
    drop_staging(spark)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["setting", "measure", "master", "keys", "changes", "samples", "median", "min", "max"])
        for (name, measure), values in samples.items():
            writer.writerow([name, measure, spark.sparkContext.master, args.keys, sum(counts.values()), len(values),
                             f"{statistics.median(values):.2f}", f"{min(values):.2f}", f"{max(values):.2f}"])
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
