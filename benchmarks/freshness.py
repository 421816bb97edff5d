"""Freshness: from a commit in PostgreSQL to the row visible in silver, with the real CDC
stack (PostgreSQL, Kafka, Kafka Connect + Debezium) and the scheduled loop
(`python -m runner --every N`) building the main project's `actor` model.

A row is visible when the runner's pass that landed it has finished its `dbt build`; the
runner logs the end of every pass, and its summary says whether the actor topic landed
anything. At the end the loop is stopped and silver.actor is read to check every sample
row is there: a time for a row that never arrived would be a lie.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cases import PROJECT_DIR, PYTHON
from benchmarks.measure import PeakSampler
from stack.settings import ports_above_defaults

# Ports 20 above the `make cdc-up` defaults (the e2e tests use +10).
PORTS = ports_above_defaults(20)
PASS_DONE = re.compile(r"ingestion [0-9.]+s, dbt build [0-9.]+s: (ok|failed)")
ACTOR_LANDED = re.compile(r"^pagila_public_actor\s+\S+\s+\d+\s+(\d+)")


# What the freshness rows' peak memory is (results.md prints it under the results).
MEMORY_NOTE = ("Freshness rows: peak JVM MiB is the runner loop's one JVM (every pass's ingestion and dbt build), "
               "over the whole freshness run; the CDC stack's JVMs (Kafka, Kafka Connect) are not counted.")


class FreshnessError(RuntimeError):
    """The freshness run could not measure (the stack or the loop failed); says which."""


@dataclass(frozen=True)
class Freshness:
    seconds: list[float]  # one per sample row, commit -> visible
    pass_interval: float
    peak_jvm_mib: float  # the runner loop's JVM (one for all its passes), over the whole run


class _Lines(threading.Thread):
    """Reads the runner's output; remembers when each pass ended and whether it landed actor rows."""

    def __init__(self, proc: subprocess.Popen, log: Path) -> None:
        super().__init__(daemon=True)
        self.proc, self.log = proc, log
        self.passes: list[tuple[float, int, bool]] = []  # (monotonic end time, actor rows landed, build ok)
        self._landed = 0
        self.lock = threading.Lock()

    def run(self) -> None:
        with open(self.log, "w") as out:
            for line in self.proc.stdout:  # type: ignore[union-attr]
                out.write(line)
                out.flush()
                found = ACTOR_LANDED.match(line)
                if found:
                    self._landed += int(found.group(1))
                done = PASS_DONE.search(line)
                if done:
                    with self.lock:
                        self.passes.append((time.monotonic(), self._landed, done.group(1) == "ok"))
                    self._landed = 0

    def passes_after(self, moment: float) -> list[tuple[float, int, bool]]:
        """Passes that ended after `moment`; a failed `dbt build` makes nothing visible, so it
        raises instead of being counted."""
        with self.lock:
            after = [p for p in self.passes if p[0] > moment]
        if any(not ok for _, _, ok in after):
            raise FreshnessError(f"a runner pass failed its dbt build: see {self.log}")
        return after


def measure(work: Path, samples: int = 5, every: float = 5.0, timeout: float = 600) -> Freshness:
    import stack

    os.environ.update(PORTS)
    os.environ["CDC_STACK_DIR"] = str(work / "stack")
    lakehouse = work / "lakehouse" / "freshness"
    env = {**os.environ, "CDC_LAKEHOUSE_DIR": str(lakehouse), "CDC_DBT_THREADS": "1"}
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)  # PostgreSQL runs as `postgres` when this runs as root
    try:
        stack.up(["postgres", "kafka", "connect"])
        stack.register("pagila-envelope")
        stack.wait_caught_up(r"pagila\.public\.actor")
    except Exception as exc:  # noqa: BLE001
        stack.down(purge=False)
        raise FreshnessError(f"the CDC stack did not start: {exc}") from exc
    runner = subprocess.Popen(
        [PYTHON, "-m", "runner", "--every", str(every), "--kafka-bootstrap-servers", stack.info().kafka_bootstrap,
         "--topic-pattern", r"pagila\.public\.actor", "--dbt-arg=--select", "--dbt-arg=+actor",
         # `cautious`: only the tests whose every parent is selected
         "--dbt-arg=--indirect-selection", "--dbt-arg=cautious"],
        cwd=PROJECT_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines = _Lines(runner, work / "runner.log")
    lines.start()
    memory = PeakSampler(runner.pid)
    memory.start()
    names: list[str] = []
    seconds: list[float] = []
    try:
        _wait(lambda: lines.passes_after(0), timeout, "the first runner pass (snapshot of actor)", runner)
        for i in range(samples):
            name = f"FRESH{i}"
            stack.psql(f"insert into public.actor (first_name, last_name) values ('{name}', 'BENCH')")
            committed = time.monotonic()  # psql returned: the transaction is committed
            names.append(name)
            visible = _wait(lambda: [p for p in lines.passes_after(committed) if p[1] > 0], timeout,
                            f"a runner pass landing actor row {name}", runner)
            seconds.append(round(visible[0][0] - committed, 2))
            time.sleep(every * (i % 3) / 2)  # commits at different points of the loop's cycle
    finally:
        runner.send_signal(signal.SIGTERM)
        try:
            runner.wait(timeout=300)
        except subprocess.TimeoutExpired:
            runner.kill()
        lines.join(timeout=10)
        memory.stop.set()
        memory.join()
        stack.down(purge=False)
    _check_rows(lakehouse, env, names, work)
    return Freshness(seconds, every, memory.peak_jvm_mib())


def _wait(found, timeout: float, what: str, runner: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = found()
        if result:
            return result
        if runner.poll() is not None:
            raise FreshnessError(f"the runner exited ({runner.returncode}) while waiting for {what}")
        time.sleep(0.2)
    raise FreshnessError(f"waited {timeout:.0f}s for {what}")


def _check_rows(lakehouse: Path, env: dict, names: list[str], work: Path) -> None:
    probe = (
        "from core.spark import get_session\n"
        "rows = get_session('local').sql(\"select first_name from silver.actor where last_name = 'BENCH'\").collect()\n"
        "print(sorted(r[0] for r in rows))\n"
    )
    done = subprocess.run([PYTHON, "-c", probe], cwd=PROJECT_DIR, env=env, capture_output=True, text=True)
    if done.returncode != 0 or repr(sorted(names)) not in done.stdout:
        raise FreshnessError(f"silver.actor does not hold the sample rows {names}: {done.stdout[-500:]} {done.stderr[-1500:]}")
