"""Sink files read from object storage into a lakehouse kept there.

The stack's S3 server (S3Proxy on 127.0.0.1, `stack/s3.py`) holds the recorded real
Debezium output of three Pagila tables in the S3 sink's layout; `python -m ingestion
--input s3a://...` and `dbt run` run as processes of their own with the warehouse on
s3a:// (CDC_WAREHOUSE_DIR) and the keys in the environment only. Silver, read back from
the store, must equal the oracle over the same files row by row. If the server cannot
start, the test fails with its log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from stack.s3 import S3Server
from stack.settings import load_settings, ports_above_defaults
from tests.support import oracle
from tests.support.compare import diff
from testdata.sink_formats import write_recorded_json

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "debezium" / "pagila-envelope"
TABLES = ["actor", "film", "payment"]
BUCKET = "cdc-test"
RECORDS_PER_FILE = 3  # several files per partition, as a sink's flushes write them
PYTHON = sys.executable
DBT = str(Path(sys.executable).parent / "dbt")


@pytest.fixture(scope="module")
def s3(run_dir: Path):
    """The stack's S3 server in this run's folder, on ports 50 above the defaults."""
    env = {"CDC_STACK_DIR": str(run_dir / "s3-stack"), **ports_above_defaults(50)}
    with mock.patch.dict(os.environ, env):
        server = S3Server(load_settings())
        server.start((BUCKET,))
        try:
            yield server
        finally:
            server.stop()


def write_sink_files(root: Path) -> list[Path]:
    """The fixture records of TABLES as the S3 sink lays them out, RECORDS_PER_FILE
    records per file."""
    return [path for table in TABLES
            for path in write_recorded_json(FIXTURES / f"pagila.public.{table}.jsonl", root, RECORDS_PER_FILE)]


def use_bucket(spark, server: S3Server) -> None:
    """Point this session's s3a client at the server for BUCKET only (per-bucket keys)."""
    conf = spark._jsc.hadoopConfiguration()  # noqa: SLF001 - Hadoop's settings of the session
    creds = server.credentials
    for key, value in {"endpoint": server.endpoint, "path.style.access": "true",
                       "access.key": creds.access_key, "secret.key": creds.secret_key}.items():
        conf.set(f"fs.s3a.bucket.{BUCKET}.{key}", value)


def upload(spark, files: list[Path], local_root: Path, uri: str) -> None:
    """Each file to the same place under `uri`, written through the s3a client (its
    copyFromLocalFile fails on these paths in Hadoop 3.3.4: "Cannot get relative path")."""
    jvm = spark._jvm  # noqa: SLF001
    fs = jvm.org.apache.hadoop.fs.Path(uri).getFileSystem(spark._jsc.hadoopConfiguration())  # noqa: SLF001
    for path in files:
        out = fs.create(jvm.org.apache.hadoop.fs.Path(f"{uri}/{path.relative_to(local_root).as_posix()}"), True)
        try:
            out.write(bytearray(path.read_bytes()))
        finally:
            out.close()


def run(cmd: list[str], env: dict[str, str], log: Path) -> None:
    with open(log, "w") as out:
        done = subprocess.run(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=900)
    assert done.returncode == 0, f"{' '.join(cmd[:3])} exited {done.returncode}:\n{log.read_text()[-4000:]}"


def test_sink_files_and_lakehouse_on_s3(spark, s3: S3Server, tmp_path: Path):
    files = write_sink_files(tmp_path / "topics")
    use_bucket(spark, s3)
    upload(spark, files, tmp_path / "topics", f"s3a://{BUCKET}/landing/topics")

    # Keys only in the environment: nothing is passed on a command line or written to a profile.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"CDC_LAKEHOUSE_DIR": str(tmp_path / "lakehouse"), "CDC_WAREHOUSE_DIR": f"s3a://{BUCKET}/warehouse",
                "PYTHONPATH": str(ROOT), **s3.spark_env()})
    run([PYTHON, "-m", "ingestion", "--input", f"s3a://{BUCKET}/landing/topics"], env, tmp_path / "ingest.log")
    run([DBT, "run", "--select", *TABLES, "--project-dir", str(ROOT), "--target-path", str(tmp_path / "target"),
         "--log-path", str(tmp_path / "dbt-logs")], env, tmp_path / "dbt.log")

    # Nothing of the lakehouse's tables is on the local disk: they live in the bucket.
    assert not (tmp_path / "lakehouse" / "warehouse").exists()
    bronze = spark.read.format("hudi").load(f"s3a://{BUCKET}/warehouse/bronze.db/pagila_public_actor")
    assert bronze.count() == sum(1 for r in oracle.read_records(files) if r["topic"] == "pagila.public.actor")
    problems, live = [], {}
    for table in TABLES:
        expected = oracle.expected_current_state(files, table)
        live[table] = len(expected)
        columns = list(oracle.TABLES[table]["columns"])
        # silver.<table> is a view over its state table; read the table's live rows by path
        found = (spark.read.format("hudi").load(f"s3a://{BUCKET}/warehouse/silver.db/{table}__cdc_state")
                 .where("not _cdc_deleted").select(*columns))
        problems += diff(table, expected, [r.asDict(recursive=True) for r in found.collect()],
                         oracle.TABLES[table]["primary_key"])
    assert not problems, "\n".join(problems)
    # film's recorded rows are all deleted again: silver must hold none of them
    assert live["actor"] > 0 and live["payment"] > 0 and live["film"] == 0, live
