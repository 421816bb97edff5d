"""The project on a real Spark cluster on this machine: a standalone master, two workers
and a Spark Thrift Server with Hudi (stack/spark_cluster.py), one metastore shared in the
stack's PostgreSQL. The ingestion is submitted to the master with spark-submit, `dbt
build --target thrift` runs through the Thrift Server, and silver read back through a
HiveServer2 session must equal the oracle's current state, row by row; both
applications must have had executors with cores on both workers.

Not part of `make test` (`make test-cluster` runs it): its own stack, ports 30 above the
`make cdc-up` defaults, is started and stopped here, and nothing of it may be left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from tests.support import oracle
from tests.support.compare import diff
from tests.support.paths import ROOT, require_pagila
from tests.support.stacks import stack_environment, thrift_connection
from tools.sample_data import DEFAULT_SEED, generate

pytestmark = pytest.mark.cluster

DBT = str(Path(sys.executable).parent / "dbt")
SILVER = ("address", "city", "country")
GOLD = "address_locations"
PORT_OFFSET = 30


@pytest.fixture(scope="module")
def cluster(run_dir: Path):
    import stack
    from stack import spark_cluster

    base = run_dir / "cluster"
    with stack_environment(run_dir / "stack-cluster", base / "lakehouse", PORT_OFFSET):
        try:
            try:
                info = stack.up(["metastore"])
                cluster_env = spark_cluster.up(spark_cluster.COMPONENTS)
            except Exception as exc:  # noqa: BLE001 - fail (never skip) with the reason and the log's tail
                pytest.fail(f"the cluster stack did not start: {exc}", pytrace=False)
            yield {"base": base, "metastore_env": info.metastore_env, **cluster_env}
        finally:
            spark_cluster.down()
            stack.down(purge=False)
            left = spark_cluster.leftover_processes() + stack.leftover_processes()
            assert not left, f"processes left after the cluster stack stopped: {left}"


def run(cmd: list[str], env: dict[str, str], log: Path, timeout: float = 900) -> None:
    """Run `cmd` from the project root; fail with its log's tail unless it exits 0."""
    with open(log, "ab") as out:
        code = subprocess.run(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
    assert code == 0, f"{' '.join(cmd[:6])} ... exited {code}:\n{log.read_text(errors='replace')[-4000:]}"


def worker_states() -> list[dict]:
    """Each worker's `/json` answer (its running and finished executors)."""
    import json
    import urllib.request

    from stack import spark_cluster

    states = []
    for worker in spark_cluster.alive_workers():
        with urllib.request.urlopen(worker["webuiaddress"] + "/json", timeout=10) as response:
            states.append(json.loads(response.read()))
    return states


def executors_per_worker(app_name: str) -> list[int]:
    """Per worker, how many executors of `app_name` it ran (running or finished)."""
    return [sum(1 for e in state.get("executors", []) + state.get("finishedexecutors", [])
                if e["appdesc"]["name"] == app_name)
            for state in worker_states()]


def thrift_rows(sql: str) -> list[dict]:
    """Rows of `sql` through a HiveServer2 session on the stack's Thrift Server, typed as
    Spark returns them (the Thrift protocol carries timestamps, dates and decimals as text)."""
    from stack import spark_cluster

    with thrift_connection(spark_cluster.thrift_env()) as conn:
        cursor = conn.cursor()
        cursor.execute(sql)
        names = [d[0].rsplit(".", 1)[-1] for d in cursor.description]
        types = [d[1] for d in cursor.description]
        rows = cursor.fetchall()

    def typed(value, kind: str):
        if not isinstance(value, str):  # PyHive converts some types itself
            return value
        if kind == "TIMESTAMP_TYPE":
            return datetime.fromisoformat(value)
        if kind == "DATE_TYPE":
            return date.fromisoformat(value)
        if kind == "DECIMAL_TYPE":
            return Decimal(value)
        return value

    return [{n: typed(v, t) for n, v, t in zip(names, row, types)} for row in rows]


def test_ingestion_and_dbt_on_the_cluster_equal_the_oracle(cluster):
    from stack import spark_cluster
    from stack.settings import load_settings

    base = cluster["base"]
    sample, landing, logs = base / "sample", base / "landing" / "topics", base / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    generate(require_pagila(), sample, DEFAULT_SEED)
    batches = [sample / "batches" / str(n) for n in (1, 2)]
    for batch in batches:
        for table in SILVER:
            topic = f"pagila.public.{table}"
            shutil.copytree(batch / "topics" / topic, landing / topic, dirs_exist_ok=True)

    started = time.monotonic()
    cmd, env = spark_cluster.submit_command(load_settings(), ["ingestion", "--input", str(landing), "--target", "none"],
                                            name="cdc-ingestion")
    run(cmd, env, logs / "ingestion.log")
    ingestion_seconds = time.monotonic() - started

    dbt_env = {**os.environ, **cluster["metastore_env"], **spark_cluster.thrift_env(), "CDC_TARGET": "thrift",
               "DBT_PROFILES_DIR": str(ROOT / "profiles"), "TZ": "UTC"}
    started = time.monotonic()
    # the models' dbt unit tests run too (macros/materializations/unit_test/unit.sql)
    run([DBT, "build", "--select", *SILVER, GOLD, "--project-dir", str(ROOT),
         "--target-path", str(base / "target"), "--log-path", str(logs / "dbt")], dbt_env, logs / "dbt-stdout.log")
    dbt_seconds = time.monotonic() - started
    print(f"\ningestion via spark-submit {ingestion_seconds:.1f}s, dbt build --target thrift {dbt_seconds:.1f}s")

    # every dbt unit test of the project passes through the Thrift Server too
    run([DBT, "test", "--select", "test_type:unit", "--project-dir", str(ROOT), "--target-path",
         str(base / "target-unit"), "--log-path", str(logs / "dbt")], dbt_env, logs / "dbt-stdout.log")
    declared = {test["name"] for path in (ROOT / "models").glob("*/_*__unit_tests.yml")
                for test in yaml.safe_load(path.read_text())["unit_tests"]}
    results = json.loads((base / "target-unit" / "run_results.json").read_text())["results"]
    unit = {r["unique_id"].rsplit(".", 1)[-1]: r["status"] for r in results if r["unique_id"].startswith("unit_test.")}
    assert set(unit) == declared and set(unit.values()) == {"pass"}, unit

    problems = []
    for table in SILVER:
        expected = oracle.expected_current_state_from_batches(batches, table)
        assert expected, f"the oracle has no rows for {table}: the sample lost the table"
        actual = thrift_rows(f"select * from silver.{table}")
        problems += diff(f"silver.{table}", expected, actual, list(oracle.TABLES[table]["primary_key"]))
    assert not problems, "\n".join(problems)

    addresses = oracle.expected_current_state_from_batches(batches, "address")
    cities = {r["city_id"]: r for r in oracle.expected_current_state_from_batches(batches, "city")}
    countries = {r["country_id"]: r for r in oracle.expected_current_state_from_batches(batches, "country")}
    expected_gold = []
    for a in addresses:
        city = cities.get(a["city_id"])
        country = countries.get(city["country_id"]) if city else None
        expected_gold.append({"address_id": a["address_id"], "address": a["address"], "address2": a["address2"],
                              "district": a["district"], "postal_code": a["postal_code"], "phone": a["phone"],
                              "city_id": city and city["city_id"], "city": city and city["city"],
                              "country_id": country and country["country_id"],
                              "country": country and country["country"]})
    gold = diff(f"gold.{GOLD}", expected_gold, thrift_rows(f"select * from gold.{GOLD}"), ["address_id"])
    assert not gold, "\n".join(gold)

    # The work ran on the workers: both applications had executors with cores on each of them.
    state = spark_cluster.master_state()
    apps = {a["name"]: a for a in state["activeapps"] + state["completedapps"]}
    assert {"cdc-ingestion", "cdc-thrift-server"} <= set(apps), sorted(apps)
    for app in ("cdc-ingestion", "cdc-thrift-server"):
        # one core per executor (spark.executor.cores=1), as many cores as workers
        assert apps[app]["cores"] == 2, f"{app} was granted {apps[app]['cores']} cores"
        executors = executors_per_worker(app)
        assert len(executors) == 2 and all(n >= 1 for n in executors), f"{app}: executors per worker {executors}"
