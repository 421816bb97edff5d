"""`python -m runner` (runner/cli.py), run the way cron or a scheduler runs it: a real
process (`[sys.executable, "-m", "runner", ...]` in the project folder) with real Spark,
Hudi and dbt, and its own lakehouse (CDC_LAKEHOUSE_DIR under tmp_path). Derby admits
one process per metastore, so the runner never shares the test session's. dbt's target
and log folders are moved under tmp_path too. Nothing of the runner is mocked. Each
case is built so that a plausible mistake in runner/cli.py makes it fail:

- usage errors exit 2 and name the problem before Spark starts. In the loop a
  UsageError ends the run; it is not retried as a failed pass;
- a held `run.lock` makes a pass exit 4 and name the lock without starting Spark. In
  the loop a locked pass neither ends the loop nor counts as a failure, and SIGTERM
  stops it;
- the loop (`--every`) on Kafka Connect S3-sink files: a failed pass (a broken
  sources YAML) is logged and the loop goes on. A good pass resets the failure count:
  two failures that are not in a row stay under `--max-failures 2`. A pass that lands
  nothing after a passing build skips its dbt build (and ends as a passing one). SIGTERM during a
  pass, sent to the whole process group (as systemd stops a service, Spark's JVM
  included), lets that pass finish its dbt build, then the runner exits with the pass's code
  (3: it quarantined a malformed line). Afterwards silver.actor equals, row by row, the
  state computed here from the records written, and the line is in bronze._quarantine
  with its file, line and offset. The bench's freshness case (benchmarks/freshness.py)
  finds each pass's end and its landed actor rows in that output with its own patterns;
- SIGTERM to the process group while Spark's JVM is starting: the JVM survives it, the
  pass it interrupted runs to its end, then the loop stops (exit 0);
- `--max-failures N`: a loop whose every pass fails (dbt rejects an option) stops
  after exactly N passes, exits 1 and says why.

Spark starts in three runner processes (the loop, the JVM start and --max-failures). The silver and
quarantine tables are then read by path through the test session's Spark: Hudi needs
no metastore for that, and a session that is already running costs nothing more.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator

import pytest

from benchmarks import freshness
from benchmarks.measure import descendants, name_and_hwm
from core.lock import exclusive
from tests.support.compare import diff
from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

TOPIC = "pagila.public.actor"
# silver.actor and what `dbt build` needs for it; `cautious` runs only tests whose every
# parent is selected (as benchmarks/freshness.py).
ACTOR_ONLY = ["--dbt-arg=--select", "--dbt-arg=+actor", "--dbt-arg=--indirect-selection", "--dbt-arg=cautious"]
EVERY = "2"  # seconds between passes: the time the loop test has to change the input between two passes
NO_SPARK_SECONDS = 20  # a run that never starts Spark (the JVM alone takes about that on a busy machine)
PASS_TIMEOUT = 300  # one pass (Spark start, ingestion, dbt build) on a busy 2-core machine

PASS_END = re.compile(r" INFO runner: ingestion [0-9.]+s, dbt build [0-9.]+s: (ok|failed)$")
STOPPED = re.compile(r" INFO runner: stopped by signal$")
SKIPPED = re.compile(r" INFO runner: nothing landed since the last dbt build, which passed: dbt build skipped$")
LOCKED = re.compile(r" WARNING runner: another run \(pid \d+\) holds \S+run\.lock; this run does nothing$")
BAD_YAML = re.compile(r" ERROR runner: \S+sources\.yml is not valid YAML")
GAVE_UP = re.compile(r" ERROR runner: \d+ failed passes in a row: stopping$")
RUNNER_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ [A-Z]+ runner: ")

# The sources YAML the ingestion reads primary keys from (--sources-yml), and a broken one.
SOURCES = """\
version: 2
sources:
  - name: bronze
    tables:
      - name: pagila_public_actor
        meta: {topic: pagila.public.actor, primary_key: [actor_id]}
"""
BAD_SOURCES = "sources: [this is not YAML\n"

# Debezium envelopes of pagila.public.actor: (op, LSN, row image).
EPOCH = datetime(1970, 1, 1)


def actor(key: int, first: str, last: str, lsn: int) -> dict:
    return {"actor_id": key, "first_name": first, "last_name": last,
            "last_update": 1_700_000_000_000_000 + lsn * 1_000_000}  # MicroTimestamp


FIRST = [  # file +0+0: offsets 0-4
    ("c", 100, actor(1, "ANNA", "DOE", 100)),
    ("c", 110, actor(2, "BOB", "DOE", 110)),
    ("c", 120, actor(3, "CARL", "DOE", 120)),
    ("u", 130, actor(2, "BOBBY", "DOE", 130)),
    ("c", 140, actor(4, "DORA", "DOE", 140)),
]
UPDATE = ("u", 200, actor(1, "ANNE", "SMITH", 200))
# REPLICA IDENTITY DEFAULT: a delete's `before` holds the key, the other columns are defaults
DELETE = ("d", 210, {"actor_id": 3, "first_name": "", "last_name": "", "last_update": 0})
MALFORMED = '{"before": null, "after": {"actor_id": 9, "first_na'


def envelope(op: str, lsn: int, row: dict) -> str:
    source = {"connector": "postgresql", "db": "pagila", "schema": "public", "table": "actor", "lsn": lsn,
              "txId": lsn, "ts_ms": 1_700_000_000_000 + lsn, "snapshot": "false"}
    before, after = (row, None) if op == "d" else (None, row)
    return json.dumps({"before": before, "after": after, "source": source, "op": op,
                       "ts_ms": 1_700_000_000_000 + lsn})


SECOND_LINES = [  # file +0+5: offsets 5-8; lines 1-4 (the sink's line numbers are 1-based)
    envelope(*UPDATE),
    MALFORMED,           # line 2, offset 6: quarantined
    envelope(*DELETE),
    "null",              # the delete's tombstone: counted, not landed
]


def current_state(events: list[tuple[str, int, dict]]) -> list[dict]:
    """What silver.actor must hold, computed here and not by the project's SQL: the
    latest row image per actor_id in LSN order, with deletes applied."""
    state: dict[int, dict] = {}
    for op, _, row in sorted(events, key=lambda event: event[1]):
        if op == "d":
            state.pop(row["actor_id"], None)
        else:
            state[row["actor_id"]] = {**row, "last_update": EPOCH + timedelta(microseconds=row["last_update"])}
    return [state[key] for key in sorted(state)]


def runner_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The test's environment (DBT_PROFILES_DIR, CDC_SPARK_JARS, PYSPARK_PYTHON, ...) with
    the runner's own lakehouse and dbt target/log folders, all under tmp_path."""
    return dict(os.environ, CDC_LAKEHOUSE_DIR=str(tmp_path / "lakehouse"), CDC_SPARK_MASTER="local[2]", TZ="UTC",
                DBT_TARGET_PATH=str(tmp_path / "dbt-target"), DBT_LOG_PATH=str(tmp_path / "dbt-logs"), **extra)


def no_java_env(tmp_path: Path) -> dict[str, str]:
    """For runs that must not start Spark: with JAVA_HOME pointing nowhere, an attempt to
    start Spark fails loudly (JAVA_GATEWAY_EXITED, exit 1) instead of only taking time."""
    return runner_env(tmp_path, JAVA_HOME=str(tmp_path / "no-java"))


def run_quick(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "runner", *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=NO_SPARK_SECONDS * 3)
    return result, time.monotonic() - started


def assert_no_spark(result: subprocess.CompletedProcess, seconds: float, lakehouse: Path) -> None:
    output = result.stdout + result.stderr
    assert seconds < NO_SPARK_SECONDS, f"took {seconds:.1f}s: did it start Spark?\n{output[-3000:]}"
    assert "JAVA_GATEWAY_EXITED" not in output, f"it tried to start Spark:\n{output[-3000:]}"
    assert not (lakehouse / "metastore_db").exists(), "it booted the metastore"


class Output(threading.Thread):
    """A runner's stdout and stderr (merged), line by line as they come, also copied
    to a log file. Text mode splits Spark's progress bar at its carriage returns."""

    def __init__(self, proc: subprocess.Popen, log: Path) -> None:
        super().__init__(daemon=True)
        self.proc, self.log = proc, log
        self.lines: list[str] = []
        self.ended = False
        self.changed = threading.Condition()

    def run(self) -> None:
        with open(self.log, "w") as copy:
            for line in self.proc.stdout:  # type: ignore[union-attr]
                copy.write(line)
                copy.flush()
                with self.changed:
                    self.lines.append(line.rstrip("\n"))
                    self.changed.notify_all()
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def found(self, pattern: re.Pattern, start: int = 0) -> list[re.Match]:
        with self.changed:
            return [m for m in map(pattern.search, self.lines[start:]) if m]

    def mark(self) -> int:
        with self.changed:
            return len(self.lines)

    def text(self, start: int = 0) -> str:
        with self.changed:
            return "\n".join(self.lines[start:])

    def runner_lines(self, start: int = 0) -> list[str]:
        """The runner's own log lines (not Spark's, dbt's or the ingestion's)."""
        with self.changed:
            return [line for line in self.lines[start:] if RUNNER_LINE.search(line)]

    def wait_for(self, pattern: re.Pattern, count: int, what: str, timeout: float = PASS_TIMEOUT) -> list[re.Match]:
        """The first `count` lines that match; fails if the runner exits or the time runs out first."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                matches = [m for m in map(pattern.search, self.lines) if m]
                if len(matches) >= count:
                    return matches[:count]
                if self.ended:
                    pytest.fail(f"the runner exited ({self.proc.wait()}) before {what}; see {self.log}:\n"
                                + "\n".join(self.lines[-60:]), pytrace=False)
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"waited {timeout:.0f}s for {what}; see {self.log}:\n" + "\n".join(self.lines[-60:]),
                                pytrace=False)
                self.changed.wait(left)


@contextmanager
def running(args: list[str], env: dict[str, str], log: Path) -> Iterator[tuple[subprocess.Popen, Output]]:
    """A runner process and its output; killed if the test leaves it running."""
    # its own process group, as a service: the loop test signals the whole group
    proc = subprocess.Popen([sys.executable, "-m", "runner", *args], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = Output(proc, log)
    out.start()
    try:
        yield proc, out
    finally:
        if proc.poll() is None:
            proc.kill()  # its Spark JVM exits when the runner's end of the gateway pipe closes
        proc.wait(timeout=60)
        out.join(timeout=30)


def exit_code(proc: subprocess.Popen, out: Output, timeout: float, what: str) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the runner did not exit within {timeout:.0f}s {what}; see {out.log}:\n"
                    + out.text()[-4000:], pytrace=False)


def silver_actor(spark, tmp_path: Path) -> list[dict]:
    """silver.actor of the runner's lakehouse: its state table's live rows, read by path
    (the test session's metastore does not know it)."""
    table = tmp_path / "lakehouse" / "warehouse" / "silver.db" / "actor__cdc_state"
    columns = ["actor_id", "first_name", "last_name", "last_update"]
    rows = spark.read.format("hudi").load(str(table)).where("not _cdc_deleted").select(*columns)
    return [row.asDict() for row in rows.collect()]


def replace_text(path: Path, text: str) -> None:
    """Write a file whole (a pass reading it meanwhile sees the old or the new one)."""
    staging = path.with_name(path.name + ".tmp")
    staging.write_text(text)
    os.replace(staging, path)


def land(landing: Path, start: int, lines: list[str]) -> Path:
    """One S3-sink file `topics/<topic>/partition=0/<topic>+0+<start>.json`, moved into
    place whole so that a pass listing the folder sees all of it or none of it."""
    folder = landing / TOPIC / "partition=0"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{TOPIC}+0+{start}.json"
    staging = landing.parent / f".staging-{path.name}"
    staging.write_text("\n".join(lines) + "\n")
    os.replace(staging, path)
    return path


# --- no Spark -----------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["--once", "--every", "5", "--input", "{landing}"], "argument --every: not allowed with argument --once"),
    (["--every", "5"], "one of the arguments --input --kafka-bootstrap-servers is required"),
    (["--once", "--kafka-bootstrap-servers", "127.0.0.1:9"], "--kafka-bootstrap-servers needs --topic-pattern"),
    # checked when a pass starts: in the loop it must end the run, not count as a failed pass
    # (three of those would exit 1) or be retried forever
    (["--every", "0.1", "--input", "{landing}", "--topic-pattern", "x"],
     "--topic-pattern and --checkpoint go with --kafka-bootstrap-servers, not --input"),
    # left over by the runner's parser, refused by the ingestion's: named as the runner's
    (["--once", "--evrey", "5", "--input", "{landing}"], "python -m runner: error: unrecognized arguments: --evrey 5"),
], ids=["once-and-every", "no-source", "kafka-without-pattern", "input-with-topic-pattern-in-loop", "mistyped"])
def test_usage_error_exits_2_naming_it_without_spark(tmp_path: Path, args: list[str], message: str) -> None:
    args = [arg.format(landing=tmp_path / "topics") for arg in args]
    result, seconds = run_quick(args, no_java_env(tmp_path))
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.count(message) == 1, result.stderr[-3000:]
    assert_no_spark(result, seconds, tmp_path / "lakehouse")


def test_held_lock_exits_4_naming_it_and_the_loop_waits_it_out(tmp_path: Path) -> None:
    lakehouse = tmp_path / "lakehouse"
    lock = lakehouse / "run.lock"
    landing = tmp_path / "topics"
    land(landing, 0, [envelope(*FIRST[0])])  # there is work, yet the pass must not start
    env = no_java_env(tmp_path)
    with exclusive(lock):
        result, seconds = run_quick(["--once", "--input", str(landing)], env)
        assert result.returncode == 4, result.stderr[-3000:]
        assert f"another run (pid {os.getpid()}) holds {lock.resolve()}; this run does nothing" in result.stderr
        assert_no_spark(result, seconds, lakehouse)

        # The loop: a locked pass is not a failure (--max-failures 1 would stop at the
        # first), and the loop keeps trying until it is told to stop.
        with running(["--every", "0.2", "--max-failures", "1", "--input", str(landing)], env,
                     tmp_path / "locked-loop.log") as (proc, out):
            out.wait_for(LOCKED, 3, "three locked passes", timeout=NO_SPARK_SECONDS)
            proc.send_signal(signal.SIGTERM)
            code = exit_code(proc, out, NO_SPARK_SECONDS, "after SIGTERM")
    assert code == 4, out.text()[-3000:]  # the code of its last pass
    assert STOPPED.search(out.runner_lines()[-1]), out.text()[-3000:]
    assert not out.found(GAVE_UP) and "JAVA_GATEWAY_EXITED" not in out.text()
    assert not (lakehouse / "metastore_db").exists()


@pytest.mark.parametrize(("option", "value", "loop"), [
    ("--max-failures", "0", ["--every", "0.1"]), ("--every", "0", []), ("--every", "-1", [])])
def test_a_count_or_interval_below_one_is_a_usage_error(tmp_path: Path, option: str, value: str,
                                                         loop: list[str]) -> None:
    """--max-failures 0 would stop after the first pass that did not fail; --every 0 would
    spin without rest (hundreds of locked passes a second)."""
    landing = tmp_path / "topics"
    landing.mkdir()
    args = [*loop, option, value, "--input", str(landing)]
    with exclusive(tmp_path / "lakehouse" / "run.lock"):  # were a pass to start: locked, no Spark
        result, seconds = run_quick(args, no_java_env(tmp_path))
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"argument {option}: must be more than 0, got {value}" in result.stderr, result.stderr[-3000:]
    assert_no_spark(result, seconds, tmp_path / "lakehouse")


# --- Spark, Hudi, dbt -----------------------------------------------------------------


def test_loop_goes_on_after_failed_passes_and_finishes_the_pass_in_progress_on_sigterm(spark, tmp_path: Path) -> None:
    landing, sources = tmp_path / "topics", tmp_path / "sources.yml"
    replace_text(sources, BAD_SOURCES)
    land(landing, 0, [envelope(*event) for event in FIRST])  # there from the start: the failed pass must not land it
    report_path = tmp_path / "reports" / "pass.json"
    args = ["--every", EVERY, "--max-failures", "2", "--input", str(landing), "--sources-yml", str(sources),
            "--report", str(report_path), "--freshness", "--table-services", "--table-services-every", "0.1",
            "--retain-commits", "1", *ACTOR_ONLY]
    with running(args, runner_env(tmp_path), tmp_path / "runner.log") as (proc, out):
        # pass 1: Spark starts, the ingestion rejects the sources YAML before reading a file
        out.wait_for(BAD_YAML, 1, "pass 1's sources YAML error")
        replace_text(sources, SOURCES)
        # pass 2: lands the first file (5 events, key-checked) and builds silver.actor
        pass_2 = out.wait_for(PASS_END, 1, "the end of pass 2")[0]
        assert pass_2.group(1) == "ok", out.text()[-5000:]
        # table, files, events read, landed, quarantined, tombstones, skipped, key check, held already
        assert out.found(re.compile(r"pagila_public_actor\s+1\s+5\s+5\s+0\s+0\s+0\s+yes\s+0$")), out.text()[-5000:]
        # pass 3 lands nothing after pass 2's passing build: no dbt build
        out.wait_for(SKIPPED, 1, "pass 3 skipping its dbt build")
        replace_text(sources, BAD_SOURCES)
        # pass 4 fails too: two failures under --max-failures 2, but passes 2 and 3 came between them
        out.wait_for(BAD_YAML, 2, "pass 4's sources YAML error")
        replace_text(sources, SOURCES)
        second = land(landing, len(FIRST), SECOND_LINES)
        # pass 5: lands the second file and quarantines its malformed line; its summary is
        # printed before its dbt build starts, so SIGTERM arrives while the pass is in progress
        out.wait_for(re.compile(r"1 new file\(s\), 1 file\(s\) skipped as already ingested, 1 quarantined$"), 1,
                     "pass 5's ingestion summary")
        signalled = out.mark()
        # to the whole process group, as systemd stops a service: Spark's JVM gets it too
        os.killpg(proc.pid, signal.SIGTERM)
        code = exit_code(proc, out, PASS_TIMEOUT, "after SIGTERM (the pass in progress should finish, then stop)")

    text = out.text()
    assert code == 3, f"exit {code}, expected 3 (that pass quarantined a line):\n{text[-5000:]}"
    assert not out.found(GAVE_UP), text[-5000:]
    # passes 2 and 5 built, pass 3 (and any more before pass 4 failed) skipped its build
    skipped = len(out.found(SKIPPED))
    assert skipped >= 1, text[-5000:]
    assert len(out.found(BAD_YAML)) == 2 and [m.group(1) for m in out.found(PASS_END)] == ["ok"] * (2 + skipped), \
        text[-5000:]
    # after the signal, the pass in progress finished its dbt build, then the runner stopped
    # without another pass
    assert [m.group(1) for m in out.found(PASS_END, signalled)] == ["ok"], text[-5000:]
    after = out.runner_lines(signalled)
    assert PASS_END.search(after[0]) and STOPPED.search(after[-1]) and len(after) == 2, "\n".join(after)
    assert re.search(rf"WARNING ingestion\.pipeline: quarantined file:{re.escape(str(second))} line 2: "
                     r"malformed JSON or not a JSON object", text), text[-5000:]
    # the bench's freshness case reads a loop's output with patterns of its own: they find
    # every pass's end and the actor rows each pass landed (5, then 2 of the second file)
    assert [m.group(1) for m in out.found(freshness.PASS_DONE)] == ["ok"] * (2 + skipped), text[-5000:]
    assert [int(m.group(1)) for m in out.found(freshness.ACTOR_LANDED)] == [5, 2], text[-5000:]

    assert_last_pass_report(spark, tmp_path, json.loads(report_path.read_text()))

    expected = current_state([*FIRST, UPDATE, DELETE])
    assert [row["first_name"] for row in expected] == ["ANNE", "BOBBY", "DORA"]  # the fold above, spelled out
    problems = diff("silver.actor", expected, silver_actor(spark, tmp_path), ["actor_id"])
    assert not problems, "\n".join(problems)
    quarantine = spark.read.format("hudi").load(str(tmp_path / "lakehouse" / "warehouse" / "bronze.db" / "_quarantine"))
    assert [tuple(row) for row in quarantine.select("_source_file", "_source_line", "_offset", "reason", "raw")
            .collect()] == [(f"file:{second}", 2, len(FIRST) + 1, "malformed JSON or not a JSON object", MALFORMED)]


def assert_last_pass_report(spark, tmp_path: Path, report: dict) -> None:
    """--report holds the last pass's (pass 5's) report: the second file's records by op,
    its quarantined line, the build of actor with its rejected-events test, and the
    freshness of actor's bronze source against bronze's own `_ingested_at`."""
    started, ended = (datetime.fromisoformat(report[k].replace("Z", "+00:00")) for k in ("started_at", "ended_at"))
    assert report["exit_code"] == 3 and report["outcome"] == "ok, records quarantined" and started <= ended, report
    assert set(report["seconds"]) == {"ingestion", "dbt_build", "freshness", "table_services"}, report["seconds"]
    (table,) = report["ingestion"]["tables"]
    assert (table["table"], table["files"], table["events_read"], table["landed"], table["quarantined"],
            table["tombstones"]) == ("pagila_public_actor", 1, 4, 2, 1, 1), table
    assert table["accepted_by_op"] == {UPDATE[0]: 1, DELETE[0]: 1}, table
    newest = max(1_700_000_000_000 + lsn for _, lsn, _ in (UPDATE, DELETE))  # the source ts_ms envelope() writes
    assert table["newest_source_ts_ms"] == newest
    assert started.timestamp() - newest / 1000 <= table["source_lag_seconds"] <= ended.timestamp() - newest / 1000
    dbt_nodes = {node["name"]: node for node in report["dbt"]["nodes"]}
    assert report["dbt"]["ran"] and report["dbt"]["success"] and dbt_nodes["actor"]["status"] == "success", report["dbt"]
    assert report["dbt"]["rejected_events"] == {"actor": 0}, report["dbt"]
    bronze = spark.read.format("hudi").load(str(tmp_path / "lakehouse" / "warehouse" / "bronze.db" / "pagila_public_actor"))
    loaded = bronze.selectExpr("max(_ingested_at)").first()[0]
    # the table services ran on every Hudi table of the lakehouse (a folder with a Hudi
    # timeline), once each, none failing, and passes before this one cleaned bronze
    warehouse = tmp_path / "lakehouse" / "warehouse"
    folders = {f"{p.parent.parent.parent.name.removesuffix('.db')}.{p.parent.parent.name}"
               for p in warehouse.rglob(".hoodie/hoodie.properties")}
    services = {entry["table"]: entry for entry in report["table_services"]}
    assert set(services) == folders and not any(e["error"] for e in services.values()), report["table_services"]
    assert services["silver.actor__cdc_state"]["table_type"] == "MERGE_ON_READ", services
    (source,) = report["freshness"]
    assert (source["source"], source["status"]) == ("bronze.pagila_public_actor", "pass"), source
    assert source["max_loaded_at"].startswith(loaded.isoformat(timespec="milliseconds")), (source, loaded)


def java_below(pid: int) -> bool:
    """Whether a `java` process runs below process `pid` (Spark's JVM, once it is launched)."""
    return any(name_and_hwm(p)[0] == "java" for p in descendants(pid) if p != pid)


def test_sigterm_while_spark_starts_lets_the_pass_run_then_stops(spark, tmp_path: Path) -> None:
    """The JVM is started with SIGTERM ignored and the runner holds SIGTERM blocked until
    the session is up: a SIGTERM meanwhile must neither kill the JVM nor be lost."""
    landing, sources = tmp_path / "topics", tmp_path / "sources.yml"
    replace_text(sources, SOURCES)
    land(landing, 0, [envelope(*event) for event in FIRST])
    args = ["--every", "600", "--input", str(landing), "--sources-yml", str(sources), *ACTOR_ONLY]
    reading = re.compile(r"INFO ingestion\.pipeline: reading 1 new file\(s\)")
    with running(args, runner_env(tmp_path), tmp_path / "runner.log") as (proc, out):
        deadline = time.monotonic() + PASS_TIMEOUT
        while not java_below(proc.pid):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no Spark JVM appeared (runner exit {proc.poll()}):\n{out.text()[-3000:]}", pytrace=False)
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGTERM)
        started_reading = bool(out.found(reading))
        # a lost SIGTERM leaves the loop resting 600 s: the wait below fails
        code = exit_code(proc, out, PASS_TIMEOUT, "after SIGTERM during Spark's start")
    text = out.text()
    assert not started_reading, "the signal came after the session was up: the test did not test the start"
    assert code == 0, f"exit {code}:\n{text[-5000:]}"
    assert out.found(reading) and [m.group(1) for m in out.found(PASS_END)] == ["ok"], text[-5000:]
    assert STOPPED.search(out.runner_lines()[-1]), text[-5000:]
    problems = diff("silver.actor", current_state(FIRST), silver_actor(spark, tmp_path), ["actor_id"])
    assert not problems, "\n".join(problems)


def test_max_failures_stops_a_loop_whose_every_pass_fails(tmp_path: Path) -> None:
    landing = tmp_path / "topics"
    landing.mkdir()
    # Spark starts and the ingestion finds nothing to do; then dbt refuses the option
    args = ["--every", "0.1", "--max-failures", "2", "--input", str(landing), "--dbt-arg=--no-such-flag"]
    with running(args, runner_env(tmp_path), tmp_path / "runner.log") as (proc, out):
        code = exit_code(proc, out, PASS_TIMEOUT, "(every pass fails: it should stop after the second)")
    text = out.text()
    assert code == 1, text[-5000:]
    assert [m.group(1) for m in out.found(PASS_END)] == ["failed", "failed"], text[-5000:]
    assert text.count("ERROR runner: dbt build failed: No such option: --no-such-flag") == 2, text[-5000:]
    assert re.search(r" ERROR runner: 2 failed passes in a row: stopping$", out.runner_lines()[-1]), text[-5000:]
