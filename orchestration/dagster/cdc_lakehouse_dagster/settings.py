"""Where the project is and how its processes are started: everything comes from the
environment (the same variables `python -m runner` and dbt read), nothing is fixed to a
machine."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import Failure
from dagster_dbt import DbtProject
from dagster_dbt.dbt_project import using_dagster_dev

# The repository root (dbt_project.yml, ingestion/, profiles/); CDC_PROJECT_DIR points elsewhere.
PROJECT_DIR = Path(os.environ.get("CDC_PROJECT_DIR") or Path(__file__).resolve().parents[3])

# Every op that starts Spark takes a slot of this pool; dagster.yaml gives it one slot, because
# the `local` target's Derby metastore admits one Spark process at a time.
SPARK_POOL = "cdc_lakehouse_spark"


def dbt_executable() -> str:
    """The dbt of this Python environment, which need not be on PATH (`.venv/bin/dagster dev`)."""
    beside = Path(sys.executable).with_name("dbt")
    return str(beside) if beside.exists() else "dbt"


def profiles_dir() -> Path:
    return Path(os.environ.get("DBT_PROFILES_DIR") or PROJECT_DIR / "profiles")


def dbt_project() -> DbtProject:
    """The dbt project, its manifest in dbt's target folder (DBT_TARGET_PATH, as dbt's own)."""
    return DbtProject(
        project_dir=PROJECT_DIR,
        profiles_dir=profiles_dir(),
        target_path=Path(os.environ.get("DBT_TARGET_PATH", "target")),
    )


def prepare_manifest(project: DbtProject) -> Path:
    """`dbt parse` (no Spark) under `dagster dev`, so model edits show on reload, and wherever
    the manifest is missing; a deployment parses once when it ships instead."""
    if using_dagster_dev() or not project.manifest_path.exists():
        parsed = subprocess.run(
            [dbt_executable(), "parse", "--quiet", "--project-dir", str(PROJECT_DIR),
             "--profiles-dir", str(project.profiles_dir), "--target-path", str(project.manifest_path.parent)],
            cwd=PROJECT_DIR, capture_output=True, text=True, check=False,
        )
        if parsed.returncode != 0 or not project.manifest_path.exists():
            raise RuntimeError(f"dbt parse failed ({parsed.returncode}):\n{parsed.stdout}{parsed.stderr}")
    return project.manifest_path


def embedded_metastore() -> bool:
    """Whether Spark runs here on the `local` target's own Derby metastore (not a cluster's
    Thrift Server, not a shared metastore)."""
    return os.environ.get("CDC_TARGET", "local") == "local" and os.environ.get("CDC_METASTORE", "embedded") == "embedded"


def lakehouse_dir() -> Path:
    return (PROJECT_DIR / os.environ.get("CDC_LAKEHOUSE_DIR", "lakehouse")).resolve()


@contextmanager
def lakehouse_lock() -> Iterator[None]:
    """The lock `python -m runner` takes ($CDC_LAKEHOUSE_DIR/run.lock), held while a step's
    Spark runs on the embedded metastore: the pool keeps Dagster's own runs apart, the lock
    keeps the runner and hand-started runs out too. A held lock fails the step at once."""
    if not embedded_metastore():
        yield
        return
    from core.lock import RunLockedError, exclusive

    try:
        with exclusive(lakehouse_dir() / "run.lock"):
            yield
    except RunLockedError as exc:
        raise Failure(description=f"{exc}: the lakehouse is busy, nothing was started") from exc
