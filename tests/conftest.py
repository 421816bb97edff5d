"""Shared fixtures: one embedded SparkSession for the whole test run.

dbt (dbt-spark `method: session`) invoked in-process reuses this session, so a test
pays for one JVM start. The lakehouse (metastore + warehouse) is a fresh temporary
folder per run, never the project's own ./lakehouse; it is removed after a passing run
(CDC_KEEP_TEST_DIR=1 keeps it) and kept after a failing one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Set before Spark or dbt read them; `profiles.yml` renders these.
_RUN_DIR = Path(tempfile.mkdtemp(prefix="cdc-lakehouse-test-"))
os.environ["CDC_LAKEHOUSE_DIR"] = str(_RUN_DIR / "lakehouse")
os.environ.setdefault("CDC_SPARK_MASTER", "local[2]")
os.environ["DBT_PROFILES_DIR"] = str(ROOT / "profiles")
# dbt's target/ and logs/ per run too, not the project's own (a run beside the tests,
# or the demo, must not read a manifest the tests left).
os.environ["DBT_TARGET_PATH"] = str(_RUN_DIR / "dbt-target")
os.environ["DBT_LOG_PATH"] = str(_RUN_DIR / "dbt-logs")
# The drivers tests start as processes of their own (ingestion, dbt, the runner, the bench's
# steps) compile with the JIT's first tier only: each lives under a minute on a tiny input,
# where C2's compiling costs more CPU than its code saves. The session below keeps both
# tiers, as it runs for the whole suite (docs/decisions/test-suite-jvm-tiers.md).
# CDC_DRIVER_JAVA_OPTIONS set before pytest replaces this, for the session too.
# The user's setting is kept for pytest-xdist's workers, which inherit this process's environment.
_SESSION_JAVA_OPTIONS = os.environ.setdefault("CDC_TEST_SESSION_JAVA_OPTIONS",
                                              os.environ.get("CDC_DRIVER_JAVA_OPTIONS", ""))
# With C1 alone the JVM reserves 48 MB of code cache, not 240: a process that builds the
# whole sample fills it, and a full code cache fails queries ("Out of space in CodeCache
# for adapters").
os.environ.setdefault("CDC_DRIVER_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m")
os.environ["TZ"] = "UTC"
time.tzset()  # PySpark turns timestamps into local datetimes: make local = UTC


# `make test` runs the suite in two pytest-xdist workers (`-n 2`), each with its own
# Spark session and lakehouse: one process leaves a core idle while its driver, dbt or a
# service is the bottleneck (docs/decisions/test-suite-jvm-tiers.md). A module's tests
# stay on one worker, as they share module fixtures (one build serves many checks), and
# the CDC stack's modules too (one stack on fixed ports). The longest groups are handed
# out first, so the two workers finish together; the rest keep their order. (xdist's own
# order, by number of tests, would hand out last the one-test modules that take longest.)
LONGEST_FIRST = (
    "tests/e2e",
    "tests/bench/test_bench_smoke.py",
    "tests/integration/test_pipeline.py",
    "tests/crash/test_atomic_reads.py",
    "tests/integration/test_shared_metastore.py",
    "tests/runner_loop/test_runner.py",
    "tests/integration/test_state_table.py",
    "tests/property/test_cdc_properties.py",
    "tests/crash/test_crash_safety.py",
    "tests/integration/test_gold_incremental.py",
    "tests/integration/test_table_services.py",
    "tests/integration/test_onboarding.py",
    "tests/integration/test_runner_selection.py",
    "tests/integration/test_partitioned_silver.py",
    "tests/integration/test_orchestration.py",
    "tests/integration/test_object_storage.py",
    "tests/integration/test_schema_change.py",
    "tests/integration/test_sink_formats.py",
)


def run_group(nodeid: str) -> str:
    """The worker's unit: a test's module, or the whole of tests/e2e."""
    path = nodeid.split("::", 1)[0]
    return "tests/e2e" if path.startswith("tests/e2e/") else path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {group: i for i, group in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(run_group(item.nodeid), len(rank)))  # stable


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    # xdist's own `--dist loadgroup` does not group under pytest 9.2: it renames node ids
    # through an attribute pytest no longer reads (pytest-dev/pytest-xdist#1386).
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False  # keep LONGEST_FIRST's order

    class RunGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return run_group(nodeid)

    return RunGroupScheduling(config, log)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run's lakehouse is a few hundred MB: remove it after a passing run; after a
    failing one keep it to look at, and say where it is."""
    if exitstatus == 0 and not os.environ.get("CDC_KEEP_TEST_DIR"):
        shutil.rmtree(_RUN_DIR, ignore_errors=True)
    else:
        print(f"\ntest lakehouse kept in {_RUN_DIR}")


@pytest.fixture(scope="session")
def run_dir() -> Path:
    return _RUN_DIR


@pytest.fixture(scope="session")
def spark():
    from core.spark import get_session, jvm_archive, profile_spark_settings

    # The jar list is the profile's (CDC_SPARK_JARS, else its default, relative to the project).
    settings = profile_spark_settings("local")
    jars = [ROOT / jar for jar in settings["spark.jars"].split(",")]
    os.environ["CDC_SPARK_JARS"] = ",".join(str(jar) for jar in jars)
    # ... and the driver's own class path (the shared metastore's JDBC driver).
    classpath = ROOT / settings["spark.driver.extraClassPath"]
    os.environ["CDC_DRIVER_CLASSPATH"] = str(classpath)
    jars.append(classpath)
    # The same for the JVM archive `make setup` builds (tests/integration/test_jvm_archive.py).
    os.environ["CDC_JVM_ARCHIVE"] = str(jvm_archive())
    missing = [str(jar) for jar in jars if not jar.exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run `make setup` first", pytrace=False)
    with mock.patch.dict(os.environ, {"CDC_DRIVER_JAVA_OPTIONS": _SESSION_JAVA_OPTIONS}):
        session = get_session("local")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def empty_project_schemas(spark):
    """For a module that builds the whole project (`dbt build`, ingestion into `bronze`):
    the run shares one lakehouse, so start from empty project schemas whatever ran
    before, and leave none of them behind."""
    from tests.support import lakehouse

    with lakehouse.empty_project_schemas(spark):
        yield
