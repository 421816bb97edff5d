"""An incremental gold model against its full rebuild (docs/decisions/gold-incremental-query.md).

    python -m benchmarks.gold_incremental [--payments 1000000] [--changes 1000] [--rounds 5]
        [--shape spread|recent] [--table-type cow|mor] [--work build/bench/gold_incremental]
        [--out benchmarks/results/gold_incremental_<shape>_<table type>.csv]

In one warm process (one Spark session, dbt in-process, as `python -m runner --every N`
runs), on a lakehouse of its own under --work: Pagila payment events are generated
(--payments inserts, then per round --changes changes: `spread` over random keys, 80%
updates, some to a zero amount, 10% inserts, 10% deletes; or `recent`, as payments
change, 50% new payments and updates and deletes among the newest) and landed with the
ingestion; silver
`payment` builds; gold `payment_facts` (materialized='hudi_incremental') builds once in
full and once incrementally, not measured. Then each round lands a batch, builds silver,
and times:

  incremental   dbt run --select payment_facts (the window since the last round)
  full refresh  dbt run --select payment_facts --full-refresh (the same silver)

with the gold table of --table-type (var cdc_gold_table_type), and a gold query (counts and
sums by month and band) after each; and, on the same window, the two ways of reading it: the snapshot the materialization
reads (silver's state table as of the window's last commit, the rows its commits wrote)
and Hudi's incremental query (`hudi_table_changes`, which the materialization does not
use: it returns rows silver's merge rejected). The gold table's fingerprint (row count
and a hash of every row) after the incremental build must equal the full refresh's, else
the run fails. One CSV row per round goes to --out; the medians are printed.
"""

from __future__ import annotations

import argparse
import base64
import csv
import json
import os
import random
import shutil
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
TOPIC = "pagila.public.payment"
STATE = "silver.payment__cdc_state"
GOLD = "gold.payment_facts"
GOLD_COLUMNS = ("payment_id, customer_id, staff_id, rental_id, amount, payment_date, payment_month, is_weekend, "
                "amount_band")
SILVER_COLUMNS = "payment_id, customer_id, staff_id, rental_id, amount, payment_date, _cdc_deleted"
EPOCH = datetime(1970, 1, 1)


class Failed(RuntimeError):
    """A step failed or gave a wrong answer: no number from this run is reported."""


def payment_event(op: str, lsn: int, key: int, cents: int, rng: random.Random) -> str:
    """One Debezium payment event (JSON without schema), amount in precise mode."""
    moment = datetime(2022, 1, 1) + timedelta(minutes=rng.randrange(0, 365 * 24 * 60))
    image = {"payment_id": key, "customer_id": 1 + key % 599, "staff_id": 1 + key % 2, "rental_id": 1 + key % 16000,
             "amount": base64.b64encode(cents.to_bytes((cents.bit_length() + 8) // 8, "big", signed=True)).decode(),
             "payment_date": int((moment - EPOCH).total_seconds()) * 1_000_000}
    source = {"connector": "postgresql", "db": "pagila", "schema": "public", "table": "payment", "lsn": lsn,
              "txId": lsn, "ts_ms": 1_700_000_000_000 + lsn, "snapshot": "false"}
    before, after = (image, None) if op == "d" else (None, image)
    return json.dumps({"before": before, "after": after, "source": source, "op": op, "ts_ms": 1_700_000_000_000 + lsn})


class Stream:
    """The generated events, written as Kafka Connect S3 sink files into one landing folder."""

    def __init__(self, landing: Path, seed: int = 7, records_per_file: int = 100_000):
        self.landing, self.rng, self.records_per_file = landing, random.Random(seed), records_per_file
        self.lsn = self.offset = 0
        self.live: list[int] = []
        self.next_key = 1

    def _write(self, lines: list[str]) -> None:
        folder = self.landing / TOPIC / "partition=0"
        folder.mkdir(parents=True, exist_ok=True)
        for start in range(0, len(lines), self.records_per_file):
            chunk = lines[start:start + self.records_per_file]
            (folder / f"{TOPIC}+0+{self.offset}.json").write_text("\n".join(chunk) + "\n")
            self.offset += len(chunk)

    def _event(self, op: str, key: int) -> str:
        self.lsn += 1
        return payment_event(op, self.lsn, key, self.rng.randrange(0, 1200), self.rng)

    def inserts(self, count: int) -> None:
        keys = range(self.next_key, self.next_key + count)
        self.next_key += count
        self.live.extend(keys)
        self._write([self._event("c", key) for key in keys])

    def changes(self, count: int, shape: str) -> None:
        """`count` changes: `spread` (10% inserts, 10% deletes and 80% updates of keys
        drawn from all live keys) or `recent` (as payments change: 50% new payments, 40%
        updates and 10% deletes among the newest 10,000)."""
        inserts, deletes = (0.1, 0.2) if shape == "spread" else (0.5, 0.6)
        lines = []
        for _ in range(count):
            roll = self.rng.random()
            pool = len(self.live) if shape == "spread" else min(10_000, len(self.live))
            if roll < inserts:
                key = self.next_key
                self.next_key += 1
                self.live.append(key)
                lines.append(self._event("c", key))
            elif roll < deletes:
                key = self.live.pop(len(self.live) - 1 - self.rng.randrange(pool))
                lines.append(self._event("d", key))
            else:
                lines.append(self._event("u", self.live[len(self.live) - 1 - self.rng.randrange(pool)]))
        self._write(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payments", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shape", choices=("spread", "recent"), default="spread")
    parser.add_argument("--table-type", choices=("cow", "mor"), default="cow")
    parser.add_argument("--work", type=Path, default=PROJECT_DIR / "build" / "bench" / "gold_incremental")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/gold_incremental_<shape>_<table type>.csv")
    args = parser.parse_args(argv)
    args.out = args.out or PROJECT_DIR / "benchmarks" / "results" / f"gold_incremental_{args.shape}_{args.table_type}.csv"
    table_type = json.dumps({"cdc_gold_table_type": args.table_type})

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    # Set before Spark or dbt read them: a lakehouse, dbt target and logs of the run's own.
    os.environ.update({"CDC_LAKEHOUSE_DIR": str(args.work / "lakehouse"),
                       "DBT_TARGET_PATH": str(args.work / "dbt-target"), "DBT_LOG_PATH": str(args.work / "dbt-logs"),
                       "DBT_PROFILES_DIR": str(PROJECT_DIR / "profiles")})
    os.environ.setdefault("CDC_SPARK_MASTER", "local[2]")
    os.chdir(PROJECT_DIR)
    from dbt.cli.main import dbtRunner

    from benchmarks.measure import timed_sql
    from ingestion.pipeline import IngestConfig, run as ingest
    from core.spark import get_session

    spark = get_session("local", {"spark.ui.showConsoleProgress": "false"})
    stream = Stream(args.work / "landing")

    def land() -> None:
        summary = ingest(spark, IngestConfig(input_uri=str(args.work / "landing")))
        if summary.quarantined:
            raise Failed(summary.render())

    def dbt(*dbt_args: str) -> tuple[float, str]:
        start = time.perf_counter()
        result = dbtRunner().invoke(["run", *dbt_args, "--project-dir", str(PROJECT_DIR), "--vars", table_type])
        seconds = time.perf_counter() - start
        if not result.success:
            raise Failed(f"dbt run {' '.join(dbt_args)}: {result.exception or result.result}")
        return seconds, result.result.results[0].message

    def consumed() -> str:
        return dict(spark.sql(f"show tblproperties {GOLD}").collect())["hudi_incremental.consumed_completion_time"]

    def gold_query() -> float:
        return timed_sql(spark, f"select payment_month, amount_band, count(*), sum(amount) from {GOLD} group by 1, 2")

    def fingerprint() -> tuple:
        return tuple(spark.sql(f"select count(*), sum(xxhash64({GOLD_COLUMNS})) from {GOLD}").first())

    stream.inserts(args.payments)
    land()
    dbt("--select", "payment")
    print(f"first gold build {dbt('--select', 'payment_facts')[0]:.1f}s", flush=True)
    stream.changes(args.changes, args.shape)
    land()
    dbt("--select", "payment")
    dbt("--select", "payment_facts")  # its first incremental build in this process, not measured

    rows = []
    for round_no in range(1, args.rounds + 1):
        stream.changes(args.changes, args.shape)
        land()
        silver_s, _ = dbt("--select", "payment")
        begin = consumed()
        incremental_s, message = dbt("--select", "payment_facts")
        end = consumed()
        incremental = fingerprint()
        query_after_incremental_s = gold_query()
        instants = [r["commit_time"] for r in spark.sql(f"call show_commits(table => '{STATE}', limit => 1000)")
                    .collect() if begin < r["state_transition_time"] <= end]
        snapshot_s = timed_sql(spark, f"select count(*), sum(xxhash64({SILVER_COLUMNS})) from {STATE} "
                                      f"timestamp as of '{end}' where _hoodie_commit_time in ('"
                                      + "', '".join(instants) + "')")
        hudi_s = timed_sql(spark, f"select count(*), sum(xxhash64({SILVER_COLUMNS})) from "
                                  f"hudi_table_changes('{STATE}', 'latest_state', '{begin}', '{end}')")
        full_s, full_message = dbt("--select", "payment_facts", "--full-refresh")
        query_after_full_s = gold_query()
        if fingerprint() != incremental or not full_message.startswith("full refresh"):
            raise Failed(f"round {round_no}: incremental gold {incremental} != full refresh {fingerprint()}")
        row = {"round": round_no, "shape": args.shape, "table_type": args.table_type, "payments": args.payments,
               "changes": args.changes, "gold_rows": incremental[0],
               "silver_build_s": round(silver_s, 2), "gold_incremental_s": round(incremental_s, 2),
               "gold_full_refresh_s": round(full_s, 2), "gold_query_after_incremental_s": round(query_after_incremental_s, 2),
               "gold_query_after_full_refresh_s": round(query_after_full_s, 2),
               "window_snapshot_read_s": round(snapshot_s, 2),
               "hudi_incremental_query_s": round(hudi_s, 2), "incremental_message": message}
        rows.append(row)
        print(json.dumps(row), flush=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for column in ("silver_build_s", "gold_incremental_s", "gold_full_refresh_s", "gold_query_after_incremental_s",
                   "gold_query_after_full_refresh_s", "window_snapshot_read_s", "hudi_incremental_query_s"):
        print(f"median {column:<26} {statistics.median(r[column] for r in rows):7.2f}")
    ratio = statistics.median(r["gold_incremental_s"] / r["gold_full_refresh_s"] for r in rows)
    print(f"median incremental / full refresh    {ratio:7.2f}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
