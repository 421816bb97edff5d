"""A metastore shared in PostgreSQL: the ingestion and `dbt run` at the same time on one
lakehouse, each a process of its own, as a scheduler runs them, round after round.

The stack's `metastore` component (stack/metastore.py) starts its own PostgreSQL here
(ports 20 above the `make cdc-up` defaults, beside the end-to-end tests' stack), and
the processes get CDC_METASTORE=shared and SPARK_CONF_DIR. With the embedded Derby
default the second process is refused (tests/integration/test_concurrent_runs.py);
here both must succeed, and silver must then equal the oracle's current state of the
sample's actor stream, read by a third process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from stack.settings import ports_above_defaults
from tests.support import oracle
from tests.support.paths import ROOT, require_pagila
from tools.sample_data import DEFAULT_SEED, generate

pytestmark = pytest.mark.integration

PYTHON = sys.executable
DBT = str(Path(sys.executable).parent / "dbt")
TOPICS = ("pagila.public.actor", "pagila.public.film")
MODELS = ("actor", "film")


@pytest.fixture(scope="module")
def shared_metastore(run_dir: Path):
    import stack

    run_dir.chmod(0o755)  # PostgreSQL runs as the `postgres` user when the tests run as root
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CDC_STACK_DIR", str(run_dir / "stack-metastore"))
        for name, value in ports_above_defaults(20).items():
            env.setenv(name, value)
        for name in ("CDC_METASTORE_USER", "CDC_METASTORE_PASSWORD"):
            env.delenv(name, raising=False)  # exercise the credentials the stack generates
        try:
            info = stack.up(["metastore"])
        except Exception as exc:  # noqa: BLE001 - fail (never skip) with the reason
            stack.down(purge=False)
            pytest.fail(f"the metastore's PostgreSQL did not start: {exc}", pytrace=False)
        try:
            hive_site = Path(info.metastore_env["SPARK_CONF_DIR"]) / "hive-site.xml"
            assert hive_site.stat().st_mode & 0o777 == 0o600, "hive-site.xml (it holds a password) is readable by others"
            yield info
        finally:
            stack.down(purge=False)


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def finish(process: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    """Wait for `process`; fail with its log's tail unless it exited 0."""
    code = process.wait(timeout=timeout)
    assert code == 0, f"{' '.join(process.args)} exited {code}:\n{log.read_text()[-3000:]}"


def log_size(log: Path) -> int:
    return log.stat().st_size if log.exists() else 0


def running_when_models_start(other: subprocess.Popen, build: subprocess.Popen, build_log: Path, seen: int) -> bool:
    """Whether `other` still ran when `build` (dbt) started its first model, by then
    having read the catalog: the two drivers held the metastore at the same time. The
    log is shared by every build: only what this build appended after `seen` counts."""
    while build.poll() is None:
        if "START sql" in build_log.read_text(errors="replace")[seen:]:
            return other.poll() is None
        time.sleep(0.2)
    return False


def test_ingestion_and_dbt_run_at_once_on_one_lakehouse(shared_metastore, run_dir: Path):
    base = run_dir / "shared-metastore"
    sample, landing, logs = base / "sample", base / "landing" / "topics", base / "logs"
    logs.mkdir(parents=True)
    generate(require_pagila(), sample, DEFAULT_SEED)
    env = {**os.environ, **shared_metastore.metastore_env, "CDC_LAKEHOUSE_DIR": str(base / "lakehouse"),
           "DBT_PROFILES_DIR": str(ROOT / "profiles"), "TZ": "UTC", "PYTHONPATH": str(ROOT)}
    ingest = [PYTHON, "-m", "ingestion", "--input", str(landing)]
    dbt_run = [DBT, "run", "--select", *MODELS, "--project-dir", str(ROOT), "--target-path", str(base / "target"),
               "--log-path", str(logs / "dbt")]
    batches = sorted((sample / "batches").iterdir(), key=lambda path: int(path.name))
    assert len(batches) >= 3, batches

    def land(batch: Path) -> None:
        for topic in TOPICS:
            shutil.copytree(batch / "topics" / topic, landing / topic, dirs_exist_ok=True)

    land(batches[0])
    finish(start(ingest, env, logs / "ingestion.log"), logs / "ingestion.log")

    # Round after round, a batch lands while dbt builds from what bronze held before: two
    # Spark drivers, one metastore, each round's build reading a bronze that changes under it.
    for number, batch in enumerate(batches[1:], start=2):
        land(batch)
        ingestion = start(ingest, env, logs / "ingestion.log")
        seen = log_size(logs / "dbt-stdout.log")
        build = start(dbt_run, env, logs / "dbt-stdout.log")
        overlapped = running_when_models_start(ingestion, build, logs / "dbt-stdout.log", seen)
        finish(ingestion, logs / "ingestion.log")
        finish(build, logs / "dbt-stdout.log")
        assert overlapped, f"round {number}: the ingestion had ended before dbt built its first model"

    finish(start(dbt_run, env, logs / "dbt-stdout.log"), logs / "dbt-stdout.log")
    dump = base / "tables.json"
    finish(start([PYTHON, "-m", "tests.crash.dump_tables", str(dump)], env, logs / "dump.log"), logs / "dump.log")
    tables = json.loads(dump.read_text())
    assert tables["bronze"] == sorted([r["partition"], r["offset"]]
                                      for r in oracle.read_records(oracle.files_in(batches, "actor")))
    expected = [{k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
                for row in oracle.expected_current_state_from_batches(batches, "actor")]
    assert tables["silver"] == expected, "silver.actor != the oracle after the concurrent runs"

    # The catalog is PostgreSQL's, not a Derby database in the lakehouse or the working directory.
    assert not (base / "lakehouse" / "metastore_db").exists() and not (ROOT / "metastore_db").exists()
    with psycopg.connect(shared_metastore.pg_dsn.replace("/pagila?", "/metastore?")) as conn:
        names = {row[0] for row in conn.execute('select "TBL_NAME" from "TBLS"')}
    assert {"pagila_public_actor", "pagila_public_film", "actor", "actor__cdc_state", "film"} <= names, names
