"""A metastore shared in PostgreSQL: the ingestion and two `dbt run`s of the same models
at the same time on one lakehouse, each a process of its own, round after round.

The stack's `metastore` component (stack/metastore.py) starts its own PostgreSQL here
(ports 20 above the `make cdc-up` defaults, beside the end-to-end tests' stack), and
the processes get CDC_METASTORE=shared and SPARK_CONF_DIR. With the embedded Derby
default the second process is refused (tests/integration/test_concurrent_runs.py).
Here the ingestion must succeed, and the two builds of each model must not run at once:
one holds the model's build lock, the other stops naming it and then passes on `dbt
retry` or, told to wait (`cdc_build_lock_wait_seconds`), waits and passes; rounds
alternate between the two. Silver must then equal the oracle's current state of the
sample's actor stream, read by another process, and no lock or work table may be left."""

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
REPORT = ROOT / "build" / "reports" / "shared_metastore_builds.json"
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


def model_start_times(builds: dict[str, subprocess.Popen], logs: dict[str, Path]) -> dict[str, float | None]:
    """When each build started its first model (dbt's `START sql`), None for a build that
    ended first; waits for all of them to end."""
    started: dict[str, float | None] = {name: None for name in builds}
    while any(build.poll() is None for build in builds.values()):
        for name, log in logs.items():
            if started[name] is None and builds[name].poll() is None and log.exists() \
                    and "START sql" in log.read_text(errors="replace"):
                started[name] = time.monotonic()
        time.sleep(0.2)
    return started


REFUSED = "is being built by another dbt invocation"
WAITED = "waiting for build"


def refused_then_retried(build: subprocess.Popen, log: Path, retry: list[str], env: dict[str, str]) -> bool:
    """Whether `build` stopped because the other build held a model's lock; if so, `dbt
    retry` (its own target path) must pass. Any other failure fails the test."""
    if build.returncode == 0:
        return False
    text = log.read_text(errors="replace")
    assert REFUSED in text, f"{' '.join(build.args)} failed otherwise:\n{text[-4000:]}"
    finish(start(retry, env, log), log)
    return True


def test_ingestion_and_two_dbt_runs_at_once_on_one_lakehouse(shared_metastore, run_dir: Path):
    base = run_dir / "shared-metastore"
    sample, landing, logs = base / "sample", base / "landing" / "topics", base / "logs"
    logs.mkdir(parents=True)
    generate(require_pagila(), sample, DEFAULT_SEED)
    env = {**os.environ, **shared_metastore.metastore_env, "CDC_LAKEHOUSE_DIR": str(base / "lakehouse"),
           "DBT_PROFILES_DIR": str(ROOT / "profiles"), "TZ": "UTC", "PYTHONPATH": str(ROOT)}
    ingest = [PYTHON, "-m", "ingestion", "--input", str(landing)]
    dbt_run = [DBT, "run", "--select", *MODELS, "--project-dir", str(ROOT), "--target-path", str(base / "target"),
               "--log-path", str(logs / "dbt")]

    def dbt_build(name: str, wait: bool) -> list[str]:  # each build its own target path, for `dbt retry`
        return [DBT, "run", "--select", *MODELS, "--project-dir", str(ROOT), "--target-path",
                str(base / f"target-{name}"), "--log-path", str(logs / f"dbt-{name}")] \
            + (["--vars", json.dumps({"cdc_build_lock_wait_seconds": 600})] if wait else [])

    def dbt_retry(name: str) -> list[str]:
        return [DBT, "retry", "--project-dir", str(ROOT), "--target-path", str(base / f"target-{name}"),
                "--log-path", str(logs / f"dbt-{name}")]
    batches = sorted((sample / "batches").iterdir(), key=lambda path: int(path.name))
    assert len(batches) >= 3, batches

    def land(batch: Path) -> None:
        for topic in TOPICS:
            shutil.copytree(batch / "topics" / topic, landing / topic, dirs_exist_ok=True)

    land(batches[0])
    finish(start(ingest, env, logs / "ingestion.log"), logs / "ingestion.log")

    # Round after round, two builds of the same models start at once: two would-be writers
    # of each silver table. Even rounds: a batch lands meanwhile (three Spark drivers, one
    # metastore) and the build without the lock stops; odd rounds: the batch has landed,
    # so there is work to build, and the build without the lock waits for it.
    outcomes = {"refused_then_retried": 0, "waited": 0}
    for number, batch in enumerate(batches[1:], start=2):
        land(batch)
        wait = number % 2 == 1
        ingestion = start(ingest, env, logs / "ingestion.log")
        if wait:
            finish(ingestion, logs / "ingestion.log")
        build_logs = {name: logs / f"round{number}-{name}.log" for name in ("a", "b")}
        builds = {name: start(dbt_build(name, wait), env, log) for name, log in build_logs.items()}
        started = model_start_times(builds, build_logs)
        finish(ingestion, logs / "ingestion.log")
        assert None not in started.values(), f"round {number}: a build ended before the other began: {started}"
        texts = [log.read_text(errors="replace") for log in build_logs.values()]
        if wait:
            for name, build in builds.items():
                finish(build, build_logs[name])
            assert any(WAITED in text for text in texts), f"round {number}: neither build waited for the other"
            outcomes["waited"] += 1
        else:
            refused = sum(refused_then_retried(build, build_logs[name], dbt_retry(name), env)
                          for name, build in builds.items())
            assert refused >= 1, f"round {number}: both builds ran the same models at once unrefused"
            outcomes["refused_then_retried"] += refused
    assert outcomes["waited"] and outcomes["refused_then_retried"], outcomes
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(outcomes) + "\n")

    # A killed build's lock (begun long ago) is taken over; a build that fails holding a
    # lock releases it at the end of its invocation. Else the last run below would stop.
    stale = "create table silver.film__cdc_lock_20200101000000_0badbeef (build string) using parquet"
    plant = [PYTHON, "-c", f"from core.spark import get_session; get_session('local').sql({stale!r})"]
    finish(start(plant, env, logs / "plant.log"), logs / "plant.log")
    failing = start([arg for arg in dbt_run if arg != "film"] + ["--vars", json.dumps({"cdc_bronze_schema": "no_such"})],
                    env, logs / "failing.log")
    assert failing.wait(timeout=600) != 0 and REFUSED not in (logs / "failing.log").read_text(errors="replace")
    seen = (logs / "dbt-stdout.log").stat().st_size if (logs / "dbt-stdout.log").exists() else 0
    finish(start(dbt_run, env, logs / "dbt-stdout.log"), logs / "dbt-stdout.log")
    assert "dropping the build lock silver.film__cdc_lock_20200101000000_0badbeef" \
        in (logs / "dbt-stdout.log").read_text(errors="replace")[seen:]
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
    assert not [name for name in names if "__cdc_lock_" in name or name.endswith("__cdc_batch")], sorted(names)
