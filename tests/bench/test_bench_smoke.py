"""Smoke run of the benchmark (`python -m benchmarks --scale smoke`): each kind of step
once at toy scale (one history point, one round of each comparison, not the steps that
repeat a command on other input: the local[1] ones, the small batch, the landing into an
existing lakehouse and from Kafka, the sink formats' comparison), so `make bench` keeps
working. It measures nothing worth reading; what it checks is
that each case ran, the incremental silver table equalled the full recompute and the
generator's live-key count (the run's `dbt test` step), and that results and plots were
written."""

from __future__ import annotations

import csv
import subprocess
import sys
from dataclasses import replace

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.integration


def test_every_case_runs_and_agrees(tmp_path):
    work = tmp_path / "bench"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--scale", "smoke", "--work", str(work)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )
    assert done.returncode == 0, f"benchmark smoke run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    logs = sorted(p.name for p in (work / "logs").glob("*.log"))
    assert {"check_1.log", "check_warm.log"} <= set(logs), logs  # the equality checks ran
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
        ("refresh", "warm process: ours incremental local[2]"),
        ("refresh", "warm process: full recompute"),
        ("overhead", "warm process: run with no new data"),
    ]:
        assert expected in variants, f"{expected} missing from {sorted(variants)}"
    # not the local[1] steps (Scale.one_core; tests/unit/test_bench_results.py covers their
    # ratios), nor the small batch (Scale.small_run)
    assert not [v for v in variants if "local[1]" in v[1] or v[1].endswith(" changes")], sorted(variants)
    assert all(float(r["seconds"]) > 0 and float(r["peak_jvm_mib"]) > 0 for r in rows), rows
    report = (work / "results" / "results.md").read_text()
    assert "| met |" in report and "incremental / full recompute" in report
    # ... so that ratio is reported as not measured, not computed from other rows
    assert "| ingestion local[2] / local[1] events/s | - | >= 1.6 | - |" in report
    # nor the landing into an existing lakehouse (Scale.existing_lakehouse;
    # tests/unit/test_bench_results.py runs it stubbed)
    assert not [v for v in variants if "existing lakehouse" in v[1]], sorted(variants)
    # nor the sink formats' comparison (Scale.format_events) or the landing from Kafka
    # (Scale.kafka; tests/unit/test_bench_results.py runs both stubbed)
    assert not [v for v in variants if "sink files" in v[1] or "Kafka" in v[1]], sorted(variants)
    assert "| ingestion events/s, ours: from Kafka / from sink files | - |" in report
    for plot in ("refresh_vs_history.png", "ingestion_and_memory.png"):
        assert (work / "results" / plot).stat().st_size > 1000


def test_hudi_settings_measures_both_settings(spark, tmp_path):
    """`python -m benchmarks.hudi_settings`, one round in the test session: both settings
    measured for each statement kind, and the session's own setting given back."""
    from benchmarks import hudi_settings

    before = spark.conf.get("hoodie.metadata.enable", None)
    out = tmp_path / "hudi_settings.csv"
    assert hudi_settings.main(["--rounds", "1", "--out", str(out)]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert {(r["setting"], r["statement"]) for r in rows} == {
        (setting, kind) for setting in ("metadata table on", "metadata table off") for kind in ("ctas", "merge", "read")}
    assert all(float(r["median_s"]) > 0 for r in rows), rows
    assert spark.conf.get("hoodie.metadata.enable", None) == before


def test_silver_index_measures_every_setting(spark, tmp_path):
    """`python -m benchmarks.silver_index`, tiny and one round in the test session: every
    setting's CTAS and MERGE timed (each MERGE is checked inside: row count and updated
    rows), its file groups counted, and its scratch tables dropped."""
    from benchmarks import silver_index

    out = tmp_path / "silver_index.csv"
    assert silver_index.main(["--keys", "2000", "--changes", "200", "--rounds", "1", "--out", str(out)]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    measures = ("ctas_s", "merge_s", "size_mib", "file_groups")
    assert {(r["setting"], r["measure"]) for r in rows} == {
        (setting, measure) for setting in silver_index.SETTINGS for measure in measures}
    assert all(float(r["median"]) > 0 and r["samples"] == "1" for r in rows), rows
    # The CTAS reads one split, as dbt's does: one file group, except BUCKET's 4 buckets.
    file_groups = {r["setting"]: int(float(r["median"])) for r in rows if r["measure"] == "file_groups"}
    assert file_groups == {s: 4 if "BUCKET" in s else 1 for s in silver_index.SETTINGS}, file_groups
    assert not spark.sql(f"show tables in {silver_index.SCHEMA} like 'silver_index*'").collect()


def test_silver_read_path_times_every_read_path_and_they_agree(spark, tmp_path):
    """`python -m benchmarks.silver_read_path`, tiny and one round in the test session:
    every read path timed after the builds and after a compaction; main() fails when two
    read paths give different answers (Hudi's merge against the base files plus the
    recent table); its scratch tables dropped."""
    from benchmarks import silver_read_path

    out = tmp_path / "silver_read_path.csv"
    assert silver_read_path.main(["--keys", "2000", "--builds", "2", "--changes", "50", "--rounds", "1",
                                  "--out", str(out)]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert {(r["read_path"], r["moment"]) for r in rows} == {
        (path, moment) for path in silver_read_path.SETTINGS for moment in ("after 2 builds", "after a compaction")}
    assert all(float(r["seconds"]) > 0 for r in rows), rows
    assert not spark.sql(f"show tables in {silver_read_path.SCHEMA}").collect()


def test_silver_size_warm_steps_run_and_agree(spark, tmp_path, run_dir):
    """The silver-size case's warm steps (benchmarks/silver_size.py `warm`) in the test
    session on a toy stream: every build and gold query measured, the forced compaction
    leaves no delta commit pending, and silver equals the full recompute and the
    generator's live keys (the case's `dbt test`)."""
    from benchmarks import silver_size
    from benchmarks.generator import Layout, StreamConfig, write_segments
    from tests.support.lakehouse import dbt_invoke, drop_schemas

    scale = replace(silver_size.SIZE_SCALES["smoke"], cold_batches=())  # no cold process here
    plan = silver_size.segments(scale, scale.keys[0])
    manifest = write_segments(StreamConfig(events=sum(n for _, n in plan), keys=scale.keys[0], snapshot=True),
                              Layout(records_per_file=scale.records_per_file), plan, tmp_path / "streams")
    # the bench project keeps its parse apart from the main project's
    target = ("--target-path", str(run_dir / "dbt-target-bench"))
    drop_schemas(spark, ["bronze", "silver", "reference"])
    try:
        seconds = silver_size.warm(spark, tmp_path / "streams", list(scale.batches), scale.runs, first=True,
                                   dbt_args=target)
        assert [f"incremental_{b}" for b in scale.batches] == [k for k in seconds if k.startswith("incremental_")]
        assert len(seconds["runs"]) == scale.runs
        # the state table compacts itself every 5 delta commits, and the forced compaction leaves none
        assert all(0 <= r["pending_delta_commits"] < 5 for r in seconds["runs"]), seconds["runs"]
        assert seconds["pending_delta_commits_after_compaction"] == 0, seconds
        assert all(seconds[k] > 0 for k in ("no_new_data", "gold_after_runs", "gold_after_compaction",
                                            "full_recompute")), seconds
        live = list(manifest["counts"].values())[-1]["live_keys_after"]
        checked = dbt_invoke("test", "--vars", f"{{bench_live_keys: {live}}}", *target,
                             project=silver_size.BENCH_DBT)
        assert checked.success and len(checked.result) == 2, checked.result
    finally:
        drop_schemas(spark, ["bronze", "silver", "reference"])


def test_many_tables_warm_passes_build_what_changed_and_agree(spark, tmp_path):
    """The many-tables case's warm passes (benchmarks/many_tables.py) in the test session
    on 3 tables: the first pass builds every model, the measured one the 2 changed
    tables' models only, and silver equals the generated events' state row by row (the
    case's check, which raises on a difference)."""
    from benchmarks import many_tables
    from tests.support.lakehouse import drop_schemas

    tables = 3
    many_tables.write_project(tmp_path / "project", tables)
    landing = many_tables.new_landing(tmp_path, tables, passes=2)
    for index in range(tables):
        landing.land(index, many_tables.KEYS)
    drop_schemas(spark, ["bronze", "silver"])
    try:
        first, measured = many_tables.warm_passes(tmp_path, landing, rounds=1)
        assert many_tables.models_built(first) == tables and first["selection"]["first_build"], first["dbt"]
        assert measured["selection"]["changed_bronze_tables"] == ["many_public_t000", "many_public_t001"]
        assert many_tables.models_built(measured) == many_tables.CHANGED, measured["dbt"]
        assert many_tables.pass_seconds(measured) > 0
        row = many_tables.row_of(tables, "warm", 1, measured)
        # the ingestion's steps, each timed, fit inside the ingestion the runner timed
        steps = measured["ingestion"]["seconds"]
        assert {"listing", "ledger_read", "reading", "bronze_writes", "ledger_write"} <= set(steps), steps
        assert 0 < sum(steps.values()) <= measured["seconds"]["ingestion"], (steps, measured["seconds"])
        assert row["ingestion_steps"].count("=") == len(steps) and row["dbt_build_seconds"] > 0, row
        many_tables.check(spark, landing, tables)
        assert landing.expected(0) != landing.expected(2)  # the check compares tables that differ
    finally:
        drop_schemas(spark, ["bronze", "silver"])
