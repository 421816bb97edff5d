"""The Dagster example (orchestration/dagster) run as a user runs it: `dagster asset
materialize` as a process of its own (`-m cdc_lakehouse_dagster.definitions`), with its
own Dagster instance (DAGSTER_HOME with the example's dagster.yaml), lakehouse
(CDC_LAKEHOUSE_DIR) and dbt target folder, all under tmp_path. Its steps start Spark in
processes of their own (`python -m ingestion`, then dbt), one after the other; the test
session's Spark, on another metastore, starts only after the run has ended and reads
the tables by path. Nothing of the example is mocked.

- one run on the sample change streams (batches 1-3 of the Pagila generator, all topics
  in the input folder) for the bronze, silver and gold assets of address, city, country
  and address_locations: the run succeeds; Dagster recorded one materialization per
  selected asset (bronze ones with the counts the ingestion printed) and a passing check
  per dbt test of the models; only the three selected topics were landed; silver equals,
  row by row, the current state the oracle computes from the files, and gold the join of
  those states computed here;
- dbt failing (a target the profile does not have) fails the run, and the gold asset
  is not recorded as materialized;
- a lakehouse another run holds (its run.lock) fails the ingestion step before Spark
  starts, and the silver step after it never runs.
"""

import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.lock import exclusive
from tests.support import oracle
from tests.support.paths import ROOT, require_pagila
from tools.sample_data import DEFAULT_SEED, generate

pytestmark = pytest.mark.integration

DAGSTER_DIR = ROOT / "orchestration" / "dagster"
TABLES = ("address", "city", "country")
BRONZE = [f"bronze/{oracle.TABLES[t]['topic'].replace('.', '_')}" for t in TABLES]
DBT_MODELS = [*(f"silver/{t}" for t in TABLES), "gold/address_locations"]
RUN_TIMEOUT = 900  # a landing and a dbt build, each its own Spark, on a busy 2-core machine
NO_SPARK_TIMEOUT = 180  # a run that fails before any Spark starts
GOLD_COLUMNS = ["address_id", "address", "district", "postal_code", "city_id", "city", "country_id", "country"]


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sink's folder as after three batches: every topic's files, new next to old."""
    sample = tmp_path_factory.mktemp("sample")
    generate(require_pagila(), sample, DEFAULT_SEED)
    topics = tmp_path_factory.mktemp("landing") / "topics"
    for batch in sorted((sample / "batches").iterdir()):
        shutil.copytree(batch / "topics", topics, dirs_exist_ok=True)
    return topics


@pytest.fixture(scope="module")
def dbt_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dbt's target folder with the project's manifest, parsed once (no Spark) for every run."""
    target = tmp_path_factory.mktemp("dbt-target")
    parsed = subprocess.run([str(Path(sys.executable).with_name("dbt")), "parse", "--quiet", "--project-dir", str(ROOT),
                             "--profiles-dir", str(ROOT / "profiles"), "--target-path", str(target)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, DBT_LOG_PATH=str(target / "logs")))
    assert parsed.returncode == 0, parsed.stdout + parsed.stderr
    return target


def dagster_env(tmp_path: Path, landing: Path, dbt_target: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "dagster-home"
    home.mkdir(exist_ok=True)
    shutil.copy(DAGSTER_DIR / "dagster.yaml", home / "dagster.yaml")
    return dict(os.environ, DAGSTER_HOME=str(home), CDC_LAKEHOUSE_DIR=str(tmp_path / "lakehouse"),
                CDC_INPUT=str(landing), DBT_TARGET_PATH=str(dbt_target), DBT_LOG_PATH=str(tmp_path / "dbt-logs"),
                CDC_SPARK_MASTER="local[2]", TZ="UTC", **extra)


def materialize(keys: list[str], env: dict[str, str], timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "dagster", "asset", "materialize", "--select", ",".join(keys),
         "-m", "cdc_lakehouse_dagster.definitions", "-d", str(DAGSTER_DIR)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return result, time.monotonic() - started


class Run:
    """What the instance in DAGSTER_HOME recorded of its one run."""

    def __init__(self, home: Path) -> None:
        from dagster import DagsterEventType, DagsterInstance
        from dagster._core.instance.ref import InstanceRef

        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            runs = instance.get_runs()
            assert len(runs) == 1, f"{len(runs)} runs recorded"
            self.status = runs[0].status.value
            logs = instance.all_logs(runs[0].run_id)
        self.materialized = Counter(entry.asset_materialization.asset_key.to_user_string()
                                    for entry in logs if entry.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION)
        self.metadata = {entry.asset_materialization.asset_key.to_user_string(): entry.asset_materialization.metadata
                         for entry in logs if entry.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION}
        self.checks = [entry.dagster_event.event_specific_data for entry in logs
                       if entry.dagster_event_type == DagsterEventType.ASSET_CHECK_EVALUATION]
        self.failed_steps = sorted(entry.step_key for entry in logs if entry.dagster_event_type == DagsterEventType.STEP_FAILURE)
        self.started_steps = sorted(entry.step_key for entry in logs if entry.dagster_event_type == DagsterEventType.STEP_START)
        self.failures = "\n".join(str(entry.dagster_event.event_specific_data.error) for entry in logs
                                  if entry.dagster_event_type == DagsterEventType.STEP_FAILURE)


def output(result: subprocess.CompletedProcess) -> str:
    return (result.stdout + result.stderr)[-6000:]


def live_rows(spark, lakehouse: Path, table: str) -> list[dict]:
    """silver.`table` of the run's lakehouse: its state table's live rows, read by path."""
    spec = oracle.TABLES[table]
    state = lakehouse / "warehouse" / "silver.db" / f"{table}__cdc_state"
    rows = (spark.read.format("hudi").load(str(state)).where("not _cdc_deleted")
            .select(*spec["columns"]).orderBy(*spec["primary_key"]).collect())
    return [row.asDict() for row in rows]


def test_one_run_lands_and_builds_silver_and_gold_equal_to_the_oracle(
        request: pytest.FixtureRequest, tmp_path: Path, landing: Path, dbt_target: Path) -> None:
    env = dagster_env(tmp_path, landing, dbt_target)
    result, seconds = materialize(BRONZE + DBT_MODELS, env, RUN_TIMEOUT)
    print(f"dagster asset materialize: {seconds:.1f}s")
    assert result.returncode == 0, output(result)

    run = Run(tmp_path / "dagster-home")
    assert run.status == "SUCCESS", run.failures
    assert run.materialized == Counter(BRONZE + DBT_MODELS), run.materialized
    # the ingestion's own counts: every record of the topic's files (no tombstones in the sample)
    files = oracle.files_in([landing])
    records = Counter(record["topic"] for record in oracle.read_records(files))
    for table, key in zip(TABLES, BRONZE):
        landed = run.metadata[key]["landed"].value
        assert landed == records[oracle.TABLES[table]["topic"]] > 0, (key, run.metadata[key])
    # a passing check per dbt test of the built models (each model has some)
    assert run.checks and all(check.passed for check in run.checks), [c for c in run.checks if not c.passed]
    assert {check.asset_key.to_user_string() for check in run.checks} == set(DBT_MODELS)
    # only the selected topics were landed: the step passed --topics on to the ingestion
    lakehouse = tmp_path / "lakehouse"
    landed_tables = {p.name for p in (lakehouse / "warehouse" / "bronze.db").iterdir() if not p.name.startswith("_")}
    assert landed_tables == {key.split("/")[1] for key in BRONZE}

    spark = request.getfixturevalue("spark")  # only now: the run's processes have ended
    for table in TABLES:
        expected = oracle.expected_current_state(files, table)
        actual = live_rows(spark, lakehouse, table)
        assert len(actual) == len(expected), f"silver.{table}: {len(actual)} rows, expected {len(expected)}"
        for got, want in zip(actual, expected):
            assert got == want, f"silver.{table} differs from the oracle:\n got  {got}\n want {want}"
    gold = [row.asDict() for row in spark.read.parquet(str(lakehouse / "warehouse" / "gold.db" / "address_locations"))
            .select(*GOLD_COLUMNS).orderBy("address_id").collect()]
    expected_gold = oracle.expected_address_locations(files)
    assert len(gold) == len(expected_gold)
    for got, want in zip(gold, expected_gold):
        assert got == want, f"gold.address_locations differs:\n got  {got}\n want {want}"


def test_a_failing_dbt_build_fails_the_run(tmp_path: Path, landing: Path, dbt_target: Path) -> None:
    env = dagster_env(tmp_path, landing, dbt_target, CDC_TARGET="no_such_target")
    result, _ = materialize(["gold/address_locations"], env, NO_SPARK_TIMEOUT)
    assert result.returncode != 0, output(result)

    run = Run(tmp_path / "dagster-home")
    assert run.status == "FAILURE"
    assert run.failed_steps == ["cdc_lakehouse_dbt"], run.failed_steps
    assert "does not have a target named 'no_such_target'" in run.failures, run.failures
    assert not run.materialized


@pytest.fixture
def held_lakehouse(tmp_path: Path) -> Iterator[Path]:
    lakehouse = tmp_path / "lakehouse"
    with exclusive(lakehouse / "run.lock"):
        yield lakehouse


def test_a_busy_lakehouse_fails_the_ingestion_before_spark(
        tmp_path: Path, landing: Path, dbt_target: Path, held_lakehouse: Path) -> None:
    env = dagster_env(tmp_path, landing, dbt_target)
    result, _ = materialize(["bronze/pagila_public_country", "silver/country"], env, NO_SPARK_TIMEOUT)
    assert result.returncode != 0, output(result)

    run = Run(tmp_path / "dagster-home")
    assert run.status == "FAILURE"
    assert run.failed_steps == ["bronze_ingestion"] and run.started_steps == ["bronze_ingestion"], run.started_steps
    assert "the lakehouse is busy" in run.failures, run.failures
    assert not run.materialized
    assert not (held_lakehouse / "metastore_db").exists(), "a Spark step started"
