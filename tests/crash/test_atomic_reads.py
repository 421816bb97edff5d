"""Silver reads are atomic (docs/decisions/silver-atomic-reads.md): while passes of the
runner (ingestion, the build of silver.actor, the table services: compaction, cleaning,
archival) run, and passes are SIGKILLed at each step of their build, two readers in other
processes read silver.actor again and again: a Spark session on the shared metastore
(tests/crash/read_loop.py) and a HiveServer2 session on a Spark Thrift Server. Every
read must succeed and equal the oracle's state after some batch, and a reader's reads
must never go back to an older batch.

The metastore is shared in PostgreSQL (the stack's `metastore` component), so the runner
and the readers are processes of their own, as they are for a team that points
dashboards at silver. The Thrift Server runs on `local[1]` (CDC_THRIFT_MASTER) instead
of a cluster.

Budget: one kill at each step of CDC_ATOMIC_KILL_STEPS, a killed pass per step in a
row (each taking over from the one killed before it), then whole passes until the
readers have read at least CDC_ATOMIC_READS times (default 200) and a compaction and a
clean ran. `make test` kills at the two steps that change what the view could show
(the recent table's new generation, the view's swap); `make test-long` at all five of
STEPS, with more reads. The counts are written to build/reports/atomic_reads.json."""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.crash.processes import actor_stream, finish, kill, start
from tests.crash.read_loop import READ_PAUSE
from tests.support import oracle
from tests.support.paths import ROOT
from tests.support.stacks import stack_environment, thrift_connection

pytestmark = pytest.mark.integration

MIN_READS = int(os.environ.get("CDC_ATOMIC_READS", "200"))
SEED = 20261206
PORT_OFFSET = 40
REPORT = ROOT / "build" / "reports" / "atomic_reads.json"
PYTHON = sys.executable
QUERY = "select actor_id, first_name, last_name, last_update from silver.actor order by actor_id"
# A build's steps, by the statement dbt logs as it starts it: the batch, the new generation
# of the recent table, the state table's upsert, the view's swap, the watermark.
STEPS = {
    "batch": "create table silver.actor__cdc_batch",
    "recent": "partition (cdc_generation",
    "upsert": "insert into silver.actor__cdc_state",
    "publish": "alter view silver.actor as",
    "watermark": "'cdc.watermark'",
}
KILL_STEPS = os.environ.get("CDC_ATOMIC_KILL_STEPS", "recent publish").split()


@pytest.fixture(scope="module")
def readers_stack(run_dir: Path):
    """The stack's PostgreSQL with the metastore, and a Thrift Server on it."""
    import stack
    from stack import spark_cluster

    base = run_dir / "atomic-reads"
    with stack_environment(run_dir / "stack-atomic-reads", base / "lakehouse", PORT_OFFSET,
                           {"CDC_THRIFT_MASTER": "local[1]"}):
        try:
            try:
                info = stack.up(["metastore"])
                spark_cluster.up(["thrift"])
            except Exception as exc:  # noqa: BLE001 - fail (never skip) with the reason
                pytest.fail(f"the metastore or the Thrift Server did not start: {exc}", pytrace=False)
            yield {"base": base, "metastore_env": info.metastore_env, **spark_cluster.thrift_env()}
        finally:
            spark_cluster.down()
            stack.down(purge=False)


def normalized(rows: list[dict]) -> list[dict]:
    """Rows as JSON gives them back: timestamps as ISO text (a Thrift client gets text)."""
    def value(v):
        if isinstance(v, str) and len(v) >= 19 and v[4] == "-" and v[10] in " T":
            return datetime.fromisoformat(v).isoformat()
        return v.isoformat() if isinstance(v, datetime) else v
    return [{k: value(v) for k, v in row.items()} for row in rows]


def thrift_reader(env: dict, out: list[dict], stop: threading.Event) -> None:
    """Reads through one HiveServer2 session, as a dashboard holds one, until `stop`."""
    conn = None
    while not stop.is_set():
        started = time.time()
        try:
            if conn is None:
                conn = thrift_connection(env)
            cursor = conn.cursor()
            cursor.execute(QUERY)
            names = [d[0].rsplit(".", 1)[-1] for d in cursor.description]
            out.append({"started": started, "rows": [dict(zip(names, row)) for row in cursor.fetchall()]})
        except Exception as exc:  # noqa: BLE001 - a failed read is the finding, recorded
            out.append({"started": started, "error": f"{type(exc).__name__}: {str(exc)[:500]}"})
            conn = None
        time.sleep(READ_PAUSE)
    if conn is not None:
        conn.close()


def kill_at(cmd: list[str], env: dict, log: Path, dbt_log: Path, fragment: str, rng: random.Random) -> bool:
    """Start `cmd` and SIGKILL it once dbt's log shows it began the statement holding
    `fragment`, within a second of that; False if it ended first."""
    offset = dbt_log.stat().st_size if dbt_log.exists() else 0
    process = start(cmd, env, log)
    deadline = time.monotonic() + 600
    while process.poll() is None and time.monotonic() < deadline:
        text = dbt_log.read_text(errors="replace")[offset:] if dbt_log.exists() else ""
        if fragment in text:
            time.sleep(rng.uniform(0.0, 1.0))
            if process.poll() is None:
                kill(process)
                return True
            break
        time.sleep(0.05)
    if process.poll() is None:
        kill(process)
        pytest.fail(f"{' '.join(cmd[:3])} never reached {fragment!r} in 600 s; see {log}")
    return False


def test_readers_see_whole_builds_through_kills_and_table_services(readers_stack, run_dir: Path):
    rng = random.Random(SEED)
    base = readers_stack["base"]
    landing, logs = base / "landing" / "topics", base / "logs"
    logs.mkdir(parents=True)
    # a batch per pass: the first, five killed, then whole ones until the reads are in;
    # a larger CDC_ATOMIC_READS needs more passes, hence more batches
    batches = max(16, 6 + MIN_READS // 30)
    stream = actor_stream(rng, transactions=batches * 8, keys=12, batches=batches)
    env = {**os.environ, **readers_stack["metastore_env"], "CDC_LAKEHOUSE_DIR": str(base / "lakehouse"),
           "DBT_PROFILES_DIR": str(ROOT / "profiles"), "TZ": "UTC", "PYTHONPATH": str(ROOT)}
    # A pass of the runner, as a schedule runs it: ingestion, `dbt build` of actor, then the
    # table services (compaction, cleaning to 2 retained commits, so that files go while
    # readers read; archival). After a kill the killed build's lock is stale (no other build
    # runs here): its age limit 0 lets the next pass take it over.
    reports = base / "reports"
    reports.mkdir()
    env.update(DBT_LOG_PATH=str(logs / "dbt"), DBT_TARGET_PATH=str(base / "target"))

    def runner_pass(name: str) -> list[str]:
        return [PYTHON, "-m", "runner", "--once", "--input", str(landing), "--table-services",
                "--retain-commits", "2", "--report", str(reports / f"{name}.json"),
                "--dbt-arg=--select", "--dbt-arg=actor",
                "--dbt-arg=--vars", "--dbt-arg=" + json.dumps({"cdc_build_lock_max_age_hours": 0})]
    dbt_log = logs / "dbt" / "dbt.log"
    runner_log = logs / "runner.log"

    # The oracle after each batch; consecutive states differ, or a stale read would pass.
    batch_dirs = [stream.write_batch(n, base / "batches" / str(n)) for n in range(len(stream.batches))]
    states = [normalized(oracle.expected_current_state_from_batches(batch_dirs[:n + 1], "actor"))
              for n in range(len(batch_dirs))]
    assert all(a != b for a, b in zip(states, states[1:])), "two consecutive batches leave the same state"

    stream.write_batch(0, landing)
    finish(runner_pass("0"), env, runner_log)

    spark_reads, thrift_reads, stop = base / "spark-reads.jsonl", [], threading.Event()
    stop_file = base / "stop-reading"
    reader = start([PYTHON, "-m", "tests.crash.read_loop", str(spark_reads), str(stop_file)], env,
                   logs / "reader.log")
    thread = threading.Thread(target=thrift_reader, args=(readers_stack, thrift_reads, stop), daemon=True)
    thread.start()
    unknown = sorted(set(KILL_STEPS) - set(STEPS))
    assert not unknown, f"CDC_ATOMIC_KILL_STEPS names {unknown}: the steps are {', '.join(STEPS)}"
    kills = {step: 0 for step in KILL_STEPS}
    # One kill at each of KILL_STEPS, in turn, each pass killed on the batch after the last one's:
    # each takes over from the killed one before it, so it recovers while readers read. Then
    # whole passes (build and table services, each pass compacting and cleaning), two at
    # least, until the readers have read enough and a compaction and a clean ran.
    pending = list(KILL_STEPS)
    whole = ["0"]  # the passes that ran to their end, by report name
    rounds = 0
    try:
        def spark_read_count() -> int:
            return len(spark_reads.read_text().splitlines()) if spark_reads.exists() else 0

        def services_ran() -> bool:
            done = [t for name in whole[1:] for t in services_of(reports / f"{name}.json")]
            return any(t["compactions"] for t in done) and any(t["files_cleaned"] for t in done)

        for batch in range(1, len(stream.batches)):
            stream.write_batch(batch, landing)
            rounds = batch
            if pending:
                name = f"{batch}-killed"
                if kill_at(runner_pass(name), env, runner_log, dbt_log, STEPS[pending[0]], rng):
                    kills[pending.pop(0)] += 1
                else:  # it ended before that step: a whole pass, the step tried again next
                    whole.append(name)
                continue
            finish(runner_pass(str(batch)), env, runner_log)  # a whole pass: the build and the services
            whole.append(str(batch))
            if len(whole) >= 3 and spark_read_count() + len(thrift_reads) >= MIN_READS and services_ran():
                break
    finally:
        stop.set()
        stop_file.touch()
        thread.join(timeout=120)
        try:
            reader.wait(timeout=120)
        except Exception:  # noqa: BLE001 - still reading: stop it
            kill(reader)

    spark_results = [json.loads(line) for line in spark_reads.read_text().splitlines()]
    report = {"rounds": rounds, "kills": kills, "reads": {}, "services": []}
    for name, reads in (("spark", spark_results), ("thrift", thrift_reads)):
        failed = [r for r in reads if "error" in r]
        matched = [next((n for n, state in enumerate(states) if normalized(r["rows"]) == state), None)
                   for r in reads if "rows" in r]
        neither = [r for r, n in zip((r for r in reads if "rows" in r), matched) if n is None]
        report["reads"][name] = {"reads": len(reads), "failed": len(failed), "matching_neither": len(neither),
                                 "states_seen": len(set(matched) - {None})}
        assert not failed, f"{name} reader: {len(failed)} of {len(reads)} reads failed, e.g. {failed[0]['error']}"
        assert not neither, (f"{name} reader: {len(neither)} of {len(reads)} reads match no batch's state, "
                             f"e.g. {neither[0]['rows']}")
        assert matched == sorted(matched), f"{name} reader went back to an older state: {matched}"
        assert len(set(matched)) >= 3, f"{name} reader saw {len(set(matched))} states: the test proved little"
    services_runs = []
    for name in whole:
        done = services_of(reports / f"{name}.json")
        assert not [t["error"] for t in done if t["error"]], f"the table services failed: {done}"
        services_runs.append({"pass": name, "compactions": sum(len(t["compactions"]) for t in done),
                              "files_cleaned": sum(t["files_cleaned"] for t in done)})
    report["services"] = services_runs
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2) + "\n")

    assert sum(report["reads"][n]["reads"] for n in ("spark", "thrift")) >= MIN_READS, report["reads"]
    assert all(kills.values()), f"a step was never killed: {kills}"
    assert any(run["compactions"] for run in services_runs), f"no compaction ran: {services_runs}"
    assert any(run["files_cleaned"] for run in services_runs), f"no cleaning removed a file: {services_runs}"
    final = [json.loads(line) for line in spark_reads.read_text().splitlines()][-1]
    assert normalized(final["rows"]) == states[rounds], "the last read is not the last batch's state"
    # time travel (cdc_as_of's query) to the instant the view published reads the same state
    published = dict(thrift_query(readers_stack, "show tblproperties silver.actor"))["cdc.published"]
    as_of = thrift_query(readers_stack, QUERY.replace("from silver.actor", f"from silver.actor__cdc_state timestamp as of "
                                                       f"'{published}' where not _cdc_deleted"))
    assert normalized([dict(zip(("actor_id", "first_name", "last_name", "last_update"), row)) for row in as_of]) \
        == states[rounds], f"silver.actor__cdc_state as of {published} is not the view's state"


def services_of(report: Path) -> list[dict]:
    """What a pass's table services did on silver.actor's state table, from its report."""
    return [t for t in json.loads(report.read_text())["table_services"] or []
            if t["table"].endswith("actor__cdc_state")]


def thrift_query(env: dict, sql: str) -> list[tuple]:
    with thrift_connection(env) as conn:
        cursor = conn.cursor()
        cursor.execute(sql)
        return cursor.fetchall()
