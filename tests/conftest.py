"""Shared fixtures: one embedded SparkSession for the whole test run.

dbt (dbt-spark `method: session`) invoked in-process reuses this session, so a test
pays for one JVM start. The lakehouse (metastore + warehouse) is a fresh temporary
folder per run, never the project's own ./lakehouse.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Set before Spark or dbt read them; `profiles.yml` renders these.
_RUN_DIR = Path(tempfile.mkdtemp(prefix="cdc-lakehouse-test-"))
os.environ["CDC_LAKEHOUSE_DIR"] = str(_RUN_DIR / "lakehouse")
os.environ.setdefault("CDC_SPARK_MASTER", "local[2]")
os.environ["DBT_PROFILES_DIR"] = str(ROOT / "profiles")
os.environ["TZ"] = "UTC"
time.tzset()  # PySpark turns timestamps into local datetimes: make local = UTC


@pytest.fixture(scope="session")
def run_dir() -> Path:
    return _RUN_DIR


@pytest.fixture(scope="session")
def spark():
    from ingestion.spark import get_session, profile_spark_settings

    # The jar list is the profile's (CDC_SPARK_JARS, else its default, relative to the project).
    jars = [ROOT / jar for jar in profile_spark_settings("local")["spark.jars"].split(",")]
    os.environ["CDC_SPARK_JARS"] = ",".join(str(jar) for jar in jars)
    missing = [str(jar) for jar in jars if not jar.exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run `make setup` first", pytrace=False)
    session = get_session("local")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def empty_project_schemas(spark):
    """For a module that builds the whole project (`dbt build`, ingestion into `bronze`):
    the run shares one lakehouse, so start from empty project schemas whatever ran
    before, and leave none of them behind."""
    from tests.support.lakehouse import PROJECT_SCHEMAS, drop_schemas

    drop_schemas(spark, PROJECT_SCHEMAS)
    yield
    drop_schemas(spark, PROJECT_SCHEMAS)
