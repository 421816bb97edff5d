"""What one incremental silver build costs with each write design, on the same windows.

A lakehouse whose bronze `bench_public_orders` holds the benchmark generator's stream in
several commits (one per landed segment: `first`, then small ones) is replayed window by
window, each bronze commit after the first being one build's window, for each design:

  current   what cdc_incremental does today: the batch; the actions (the batch joined to
            silver and to its tombstones: skip, insert, update, delete, tombstone); one
            Hudi upsert into silver (deletes by the delete marker); a MERGE into the
            tombstones table
  state     one Hudi table holding the latest event of every key, deleted keys as rows
            flagged `_cdc_deleted` with their values nulled (the tombstones), read
            through a view that leaves them out: the batch, then one Hudi upsert of its
            changes; Hudi's event-time ordering on `_cdc_order` keeps the newer of the
            stored and the incoming event, so a late event or a late delete changes
            nothing and a deleted key stays deleted against older events

each on copy-on-write (16 MiB files, zstd, Hudi's default index, as cdc_hudi_tblproperties)
and on merge-on-read with Hudi's SIMPLE bucket index (`--buckets`, inline compaction
every `--compact-every` delta commits). Designs are alternated within each window so
drift of the machine hits all of them. The batch is the model's own batch statement
(from `dbt run --select orders` of the benchmark project, the statement that creates
`orders__cdc_batch`, its window bounded by the two commits). After the last window each
design's current state is compared row by row with the reference full recompute
(`reference.orders_full_recompute`, built by `dbt run --select orders_full_recompute`
after every segment landed): a design that gives a wrong answer fails the run.

    CDC_LAKEHOUSE_DIR=<lakehouse> python -m benchmarks.silver_designs --batch-sql FILE
        [--designs current-cow,current-mor,state-cow,state-mor] [--buckets 8]
        [--compact-every 5] [--out benchmarks/results/silver_designs.csv]

docs/decisions/silver-one-state-table.md reads its output.
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from benchmarks.measure import timed_sql
from core.spark import get_session

BRONZE = "bronze.bench_public_orders"
KEY = "order_id"
ROW_COLUMNS = ["order_id", "customer_id", "status", "amount", "order_date", "updated_at", "note"]
META_COLUMNS = ["_cdc_op", "_cdc_order", "_cdc_source_ts", "_cdc_commit_time"]
COW = {
    "type": "cow",
    "hoodie.parquet.max.file.size": str(16 * 2**20),
    "hoodie.parquet.small.file.limit": str(12 * 2**20),
}
UPSERT = {
    "hoodie.spark.sql.insert.into.operation": "upsert",
    "hoodie.write.record.merge.custom.implementation.classes": "org.apache.hudi.DefaultSparkRecordMerger",
    "hoodie.combine.before.upsert": "false",
}
DELETE_MARKER = {"hoodie.payload.delete.field": "_cdc_op", "hoodie.payload.delete.marker": "_cdc_delete"}
WINDOW = re.compile(r"(cdc_window as \(\s*select \* from cdc_change_log\s*where )(.*?)(\n\s*\),)", re.S)


def mor(buckets: int, compact_every: int) -> dict[str, str]:
    return {
        "type": "mor",
        "hoodie.index.type": "BUCKET",
        "hoodie.index.bucket.engine": "SIMPLE",
        "hoodie.bucket.index.num.buckets": str(buckets),
        "hoodie.bucket.index.hash.field": KEY,
        "hoodie.compact.inline": "true",
        "hoodie.compact.inline.max.delta.commits": str(compact_every),
    }


def tblproperties(options: dict[str, str]) -> str:
    base = {"primaryKey": KEY, "preCombineField": "_cdc_order", "hoodie.parquet.compression.codec": "zstd"}
    return ", ".join(f"'{k}' = '{v}'" for k, v in {**base, **options}.items())


def state_rows(batch: str) -> str:
    """The state table's rows from the batch's changes: a deleted key's values nulled."""
    values = [c if c == KEY else f"case when _cdc_deleted then null else {c} end as {c}" for c in ROW_COLUMNS]
    return f"select {', '.join(values + META_COLUMNS)}, _cdc_deleted from {batch} where _cdc_row = 'change'"


def batch_statement(batch_sql: str, low: str | None, high: str) -> str:
    """The model's batch over the bronze commits in (low, high]."""
    body = batch_sql[batch_sql.index(" as with") + 4:] if " as with" in batch_sql else batch_sql
    predicate = f"_hoodie_commit_time <= '{high}'" + (f" and _hoodie_commit_time > '{low}'" if low else "")
    if not WINDOW.search(body):
        raise SystemExit("--batch-sql: no cdc_window stage found (give the statement that creates orders__cdc_batch)")
    return WINDOW.sub(lambda m: m.group(1) + predicate + m.group(3), body, count=1)


class Design:
    def __init__(self, spark: SparkSession, name: str, options: dict[str, str]) -> None:
        self.spark, self.name, self.options = spark, name, options
        self.schema = "design_" + name.replace("-", "_")
        self.state = name.startswith("state")

    def sql(self, statement: str) -> float:
        return timed_sql(self.spark, statement)

    def create(self, batch: str) -> None:
        s = self.schema
        self.spark.sql(f"drop database if exists {s} cascade")
        self.spark.sql(f"create database {s}")
        cols = ", ".join(ROW_COLUMNS + META_COLUMNS)
        if self.state:
            self.sql(f"create table {s}.state using hudi tblproperties ({tblproperties(self.options)}) "
                     f"as {state_rows(batch)}")
            self.upsert_properties(f"{s}.state", UPSERT)
            self.spark.sql(f"create view {s}.orders as select {cols} from {s}.state where not _cdc_deleted")
            return
        self.sql(f"create table {s}.orders using hudi tblproperties ({tblproperties(self.options)}) "
                 f"as select {cols} from {batch} where _cdc_row = 'change' and not _cdc_deleted")
        self.upsert_properties(f"{s}.orders", {**UPSERT, **DELETE_MARKER})
        self.sql(f"create table {s}.tombstones using hudi tblproperties ({tblproperties(COW)}) as select {KEY}, "
                 f"_cdc_order, _cdc_source_ts as _cdc_deleted_at, _cdc_commit_time from {batch} "
                 "where _cdc_row = 'change' and _cdc_deleted")

    def upsert_properties(self, table: str, properties: dict[str, str]) -> None:
        """Set after the CTAS, as cdc_ensure_upsert_properties does: a CTAS with them writes
        many more file groups, which every later copy-on-write upsert rewrites."""
        listed = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
        self.spark.sql(f"alter table {table} set tblproperties ({listed})")

    def apply(self, batch: str) -> dict[str, float]:
        s = self.schema
        if self.state:
            return {"upsert": self.sql(
                f"insert into {s}.state ({', '.join(ROW_COLUMNS + META_COLUMNS)}, _cdc_deleted) {state_rows(batch)}")}
        times = {}
        self.spark.sql(f"drop table if exists {s}.actions")
        times["actions"] = self.sql(f"""
            create table {s}.actions using parquet as
            select {', '.join('batch.' + c for c in ROW_COLUMNS + META_COLUMNS)},
                tombstone.{KEY} is not null as _cdc_has_tombstone,
                case
                    when batch._cdc_order <= coalesce(greatest(stored._cdc_order, tombstone._cdc_order), '') then 'skip'
                    when batch._cdc_deleted and stored.{KEY} is not null then 'delete'
                    when batch._cdc_deleted then 'tombstone'
                    when stored.{KEY} is not null then 'update'
                    else 'insert'
                end as _cdc_action
            from {batch} as batch
            left join {s}.orders as stored on batch.{KEY} = stored.{KEY}
            left join {s}.tombstones as tombstone on batch.{KEY} = tombstone.{KEY}
            where batch._cdc_row = 'change'""")
        times["counts"] = self.sql(f"select _cdc_action, _cdc_has_tombstone, count(*) from {s}.actions group by 1, 2")
        select = ", ".join(c if c != "_cdc_op" else
                           "case when _cdc_action = 'delete' then '_cdc_delete' else _cdc_op end as _cdc_op"
                           for c in ROW_COLUMNS + META_COLUMNS)
        times["upsert"] = self.sql(f"insert into {s}.orders ({', '.join(ROW_COLUMNS + META_COLUMNS)}) "
                                   f"select {select} from {s}.actions where _cdc_action in ('insert', 'update', 'delete')")
        times["tombstones"] = self.sql(f"""
            merge into {s}.tombstones as tombstone
            using (
                select {KEY}, _cdc_order, _cdc_source_ts as _cdc_deleted_at, _cdc_commit_time, _cdc_action
                from {s}.actions
                where _cdc_action in ('delete', 'tombstone') or (_cdc_action = 'insert' and _cdc_has_tombstone)
            ) as change
            on tombstone.{KEY} = change.{KEY}
            when matched and change._cdc_action = 'insert' then delete
            when matched and change._cdc_action in ('delete', 'tombstone') then update set
                {KEY} = change.{KEY}, _cdc_order = change._cdc_order,
                _cdc_deleted_at = change._cdc_deleted_at, _cdc_commit_time = change._cdc_commit_time
            when not matched and change._cdc_action in ('delete', 'tombstone') then insert
                ({KEY}, _cdc_order, _cdc_deleted_at, _cdc_commit_time)
                values (change.{KEY}, change._cdc_order, change._cdc_deleted_at, change._cdc_commit_time)""")
        return times

    def mismatches(self) -> tuple[int, int, int]:
        cols = ", ".join(ROW_COLUMNS)
        mine = self.spark.sql(f"select {cols} from {self.schema}.orders")
        reference = self.spark.sql(f"select {cols} from reference.orders_full_recompute")
        return mine.count(), mine.exceptAll(reference).count(), reference.exceptAll(mine).count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sql", type=Path, required=True)
    parser.add_argument("--designs", default="current-cow,current-mor,state-cow,state-mor")
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--compact-every", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/silver_designs.csv"))
    args = parser.parse_args(argv)
    spark = get_session("local")
    batch_sql = args.batch_sql.read_text()
    commits = sorted(str(r["commit_time"]) for r in
                     spark.sql(f"call show_commits(table => '{BRONZE}', limit => 1000)").collect())
    options = {"cow": COW, "mor": mor(args.buckets, args.compact_every)}
    designs = [Design(spark, name, options[name.split("-")[1]]) for name in args.designs.split(",")]
    spark.sql("drop table if exists default.design_batch")
    first = timed_sql(spark, f"create table default.design_batch using parquet as "
                             f"{batch_statement(batch_sql, None, commits[0])}")
    print(f"first batch {first:.1f} s", flush=True)
    for design in designs:
        start = time.perf_counter()
        design.create("default.design_batch")
        print(f"{design.name}: first build {time.perf_counter() - start:.1f} s", flush=True)
    rows = []
    for index, (low, high) in enumerate(zip(commits, commits[1:]), start=1):
        spark.sql("drop table if exists default.design_batch")
        batch_seconds = timed_sql(spark, f"create table default.design_batch using parquet as "
                                         f"{batch_statement(batch_sql, low, high)}")
        changes = spark.table("default.design_batch").where("_cdc_row = 'change'").count()
        order = designs if index % 2 else list(reversed(designs))
        for design in order:
            start = time.perf_counter()
            steps = design.apply("default.design_batch")
            total = time.perf_counter() - start
            rows.append({"window": index, "changes": changes, "design": design.name, "batch_s": round(batch_seconds, 2),
                         "write_s": round(total, 2), **{f"{k}_s": round(v, 2) for k, v in steps.items()}})
            print(f"window {index} ({changes} changes): {design.name} {total:.2f} s {steps}", flush=True)
    failed = False
    for design in designs:
        count, extra, missing = design.mismatches()
        print(f"{design.name}: {count} rows, {extra} not in the full recompute, {missing} missing", flush=True)
        failed |= bool(extra or missing)
        writes = [r["write_s"] for r in rows if r["design"] == design.name]
        print(f"{design.name}: write median {statistics.median(writes):.2f} s over {len(writes)} windows", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fields = sorted({k for r in rows for k in r}, key=lambda k: (k not in ("window", "changes", "design", "batch_s",
                                                                         "write_s"), k))
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
