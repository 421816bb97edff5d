"""What a read of silver costs between compactions, by read path, on the same table.

Silver's state table is merge-on-read with a bucket index: each build appends its
changes to log files, and changes spread over the keys leave log files in every file
group until a compaction. This builds a state-table-like Hudi table of `--keys` rows
(the state table's layout: `cdc_state_table_options`, the upsert's properties), then
`--builds` upserts of `--changes` changes spread over the keys (a tenth of them reset
tombstones, which the state table deletes), then times a gold-like aggregate over the
current rows (median of `--rounds`):

  merge-on-read snapshot      the state table read as it is (Hudi merges each file
                              group's log files into its base file)
  ... with a setting          the same with one Hudi read or write setting changed
  base files + recent table   the view of docs/decisions/silver-read-path.md: the
                              read-optimized table (base files only) without the keys
                              of a parquet table the rows written since are appended
                              to, plus each key's newest row there

each after the builds and again after a compaction, and checks every read path gives
the same answer. Results: one row per read path and moment in `--out`.

    python -m benchmarks.silver_read_path [--keys 1000000] [--builds 4] [--changes 1000]
        [--rounds 3] [--only TEXT] [--master local[2]] [--out benchmarks/results/silver_read_path.csv]
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import sys
from pathlib import Path

from benchmarks.measure import timed_sql
from core.spark import get_session

SCHEMA = "silver_read_path"
MARKER = "_cdc_delete"
# read path -> (table properties over the state table's, session settings for the read)
SETTINGS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "merge-on-read snapshot": ({}, {}),
    "merge-on-read snapshot, Hudi's earlier reader": ({}, {"hoodie.file.group.reader.enabled": "false"}),
    "merge-on-read snapshot, position-based merging": (
        {"hoodie.write.record.positions": "true"}, {"hoodie.merge.use.record.positions": "true"}),
    "merge-on-read snapshot, parquet log blocks": ({"hoodie.logfile.data.block.format": "parquet"}, {}),
    "merge-on-read snapshot, 16 buckets": ({"hoodie.bucket.index.num.buckets": "16"}, {}),
    "base files + recent table": ({}, {}),
}
COLUMNS = "id, status, amount, updated_at, note, _cdc_order, _cdc_op, _cdc_deleted"  # no _hoodie_* columns
BASE_COLUMNS = ", ".join("base." + c for c in COLUMNS.split(", "))
GOLD = ("select status, count(*) as orders, sum(amount) as amount, max(updated_at) as last_update "
        "from {} group by status")


def table_properties(extra: dict[str, str]) -> str:
    properties = {
        "type": "mor", "primaryKey": "id", "preCombineField": "_cdc_order",
        "hoodie.index.type": "BUCKET", "hoodie.index.bucket.engine": "SIMPLE", "hoodie.bucket.index.num.buckets": "4",
        "hoodie.compact.inline": "false", "hoodie.parquet.compression.codec": "zstd",
        "hoodie.spark.sql.insert.into.operation": "upsert",
        "hoodie.write.record.merge.custom.implementation.classes": "org.apache.hudi.DefaultSparkRecordMerger",
        "hoodie.combine.before.upsert": "false",
        "hoodie.payload.delete.field": "_cdc_op", "hoodie.payload.delete.marker": MARKER,
        **extra,
    }
    return ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())


def build(spark, name: str, keys: int, builds: int, changes: int, extra: dict[str, str], overlay: bool) -> None:
    """The table `name` (and with `overlay` its recent table and view) after `builds` upserts."""
    spark.sql(f"drop view if exists {SCHEMA}.{name}_view")
    for table in (f"{name}_recent", name):
        spark.sql(f"drop table if exists {SCHEMA}.{table} purge")
    spark.sql(f"""
        create table {SCHEMA}.{name} using hudi tblproperties ({table_properties(extra)}) as
        select id, element_at(array('new', 'paid', 'shipped', 'done', 'void'), cast(id % 5 + 1 as int)) as status,
            cast(id % 100000 / 100 as decimal(12, 2)) as amount, timestamp_seconds(1700000000 + id) as updated_at,
            repeat(md5(cast(id as string)), 5) as note, format_string('%020d', id) as _cdc_order,
            'r' as _cdc_op, false as _cdc_deleted
        from range({keys})""")
    if overlay:  # parquet, appended to, as cdc_create_read_path makes it
        spark.sql(f"create table {SCHEMA}.{name}_recent using parquet "
                  f"as select {COLUMNS} from {SCHEMA}.{name} where false")
    rng = random.Random(1)
    for number in range(1, builds + 1):
        spark.createDataFrame([(k,) for k in rng.sample(range(keys), changes)], "id bigint") \
            .createOrReplaceTempView("changed")
        rows = f"""
            select id, 'paid' as status, cast(7.5 as decimal(12, 2)) as amount,
                timestamp_seconds(1800000000 + id) as updated_at, 'changed' as note,
                format_string('%020d', {keys} * {number} + id) as _cdc_order,
                if(id % 10 = 0, '{MARKER}', 'u') as _cdc_op, false as _cdc_deleted
            from changed"""
        if overlay:
            spark.sql(f"insert into {SCHEMA}.{name}_recent {rows}")
        spark.sql(f"insert into {SCHEMA}.{name} {rows}")
    if overlay:
        location = spark.sql(f"describe table extended {SCHEMA}.{name}").where("col_name = 'Location'").first()[1]
        spark.sql(f"drop table if exists {SCHEMA}.{name}_base")
        spark.sql(f"create table {SCHEMA}.{name}_base using hudi location '{location}' "
                  "options ('hoodie.query.as.ro.table' = 'true')")
        # the shape of the view cdc_create_read_path makes: each key's newest recent row
        spark.sql(f"""
            create or replace view {SCHEMA}.{name}_view as
            with recent as (
                select {COLUMNS} from (
                    select *, row_number() over (
                        partition by id order by _cdc_order desc, _cdc_op = '{MARKER}' desc) as rank
                    from {SCHEMA}.{name}_recent)
                where rank = 1
            )
            select {BASE_COLUMNS} from {SCHEMA}.{name}_base as base
            left anti join recent on base.id = recent.id
            where not base._cdc_deleted
            union all
            select {COLUMNS} from recent
            where _cdc_op != '{MARKER}' and not _cdc_deleted""")
    else:
        spark.sql(f"create or replace view {SCHEMA}.{name}_view as "
                  f"select * from {SCHEMA}.{name} where not _cdc_deleted")


def measure(spark, name: str, session: dict[str, str], rounds: int) -> tuple[float, list]:
    for key, value in session.items():
        spark.conf.set(key, value)
    try:
        query = GOLD.format(f"{SCHEMA}.{name}_view")
        answer = sorted(tuple(r) for r in spark.sql(query).collect())  # also compiles its code
        return statistics.median(timed_sql(spark, query) for _ in range(rounds)), answer
    finally:
        for key in session:
            spark.conf.unset(key)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.silver_read_path", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--builds", type=int, default=4)
    ap.add_argument("--changes", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="only the read paths whose name contains this text")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/silver_read_path.csv"))
    args = ap.parse_args(argv)
    spark = get_session("local", {"spark.master": args.master})
    spark.sql(f"create database if not exists {SCHEMA}")
    rows, answers = [], {}
    for number, (path, (extra, session)) in enumerate(SETTINGS.items()):
        if args.only not in path:
            continue
        name = f"state_{number}"
        build(spark, name, args.keys, args.builds, args.changes, extra, overlay=path == "base files + recent table")
        for moment in (f"after {args.builds} builds", "after a compaction"):
            if moment == "after a compaction":
                spark.sql(f"call run_compaction(op => 'scheduleAndExecute', table => '{SCHEMA}.{name}', "
                          "options => 'hoodie.compact.inline.max.delta.commits=1')").collect()
            seconds, answer = measure(spark, name, session, args.rounds)
            answers[(path, moment)] = answer
            rows.append({"read_path": path, "moment": moment, "keys": args.keys, "builds": args.builds,
                         "changes": args.changes, "seconds": round(seconds, 3)})
            print(f"{path:<50} {moment:<20} {seconds:7.3f} s", flush=True)
        spark.sql(f"drop view if exists {SCHEMA}.{name}_view")
        for table in (f"{name}_base", f"{name}_recent", f"{name}_ro", f"{name}_rt"):
            spark.sql(f"drop table if exists {SCHEMA}.{table}")
        spark.sql(f"drop table if exists {SCHEMA}.{name} purge")
    spark.catalog.dropTempView("changed")
    if len({tuple(a) for a in answers.values()}) > 1:
        print(f"read paths disagree: {answers}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
