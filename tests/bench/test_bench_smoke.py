"""Smoke run of the benchmark (`python -m benchmarks --scale smoke`): each kind of step
once at toy scale (one history point, no local[1] repeats), so `make bench` keeps
working. It measures nothing worth reading; what it checks is that each case ran, the
incremental silver table equalled the full recompute and the generator's live-key count
(the run's `dbt test` step), and that results and plots were written."""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def test_every_case_runs_and_agrees(tmp_path):
    work = tmp_path / "bench"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--scale", "smoke", "--work", str(work)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )
    assert done.returncode == 0, f"benchmark smoke run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    logs = sorted(p.name for p in (work / "logs").glob("*.log"))
    assert [name for name in logs if name.startswith("check_")], logs  # the equality checks ran
    with open(work / "results" / "results.csv") as f:
        rows = list(csv.DictReader(f))
    variants = {(r["case"], r["variant"]) for r in rows}
    for expected in [
        ("ingestion", "parse only (floor)"),
        ("ingestion", "Hudi Spark writer (HoodieStreamer's path)"),
        ("ingestion", "ours local[2]"),
        ("refresh", "ours first build"),
        ("refresh", "ours incremental local[2]"),
        ("refresh", "full recompute (reference)"),
        ("overhead", "run with no new data"),
        ("overhead", "run with 100 changes"),
    ]:
        assert expected in variants, f"{expected} missing from {sorted(variants)}"
    assert all(float(r["seconds"]) > 0 and float(r["peak_jvm_mib"]) > 0 for r in rows), rows
    report = (work / "results" / "results.md").read_text()
    assert "| met |" in report and "incremental / full recompute" in report
    for plot in ("refresh_vs_history.png", "ingestion_and_memory.png"):
        assert (work / "results" / plot).stat().st_size > 1000
