"""The benchmark's parallelism rows: a `local[1]` step confined to one CPU really runs on
one, and each ratio in results.md is taken from its own rows."""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks import cases, results
from benchmarks.cases import Result


def test_one_cpu_prefix_confines_the_command_to_a_single_cpu():
    before = os.sched_getaffinity(0)
    shown = subprocess.run([*cases.one_cpu(), sys.executable, "-c", "import os; print(os.sched_getaffinity(0))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert shown == str({min(before)})  # the command runs on the first CPU this process may use
    assert os.sched_getaffinity(0) == before  # and this process keeps its own


def _by_what(found: list[results.Target]) -> dict[str, results.Target]:
    return {t.what: t for t in found}


def test_local1_ratios_use_their_own_rows_as_is_and_on_one_cpu():
    events = 100_000
    rows = [
        Result("ingestion", "ours local[2]", 0, 900_000, 30.0, 1),
        Result("ingestion", cases.INGEST_LOCAL1, 0, 900_000, 36.0, 1),
        Result("ingestion", cases.INGEST_LOCAL1_ONE_CPU, 0, 900_000, 54.0, 1),
        # the local[1] merge rows share a prefix: each ratio must take its own row
        Result("refresh", cases.MERGE_LOCAL1_ONE_CPU, 900_000, events, 52.0, 1),
        Result("refresh", cases.MERGE_LOCAL1, 900_000, events, 32.0, 1),
        Result("refresh", cases.SAME_BATCH.format("local[2]"), 900_000, events, 33.0, 1),
    ]
    found = _by_what(results.targets(rows, "local[2]"))
    # events/s ratios of equal event counts are the inverse ratios of the seconds
    expected = {
        "ingestion local[2] / local[1] events/s": (36.0 / 30.0, False),
        "ingestion local[2] / local[1] on one CPU (taskset) events/s": (54.0 / 30.0, True),
        "merge local[2] / local[1] events/s (same batch, same silver)": (32.0 / 33.0, False),
        "merge local[2] / local[1] on one CPU (taskset) events/s (same batch, same silver)": (52.0 / 33.0, False),
    }
    for what, (value, met) in expected.items():
        assert what in found, sorted(found)
        assert (found[what].measured, found[what].met) == (round(value, 3), met), found[what]


def test_without_the_one_cpu_rows_their_ratios_are_left_out():
    rows = [
        Result("ingestion", "ours local[2]", 0, 900_000, 30.0, 1),
        Result("ingestion", cases.INGEST_LOCAL1, 0, 900_000, 36.0, 1),
        Result("refresh", cases.MERGE_LOCAL1, 900_000, 100_000, 32.0, 1),
        Result("refresh", cases.SAME_BATCH.format("local[2]"), 900_000, 100_000, 33.0, 1),
    ]
    found = _by_what(results.targets(rows, "local[2]"))
    assert not [what for what in found if "one CPU" in what], sorted(found)
    assert found["merge local[2] / local[1] events/s (same batch, same silver)"].measured == round(32.0 / 33.0, 3)


def test_ingestion_ratios_into_an_empty_and_an_existing_lakehouse_use_their_own_rows():
    rows = [
        Result("ingestion", "Hudi Spark writer (HoodieStreamer's path)", 0, 900_000, 30.0, 1),
        Result("ingestion", "ours local[2]", 0, 900_000, 40.0, 1),
        Result("ingestion", cases.INGEST_EXISTING.format("local[2]"), 0, 900_000, 25.0, 1),
    ]
    found = _by_what(results.targets(rows, "local[2]"))
    empty = found["ingestion events/s: ours / Hudi's writer"]
    existing = found["ingestion events/s: ours into an existing lakehouse (its metastore created before) / Hudi's writer"]
    assert (empty.measured, empty.met) == (round(30.0 / 40.0, 3), False)
    assert (existing.measured, existing.met) == (round(30.0 / 25.0, 3), True)
    # without the row (an older results.csv), its ratio is left out, not taken from another row
    assert not [what for what in _by_what(results.targets(rows[:2], "local[2]")) if "existing" in what]


def test_avro_to_json_ratio_is_taken_from_the_same_events_rows():
    rows = [
        Result("ingestion", "ours local[2]", 0, 900_000, 30.0, 1),
        Result("ingestion", cases.FROM_JSON.format("local[2]"), 0, 300_000, 50.0, 1),
        Result("ingestion", cases.FROM_AVRO.format("local[2]"), 0, 300_000, 40.0, 1),
    ]
    what = "ingestion events/s, ours on the same events: from Avro / from JSON sink files"
    found = _by_what(results.targets(rows, "local[2]"))[what]
    assert (found.measured, found.wanted, found.met) == (round(50.0 / 40.0, 3), ">= 1.0", True)
    slower = [*rows[:2], Result("ingestion", cases.FROM_AVRO.format("local[2]"), 0, 300_000, 60.0, 1)]
    assert _by_what(results.targets(slower, "local[2]"))[what].met is False
    # the smoke lands the Avro side only: the ratio shows as not measured, not from another row
    alone = _by_what(results.targets([rows[0], rows[2]], "local[2]"))[what]
    assert (alone.measured, alone.met) == (None, None)
    # nor is it reported from results without the comparison's rows
    assert what not in _by_what(results.targets(rows[:1], "local[2]"))
