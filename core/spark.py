"""One place that knows how to start Spark for this project.

The embedded (`local`) settings live in `profiles/profiles.yml` so that `dbt build`
(dbt-spark `method: session`) and the ingestion start identical sessions that share
one metastore and warehouse. On a cluster (`spark-submit`) the session already exists
and keeps the cluster's own settings.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

import jinja2
import yaml
from pyspark.sql import SparkSession

PROJECT_DIR = Path(__file__).resolve().parent.parent
PROFILES_FILE = PROJECT_DIR / "profiles" / "profiles.yml"
PROFILE_NAME = "cdc_lakehouse"


class ProfileError(RuntimeError):
    """The dbt profile cannot provide Spark settings for the requested target."""


def _env_var(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise ProfileError(f"environment variable {name} is not set and has no default in {PROFILES_FILE}")
    return value


def profile_spark_settings(target: str = "local", profiles_file: Path = PROFILES_FILE) -> dict[str, str]:
    """Render `profiles.yml` as dbt does (only `env_var` is needed) and return the
    target's `server_side_parameters`."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.globals["env_var"] = _env_var
    # Like dbt, render only the values of the chosen target (others may need unset variables).
    outputs = (yaml.safe_load(profiles_file.read_text()) or {}).get(PROFILE_NAME, {}).get("outputs", {})
    if target not in outputs:
        raise ProfileError(f"target {target!r} not found in {profiles_file}; known: {sorted(outputs)}")
    if outputs[target].get("method") != "session":
        raise ProfileError(
            f"target {target!r} in {profiles_file} is not an embedded (method: session) target; "
            "on a cluster run the ingestion with spark-submit instead"
        )
    parameters = outputs[target].get("server_side_parameters", {})
    return {str(k): env.from_string(str(v)).render() for k, v in parameters.items()}


def jvm_archive(target: str = "local") -> Path | None:
    """The class data sharing archive the target's driver starts from (its
    `-XX:SharedArchiveFile`, relative to the project), or None if it names none."""
    options = profile_spark_settings(target).get("spark.driver.extraJavaOptions", "")
    found = re.search(r"-XX:SharedArchiveFile=(\S+)", options)
    return PROJECT_DIR / found.group(1) if found else None


METASTORES = ("embedded", "shared")


def check_metastore(environ: Mapping[str, str] = os.environ) -> str:
    """CDC_METASTORE as the profile reads it, refused unless it names a metastore this
    process can reach: `shared` needs SPARK_CONF_DIR to hold a hive-site.xml (else Spark
    would quietly open a Derby database in the working directory)."""
    kind = environ.get("CDC_METASTORE", "embedded")
    if kind not in METASTORES:
        raise ProfileError(f"CDC_METASTORE={kind!r}: choose embedded (the default, Derby in CDC_LAKEHOUSE_DIR) "
                           "or shared (the hive-site.xml in SPARK_CONF_DIR)")
    if kind == "shared":
        conf_dir = environ.get("SPARK_CONF_DIR", "")
        if not conf_dir or not (Path(conf_dir) / "hive-site.xml").is_file():
            raise ProfileError(f"CDC_METASTORE=shared but SPARK_CONF_DIR={conf_dir!r} holds no hive-site.xml: "
                               "point SPARK_CONF_DIR at the folder `python -m stack up --only metastore` writes "
                               "(docs/how-to/share-the-metastore.md)")
    return kind


def get_session(target: str | None = "local", overrides: Mapping[str, str] | None = None) -> SparkSession:
    """The active SparkSession, or a new embedded one configured from the profile target.

    `target=None` means "use whatever spark-submit configured" (cluster runs)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Spark's Python workers run this interpreter (the venv's), not the first python3 on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    if target:
        check_metastore()
    settings = profile_spark_settings(target) if target else {}
    settings.update(overrides or {})
    # Spark's launcher drops (with a warning each) settings not named spark.*; Hudi's
    # are SQL settings, which it reads from the session's conf.
    for key, value in settings.items():
        if key.startswith("spark."):
            builder = builder.config(key, value)
    session = builder.enableHiveSupport().getOrCreate()
    for key, value in settings.items():
        if not key.startswith("spark."):
            session.conf.set(key, value)
    session.sparkContext.setLogLevel(os.environ.get("CDC_SPARK_LOG_LEVEL", "ERROR"))
    return session


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set SQL confs for the block and restore them after (the session may be shared with dbt)."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
