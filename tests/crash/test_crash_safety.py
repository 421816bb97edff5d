"""Crash safety: the ingestion and `dbt run` are killed with SIGKILL (the whole process
group, JVM included) and run again, batch after batch. Afterwards bronze must hold
every event exactly once and silver must equal the oracle; both are read by a fresh
process, which sees only committed Hudi data.

- the ingestion is killed at random moments of its run (JVM start, reading, each
  table's Hudi commit, the ledger);
- `dbt run` is killed the moment a new Hudi instant of silver.actor is requested (the
  first build's CREATE, later builds' MERGE), i.e. in the middle of that commit.

The crash runs use their own lakehouse: the embedded Derby metastore admits one
process at a time, and the test's own Spark session holds the shared one.
Budget: CDC_CRASH_KILLS kills of each kind per batch (default 1); the counts are
written to build/reports/crash_tests.json.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.crash.processes import actor_stream, environment, finish, kill, start
from tests.support import oracle
from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

KILLS = int(os.environ.get("CDC_CRASH_KILLS", "1"))
SEED = 20261122
REPORT = ROOT / "build" / "reports" / "crash_tests.json"
PYTHON = sys.executable
DBT = str(Path(sys.executable).parent / "dbt")


def pending_instants(table: Path) -> set[str]:
    """Requested or inflight Hudi instants of the table (Hudi 1.x: .hoodie/timeline/)."""
    timeline = table / ".hoodie" / "timeline"
    if not timeline.is_dir():
        return set()
    return {p.name for p in timeline.iterdir() if p.name.endswith((".requested", ".inflight"))}


def test_kills_leave_bronze_exact_and_silver_right(spark, run_dir: Path):
    rng = random.Random(SEED)
    base = run_dir / "crash"
    landing, logs = base / "landing" / "topics", base / "logs"
    logs.mkdir(parents=True)
    env = environment(base / "lakehouse")
    ingest = [PYTHON, "-m", "ingestion", "--input", str(landing)]
    dbt_run = [DBT, "run", "--select", "actor", "--project-dir", str(ROOT), "--target-path", str(base / "target"),
               "--log-path", str(logs / "dbt")]
    silver = base / "lakehouse" / "warehouse" / "silver.db" / "actor__cdc_state"  # the Hudi table behind the view
    stream = actor_stream(rng)
    survived = {"ingestion": 0, "dbt_mid_write": 0}
    batch_dirs: list[Path] = []
    started = time.monotonic()

    for batch in range(len(stream.batches)):
        batch_dirs.append(stream.write_batch(batch, base / "batches" / str(batch)))
        stream.write_batch(batch, landing)

        for _ in range(KILLS):
            process = start(ingest, env, logs / "ingestion.log")
            time.sleep(rng.uniform(4.0, 30.0))  # JVM start, reading, each table's commit, the ledger
            if process.poll() is None:
                kill(process)
                survived["ingestion"] += 1
        finish(ingest, env, logs / "ingestion.log")

        for _ in range(KILLS):
            seen = pending_instants(silver)
            process = start(dbt_run, env, logs / "dbt-stdout.log")
            deadline = time.monotonic() + 180
            while process.poll() is None and time.monotonic() < deadline:
                if pending_instants(silver) - seen:
                    kill(process)
                    survived["dbt_mid_write"] += 1
                    break
                time.sleep(0.1)
            assert process.poll() is not None and process.returncode != 0, (
                f"dbt run was not killed in the middle of a silver commit; see {logs}")
        finish(dbt_run, env, logs / "dbt-stdout.log")

        dump = base / f"tables-{batch}.json"
        finish([PYTHON, "-m", "tests.crash.dump_tables", str(dump)], env, logs / "dump.log")
        tables = json.loads(dump.read_text())
        expected_events = sorted([r["partition"], r["offset"]] for r in oracle.read_records(
            oracle.files_in(batch_dirs, "actor")))
        assert tables["bronze"] == expected_events, f"bronze is not every event exactly once after batch {batch + 1}"
        expected_rows = [{k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
                         for row in oracle.expected_current_state_from_batches(batch_dirs, "actor")]
        assert tables["silver"] == expected_rows, f"silver.actor != oracle after batch {batch + 1} and the kills"

    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({"kills_per_batch": KILLS, "batches": len(stream.batches), "kills_survived": survived,
                                  "events": stream.transactions, "seconds": round(time.monotonic() - started)},
                                 indent=2) + "\n")
