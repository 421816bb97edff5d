"""Where an incremental build's batch statement spends its time, on a lakehouse the
silver-size case built (benchmarks/silver_size.py), in one warm session:

  batch, resets from the window    the statement as builds run it now (cdc_resets over
                                   the window, merged with the stored reset groups)
  batch, resets over all of bronze the same statement with cdc_resets reading the whole
                                   change log, as every build did before the groups were kept
  window, snapshot filter          the bronze window alone as the batch reads it: a
                                   snapshot scan filtered on `_hoodie_commit_time`
  window, Hudi incremental query   the same rows by `hudi_table_changes`, from the
                                   completion time of the window's first commit

Each is run `--rounds` times, alternating, after one unmeasured run of each; the median
is written. The batch statement is the last `create table ... orders__cdc_batch` in the
dbt log, with its window (the commit after which it reads) as it was.

    CDC_LAKEHOUSE_DIR=<work>/keys_10000000/lakehouse python -m benchmarks.batch_statement \\
        --dbt-log <work>/keys_10000000/dbt-logs/dbt.log [--rounds 5] [--out FILE.csv]
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
from pathlib import Path

from benchmarks.measure import timed_sql

BRONZE = "bronze.bench_public_orders"
CREATE = re.compile(r"create table silver\.orders__cdc_batch\s+using parquet\s+as (with.*?)\n\S*\d\d:\d\d:\d\d\.\d+ \[",
                    re.S)
WINDOW = re.compile(r"where _hoodie_commit_time > '(\d+)'")
RESETS_FROM_WINDOW = re.compile(r"(cdc_resets as \(.*?from )cdc_window(\s)", re.S)


def last_batch_statement(log: str) -> str:
    found = CREATE.findall(log)
    if not found:
        raise SystemExit("no `create table silver.orders__cdc_batch` statement in the dbt log")
    return found[-1]


def completion_time(timeline: Path, instant: str) -> str:
    """When bronze commit `instant` completed (Hudi 1.x names a completed commit
    `<requested>_<completed>.commit`): an incremental query's range is in completion
    times, so the window after `instant` begins there."""
    found = [p.name for p in timeline.glob(f"{instant}_*.commit")]
    if len(found) != 1:
        raise SystemExit(f"commit {instant} not found in {timeline}")
    return found[0].split("_")[1].split(".")[0]


def variants(batch: str, timeline: Path) -> dict[str, str]:
    watermark = WINDOW.search(batch)
    if watermark is None or not RESETS_FROM_WINDOW.search(batch):
        raise SystemExit("the batch statement has no window, or its cdc_resets does not read the window")
    begin = watermark.group(1)
    completed = completion_time(timeline, begin)
    return {
        "batch, resets from the window": batch,
        "batch, resets over all of bronze": RESETS_FROM_WINDOW.sub(r"\1cdc_change_log\2", batch, count=1),
        "window, snapshot filter": f"select count(*), max(_hoodie_commit_time) from {BRONZE} "
                                   f"where _hoodie_commit_time > '{begin}'",
        "window, Hudi incremental query": f"select count(*), max(_hoodie_commit_time) from "
                                          f"hudi_table_changes('{BRONZE}', 'latest_state', '{completed}')",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.batch_statement", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dbt-log", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from core.spark import get_session

    spark = get_session("local")
    location = spark.sql(f"describe formatted {BRONZE}").where("col_name = 'Location'").collect()[0][1]
    timeline = Path(location.removeprefix("file:")) / ".hoodie" / "timeline"
    statements = variants(last_batch_statement(args.dbt_log.read_text()), timeline)
    answers = {}
    for name, sql in statements.items():  # unmeasured: compile, warm the caches; the windows must agree
        if name.startswith("batch"):
            spark.sql(f"select count(*) from ({sql})").collect()
        else:
            answers[name] = tuple(spark.sql(sql).collect()[0])
    if len(set(answers.values())) != 1:
        raise SystemExit(f"the window reads disagree: {answers}")
    seconds: dict[str, list[float]] = {name: [] for name in statements}
    for _ in range(args.rounds):
        for name, sql in statements.items():
            seconds[name].append(timed_sql(spark, f"select count(*) from ({sql})" if name.startswith("batch")
                                           else sql))
    rows = [{"statement": name, "median_s": round(statistics.median(s), 3), "runs": " ".join(f"{x:.2f}" for x in s)}
            for name, s in seconds.items()]
    for row in rows:
        print(f"{row['statement']:<36} {row['median_s']:7.3f} s   ({row['runs']})")
    print(f"window: {answers}")
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["statement", "median_s", "runs"])
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
