"""Run one benchmark step as its own process and measure it: wall time and peak memory.

Every step is a fresh process (a fresh JVM), as a scheduled `dbt build` or ingestion run
is, so the times include Spark's start. Peak memory is the peak resident set (VmHWM in
/proc) of the step's JVM, which in `local[*]` is the Spark driver and its executors.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence


def timed_sql(spark, sql: str) -> float:
    """Seconds one statement takes in an already running session (`spark`), its result
    collected: for benchmarks that compare statements, not processes."""
    start = time.perf_counter()
    spark.sql(sql).collect()
    return time.perf_counter() - start


class StepFailed(RuntimeError):
    """A benchmark step exited non-zero; the message names the step and its log."""


@dataclass(frozen=True)
class Measured:
    step: str
    seconds: float
    peak_jvm_mib: float  # peak RSS of the step's Java processes (0 if none started)
    peak_python_mib: float  # peak RSS of the step's Python process
    log: Path


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, from /proc."""
    tree, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(tree.get(p, []))
    return out


def name_and_hwm(pid: int) -> tuple[str, float]:
    """A process's name and peak RSS in MiB (VmHWM); ("", 0.0) once it has ended."""
    name, hwm = "", 0.0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Name:"):
                    name = line.split()[1]
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) / 1024
    except OSError:
        pass
    return name, hwm


class PeakSampler(threading.Thread):
    """Polls the process tree's VmHWM (a peak the kernel keeps, so sampling misses nothing
    but a process that starts and ends between two polls)."""

    def __init__(self, pid: int, every: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.jvm: dict[int, float] = {}
        self.python = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for p in descendants(self.pid):
                name, hwm = name_and_hwm(p)
                if name == "java":
                    self.jvm[p] = max(self.jvm.get(p, 0.0), hwm)
                elif p == self.pid:
                    self.python = max(self.python, hwm)
            self.stop.wait(self.every)

    def peak_jvm_mib(self) -> float:
        """The highest VmHWM any Java process of the tree reached (0 if none started)."""
        return max(self.jvm.values(), default=0.0)


def run_step(step: str, argv: Sequence[str], log_dir: Path, env: Mapping[str, str] | None = None,
             cwd: Path | None = None, timeout: float = 4 * 3600) -> Measured:
    """Run `argv`, its output to <log_dir>/<step>.log; StepFailed if it exits non-zero."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{step}.log"
    with open(log, "w") as out:
        started = time.monotonic()
        proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env={**os.environ, **(env or {})})
        sampler = PeakSampler(proc.pid)
        sampler.start()
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise StepFailed(f"step {step} ran over {timeout:.0f}s and was killed; see {log}")
        finally:
            seconds = time.monotonic() - started
            sampler.stop.set()
            sampler.join()
    if code != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise StepFailed(f"step {step} exited with {code}; see {log}. Last lines:\n{tail}")
    return Measured(step, seconds, sampler.peak_jvm_mib(), sampler.python, log)
