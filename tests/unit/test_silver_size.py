"""The silver-size case's plan and targets: each ratio is taken from its own rows, and the
results files say what was measured (benchmarks/silver_size.py; `make bench` runs it)."""

from __future__ import annotations

import csv

import pytest

from benchmarks import silver_size
from benchmarks.silver_size import SizeScale

SCALE = SizeScale("t", keys=(100, 1_000), batches=(10, 100), runs=2, run_batch=5)


def test_segments_open_with_the_snapshot_and_name_every_measured_batch():
    assert silver_size.segments(SCALE, 1_000) == [
        ("snapshot", 1_000), ("cold_10", 10), ("cold_100", 100), ("warm_up", 5), ("warm_10", 10), ("warm_100", 100),
        ("run_01", 5), ("run_02", 5)]
    only_small = SizeScale("t", keys=(100,), batches=(10, 100), runs=1, run_batch=5, cold_batches=(10,))
    assert [name for name, _ in silver_size.segments(only_small, 100)][:3] == ["snapshot", "cold_10", "warm_up"]


def _rows() -> list[dict]:
    rows = []
    for keys, scale_up in ((100, 1.0), (1_000, 1.2)):
        def add(mode, step, events, seconds, **extra):
            rows.append({"silver_keys": keys, "mode": mode, "step": step, "events": events, "seconds": seconds,
                         **extra})
        # a cold row of the same batch must not be taken for the warm one
        add("cold", "incremental", 10, 50.0)
        add("warm", "incremental", 10, 2.0 * scale_up)
        add("warm", "incremental", 100, 10.0 * scale_up)
        add("warm", "small build 1", 5, 1.0 * scale_up, pending_delta_commits=1)
        add("warm", "small build 2", 5, 3.0 * scale_up, pending_delta_commits=0)
        add("warm", "gold query after build 1", 0, 3.0, pending_delta_commits=1)
        add("warm", "gold query after build 2", 0, 1.5, pending_delta_commits=2)
        add("warm", "gold query after 2 builds (median of 3)", 0, 1.2, pending_delta_commits=2)
        add("warm", "gold query after compaction (median of 3)", 0, 1.0, pending_delta_commits=0)
        add("warm", "full recompute (reference)", 1_200, 60.0 * scale_up)
    return rows


def test_each_ratio_comes_from_its_own_rows():
    found = {t.what: (t.value, t.met) for t in silver_size.targets(_rows(), SCALE)}
    assert found == {
        "1,000 silver keys, warm: 10 changes / full recompute": (round(2.4 / 72.0, 3), True),
        "1,000 silver keys, warm: 100 changes / full recompute": (round(12.0 / 72.0, 3), True),
        "1,000 silver keys, warm: 10 changes / 100 changes": (0.2, True),
        "warm 10 changes: 1,000 / 100 silver keys": (1.2, True),
        "1,000 silver keys, warm: mean of the 2 5-change builds / full recompute": (round(2.4 / 72.0, 3), None),
        "warm, mean of the 5-change builds: 1,000 / 100 silver keys": (1.2, None),
        "100 silver keys: gold query after 2 builds / after compaction": (1.2, True),
        "100 silver keys: slowest gold query of the 2 builds / after compaction": (3.0, None),
        "1,000 silver keys: gold query after 2 builds / after compaction": (1.2, True),
        "1,000 silver keys: slowest gold query of the 2 builds / after compaction": (3.0, None),
    }


def test_a_missing_row_is_reported_unmeasured_not_met():
    rows = [r for r in _rows() if not (r["silver_keys"] == 1_000 and r["step"].startswith("full recompute"))]
    found = {t.what: (t.value, t.met) for t in silver_size.targets(rows, SCALE)}
    assert found["1,000 silver keys, warm: 10 changes / full recompute"] == (None, None)


def test_results_files_hold_every_row_and_the_targets(tmp_path):
    rows = _rows()
    silver_size.write(rows, SCALE, "local[2]", tmp_path)
    with open(tmp_path / "silver_size.csv") as f:
        written = list(csv.DictReader(f))
    assert [(int(r["silver_keys"]), r["mode"], r["step"], float(r["seconds"])) for r in written] == [
        (r["silver_keys"], r["mode"], r["step"], r["seconds"]) for r in rows]
    text = (tmp_path / "silver_size.md").read_text()
    assert "| 1,000 silver keys, warm: 10 changes / 100 changes | 0.2 | <= 0.25 | yes |" in text
    assert text.count("\n| 1,000 | warm |") == 9
    assert (tmp_path / "silver_size.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the CSV read back gives the rows the plot was drawn from ("" where a row had no pending count)
    assert silver_size.read_csv(tmp_path / "silver_size.csv") == [
        {"pending_delta_commits": "", **r} for r in rows]


def test_the_plot_draws_each_size_from_its_own_rows():
    by_batch, loop = silver_size.plot_series(_rows())
    assert [(s.label, s.points) for s in by_batch] == [
        ("100 keys, cold build", [(10, 50.0)]),
        ("100 keys, warm build", [(10, 2.0), (100, 10.0)]),
        ("100 keys, full recompute (warm)", [(10, 60.0), (100, 60.0)]),
        ("1,000 keys, cold build", [(10, 50.0)]),
        ("1,000 keys, warm build", [(10, 2.4), (100, 12.0)]),
        ("1,000 keys, full recompute (warm)", [(10, 72.0), (100, 72.0)]),
    ]
    assert [(s.label, s.points, s.marked) for s in loop] == [
        ("100 keys, build", [(1, 1.0), (2, 3.0)], (2,)),  # build 2 left no delta commit: it compacted
        ("100 keys, gold query after it", [(1, 3.0), (2, 1.5)], ()),
        ("1,000 keys, build", [(1, 1.2), (2, pytest.approx(3.6))], (2,)),
        ("1,000 keys, gold query after it", [(1, 3.0), (2, 1.5)], ()),
    ]


def test_sample_build_reads_the_runners_own_pass_line_and_judges_both_targets(tmp_path):
    """benchmarks/sample_build.py takes each pass's times from the runner's log line
    (so a change of that line breaks it here, not in a bench run) and writes the two
    targets of the sample project's build."""
    import logging

    from benchmarks import sample_build
    from runner import cli as runner_cli

    times = sample_build.PassTimes()
    logger = logging.getLogger("runner")
    logger.addHandler(times)
    logger.setLevel(logging.INFO)
    try:
        runner_cli.log.info(sample_build.PASS_LINE, 1.25, 14.5, "ok")
    finally:
        logger.removeHandler(times)
    assert times.passes == [(1.25, 14.5, "ok")]
    assert sample_build.PASS_LINE in open(runner_cli.__file__).read()

    rows = [{"step": "dbt build, a few changes in every table (pass 3)", "seconds": 21.0},
            {"step": "pass with no new data (dbt build skipped)", "seconds": 0.6}]
    sample_build.write(rows, tmp_path)
    text = (tmp_path / "sample_build.md").read_text()
    assert "| dbt build, a few changes in every table (pass 3) | 21.0 | <= 20 s | NO |" in text
    assert "| pass with no new data (dbt build skipped) | 0.6 | <= 1 s | yes |" in text
