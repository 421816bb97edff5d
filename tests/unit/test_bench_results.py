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


def _stub_steps(monkeypatch, bench: cases.Bench, note, seconds=lambda name: 10.0) -> list:
    """Replace `bench`'s steps (its processes) by a stub that appends `note(name, argv,
    lakehouse)` to the list returned and reports `seconds(name)`."""
    from benchmarks.measure import Measured

    ran: list = []

    def step(name, argv, lakehouse, *args, **kwargs):
        ran.append(note(name, argv, lakehouse))
        return Measured(name, seconds(name), 1.0, 1.0, bench.work / f"{name}.log")

    monkeypatch.setattr(bench, "step", step)
    return ran


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
    # without the JSON row the ratio shows as not measured, not taken from another row
    alone = _by_what(results.targets([rows[0], rows[2]], "local[2]"))[what]
    assert (alone.measured, alone.met) == (None, None)
    # nor is it reported from results without the comparison's rows
    assert what not in _by_what(results.targets(rows[:1], "local[2]"))


def test_format_comparison_lands_the_same_events_from_json_then_avro(tmp_path, monkeypatch):
    """The sink formats' case with its steps stubbed: the stream written once as JSON
    (schemas off) and as Avro files of the same records, then each landed in turn."""
    from dataclasses import replace

    bench = cases.Bench(replace(cases.SCALES["smoke"], format_events=300, records_per_file=100, rounds=2), tmp_path)
    ran = _stub_steps(monkeypatch, bench, lambda name, argv, lakehouse: (name, argv[argv.index("--input") + 1]),
                      lambda name: 10.0 if "avro" in name else 20.0)
    bench.format_comparison()
    json_topics, avro_topics, events = bench.format_streams()
    assert ran == [(f"ingest_formats_{side}_round{i}", str(topics)) for i in (1, 2)
                   for side, topics in (("json", json_topics), ("avro", avro_topics))]
    json_files = sorted(p.relative_to(json_topics).with_suffix("") for p in json_topics.rglob("*.json"))
    avro_files = sorted(p.relative_to(avro_topics).with_suffix("") for p in avro_topics.rglob("*.avro"))
    assert json_files == avro_files and len(json_files) >= 3  # 300 records, 100 a file, 2 partitions
    assert events == 300  # flattened: one record per event, no tombstones
    assert {(r.variant, r.events, r.seconds) for r in bench.results} == {
        (cases.FROM_JSON.format("local[2]"), 300, 20.0), (cases.FROM_AVRO.format("local[2]"), 300, 10.0)}
    what = "ingestion events/s, ours on the same events: from Avro / from JSON sink files"
    assert _by_what(results.targets(bench.results, "local[2]"))[what].measured == 2.0
    # the smoke leaves the case out
    smoke = cases.Bench(cases.SCALES["smoke"], tmp_path / "smoke")
    smoke.format_comparison()
    assert smoke.results == [] and not (tmp_path / "smoke" / "formats").exists()


def test_ingestion_round_lands_into_an_existing_lakehouse_unless_the_scale_leaves_it_out(tmp_path, monkeypatch):
    """The ingestion comparison's round with its steps stubbed: the landing into a
    lakehouse whose metastore a run over no files created first, then the main landing;
    the smoke scale leaves the first out."""
    from dataclasses import replace

    def stubbed(scale, work):
        bench = cases.Bench(scale, work)
        return bench, _stub_steps(monkeypatch, bench, lambda name, argv, lakehouse: (name, lakehouse.name))

    bench, ran = stubbed(replace(cases.SCALES["smoke"], existing_lakehouse=True), tmp_path / "on")
    measured = bench.ingestion_round("", last=True)
    assert ran == [("hudi_writer_hist1", "hudi_writer"), ("create_lakehouse", "existing"),
                   ("ingest_hist1_existing", "existing"), ("ingest_hist1", "main")]
    assert cases.INGEST_EXISTING.format("local[2]") in measured
    smoke, ran = stubbed(cases.SCALES["smoke"], tmp_path / "smoke")
    measured = smoke.ingestion_round("", last=True)
    assert ran == [("hudi_writer_hist1", "hudi_writer"), ("ingest_hist1", "main")]
    assert set(measured) == {"Hudi Spark writer (HoodieStreamer's path)", "ours local[2]"}


def test_kafka_ingestion_lands_from_the_bench_broker_unless_the_scale_leaves_it_out(tmp_path, monkeypatch):
    """The landing from Kafka with its broker, producer and steps stubbed: the first
    segment produced to the broker, then `python -m ingestion` reads it from there; the
    smoke scale starts no broker, and its report says the ratio was not measured."""
    from contextlib import contextmanager
    from dataclasses import replace

    brokers, produced = [], []

    @contextmanager
    def broker(folder):
        brokers.append(folder.name)
        yield "127.0.0.1:19092"

    monkeypatch.setattr(cases, "kafka_broker", broker)
    monkeypatch.setattr(cases, "produce_segments", lambda *args: produced.append((args[-2], args[-1])))

    def stubbed(scale, work):
        bench = cases.Bench(scale, work)
        bench.manifest = {"counts": {"hist1": {"c": 5, "u": 2, "d": 1}}}  # as the generator's manifest counts
        return bench, _stub_steps(monkeypatch, bench, lambda name, argv, lakehouse: (
            name, argv[argv.index("--kafka-bootstrap-servers") + 1], lakehouse.name))

    bench, ran = stubbed(replace(cases.SCALES["smoke"], kafka=True), tmp_path / "on")
    bench.kafka_ingestion()
    assert brokers == ["kafka"] and produced == [("127.0.0.1:19092", ["hist1"])]
    assert ran == [("ingest_hist1_kafka", "127.0.0.1:19092", "kafka")]
    assert [(r.variant, r.events) for r in bench.results] == [("ours from Kafka local[2]", 8)]
    smoke, ran = stubbed(cases.SCALES["smoke"], tmp_path / "smoke")
    smoke.kafka_ingestion()
    assert smoke.results == [] and brokers == ["kafka"] and ran == []
    what = "ingestion events/s, ours: from Kafka / from sink files"
    assert _by_what(results.targets(smoke.results, "local[2]"))[what].measured is None
