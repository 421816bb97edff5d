"""Concurrent runs against the same tables serialize or fail with a clear message, and
leave no duplicates:

- two ingestion runs into one bronze schema at once (two threads of one Spark session,
  as on a shared session): the second stops with RunLockedError naming the lock, the
  first lands every event exactly once, and the second, run again, lands nothing new;
- a second process on the embedded lakehouse (`dbt run` while this process's Spark
  holds it): the Derby metastore admits one process, so it fails and says so, and the
  tables are unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.lock import RunLockedError
from ingestion.pipeline import IngestConfig, run as ingest
from tests.support.lakehouse import drop_schemas
from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

SCHEMA = "bronze_concurrent"
TOPIC = "pagila.public.actor"
RUNS = {"ingestion_pairs": 0, "second_process_refused": 0}
REPORT = ROOT / "build" / "reports" / "concurrency_tests.json"


def write_files(root: Path, files: int = 8, per_file: int = 5) -> int:
    folder = root / TOPIC / "partition=0"
    folder.mkdir(parents=True)
    offset = 0
    for _ in range(files):
        lines = []
        for _ in range(per_file):
            after = {"actor_id": offset % 7 + 1, "first_name": f"N{offset}", "last_name": None, "last_update": 0}
            source = {"connector": "postgresql", "lsn": 1000 + offset, "ts_ms": 1_700_000_000_000, "snapshot": "false"}
            lines.append(json.dumps({"before": None, "after": after, "source": source, "op": "c", "ts_ms": 0}))
        (folder / f"{TOPIC}+0+{offset}.json").write_text("\n".join(lines) + "\n")
        offset += per_file
    return offset


@pytest.fixture(scope="module")
def cleanup(spark):
    yield
    drop_schemas(spark, [SCHEMA])
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(RUNS, indent=2) + "\n")


def test_two_ingestion_runs_at_once(spark, tmp_path, cleanup):
    root = tmp_path / "topics"
    events = write_files(root)
    config = IngestConfig(input_uri=str(root), bronze_schema=SCHEMA)
    lock = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")).resolve() / f".ingestion-{SCHEMA}.lock"
    outcome: dict[str, object] = {}

    def first() -> None:
        outcome["first"] = ingest(spark, config)

    thread = threading.Thread(target=first)
    thread.start()
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)  # the first run holds the lock once its pid is in the file
    with pytest.raises(RunLockedError, match=f"holds {lock}"):
        ingest(spark, config)
    thread.join()
    RUNS["ingestion_pairs"] += 1

    assert outcome["first"].table("pagila_public_actor").landed == events
    coordinates = spark.sql(f"select _offset from {SCHEMA}.pagila_public_actor").collect()
    assert sorted(r[0] for r in coordinates) == list(range(events))  # each event once
    again = ingest(spark, config)  # the refused run, repeated: every file is in the ledger
    assert again.files_skipped == 8 and not again.tables
    assert spark.table(f"{SCHEMA}.pagila_public_actor").count() == events


def test_second_process_on_the_embedded_lakehouse_is_refused(spark, run_dir: Path, cleanup):
    before = spark.table(f"{SCHEMA}.pagila_public_actor").count()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "dbt"), "run", "--select", "actor", "--vars",
         json.dumps({"cdc_bronze_schema": SCHEMA}), "--project-dir", str(ROOT),
         "--target-path", str(run_dir / "concurrent-target"), "--log-path", str(run_dir / "concurrent-logs")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    log = run_dir / "concurrent-logs" / "dbt.log"
    output = result.stdout + result.stderr + (log.read_text(errors="replace") if log.exists() else "")
    assert result.returncode != 0, output[-2000:]
    assert "Another instance of Derby may have already booted the database" in output, output[-4000:]
    RUNS["second_process_refused"] += 1
    assert spark.table(f"{SCHEMA}.pagila_public_actor").count() == before
    assert not spark.catalog.tableExists("silver.actor__cdc_batch")
