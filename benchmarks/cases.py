"""The benchmark's cases, run in one pass over one generated stream (see benchmarks/README.md).

Each step is a separate process (python -m ingestion, dbt, ...), timed from start to exit
with its peak memory; what a step needs from earlier ones is on disk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator
from unittest import mock

from benchmarks import avro_sink
from benchmarks.generator import TOPIC, Layout, StreamConfig, write_segments
from benchmarks.generator.encode import FLATTENED
from benchmarks.generator.kafka import KafkaProduceError, produce_segments
from benchmarks.measure import Measured, StepFailed, run_step
from stack.settings import ports_above_defaults

PROJECT_DIR = Path(__file__).resolve().parent.parent
BENCH_DBT = PROJECT_DIR / "benchmarks" / "dbt"
SOURCES_YML = BENCH_DBT / "models" / "silver" / "_silver__sources.yml"
PYTHON = sys.executable
DBT = str(Path(sys.executable).with_name("dbt"))
# The bench's own Kafka: 20 above the `make cdc-up` ports (the freshness case's stack
# takes them later, once this one is stopped; the tests use +10 and +30).
KAFKA_PORTS = ports_above_defaults(20)


# The merge on the bench's master of the batch the local[1] merge takes (`{}`: the master).
SAME_BATCH = "ours incremental {}, local[1]'s batch"
# local[1] runs twice: as is, and confined to one CPU. As is, its JVM's compiler and
# garbage collector threads and Hudi's own threads run on the other core
# (benchmarks/cpu_share.sh: 1.5-1.8 of 2 cores busy), so it is not one core's throughput.
ONE_CPU = " on one CPU (taskset)"
INGEST_LOCAL1 = "ours local[1]"
INGEST_LOCAL1_ONE_CPU = INGEST_LOCAL1 + ONE_CPU
MERGE_LOCAL1 = "ours incremental local[1]"
MERGE_LOCAL1_ONE_CPU = MERGE_LOCAL1 + ONE_CPU
# Ours into empty tables of a lakehouse whose metastore exists (`{}`: the master). The
# other rounds land into an empty lakehouse, where ours also creates the metastore's Derby
# database, which takes longer than starting an existing one and which a lakehouse does
# once (docs/reference/benchmark-results.md); Hudi's writer writes by path and has no metastore.
INGEST_EXISTING = "ours {} into an existing lakehouse"
# The same events from JSON sink files (JsonConverter, schemas off) and from Avro sink
# files (AvroFormat, benchmarks/avro_sink.py); `{}`: the master.
FROM_JSON = "ours {} from JSON sink files"
FROM_AVRO = "ours {} from Avro sink files"


def one_cpu() -> list[str]:
    """The prefix that runs a command on one CPU: the first this process may use."""
    taskset = shutil.which("taskset")
    if taskset is None:
        raise StepFailed("the local[1] steps on one CPU need `taskset` (Debian package util-linux); "
                         "install it, or run a scale without them (Scale.one_core)")
    return [taskset, "--cpu-list", str(min(os.sched_getaffinity(0)))]


@dataclass(frozen=True)
class Scale:
    """Sizes of one benchmark run. `history` are the bronze sizes (events) at which a
    batch of `batch` changes is applied; `small_batch` is the small-run case."""

    name: str
    keys: int
    history: tuple[int, ...]
    batch: int
    small_batch: int
    records_per_file: int
    row_bytes: int = 200
    # also run ingestion and a merge on local[1], as is and on one CPU (`one_cpu`): parallelism
    one_core: bool = True
    # the fixed overhead's small batch, landed and merged as a batch is, only smaller
    small_run: bool = True
    # also land the first segment into a lakehouse whose metastore exists (INGEST_EXISTING):
    # the same command on other ground, two processes more
    existing_lakehouse: bool = True
    # also land the first segment from a Kafka topic of a broker of the bench's own; the
    # smoke leaves it out (a broker start and an ingestion start: tests/bench/test_generator_kafka.py
    # lands the generator's topic in the test session, tests/unit/test_bench_results.py runs
    # the case with its broker and steps stubbed)
    kafka: bool = True
    # The ingestion and merge comparisons run this many times, alternated, and record
    # each side's median: one landing of the same events varies from one bench run to the
    # next as much as the gap between the sides (docs/reference/benchmark-results.md).
    rounds: int = 3
    # The Avro/JSON comparison's events (a flattened stream of its own: Avro files hold no
    # tombstones); 0 leaves the case out (the smoke: a process per side would be two
    # ingestion starts; tests/unit/test_bench_results.py runs the case with its steps stubbed).
    format_events: int = 300_000


SCALES = {
    # make test: each kind of step once, on a toy stream. Not the steps that run the same
    # commands again on other input or another master: the local[1] steps (their ratios and
    # the one-CPU prefix: tests/unit/test_bench_results.py), the small batch, a large
    # share of the smoke's time (docs/operations/tests.md), the landing into an existing
    # lakehouse, and the landing from Kafka.
    "smoke": Scale("smoke", keys=2_000, history=(6_000,), batch=1_000, small_batch=100, records_per_file=3_000,
                   rounds=1, one_core=False, small_run=False, format_events=0, existing_lakehouse=False,
                   kafka=False),
    "small": Scale("small", keys=100_000, history=(300_000, 1_000_000), batch=30_000, small_batch=1_000,
                   records_per_file=100_000),
    # make bench: the sizes
    "full": Scale("full", keys=1_000_000, history=(1_000_000, 3_000_000, 10_000_000), batch=100_000,
                  small_batch=1_000, records_per_file=100_000),
}


def median(measured: list[Measured]) -> Measured:
    """The run of median time (the upper one of an even count), with the largest peak
    memory of all of them."""
    middle = sorted(measured, key=lambda m: m.seconds)[len(measured) // 2]
    return replace(middle, peak_jvm_mib=max(m.peak_jvm_mib for m in measured))


@dataclass(frozen=True)
class Result:
    case: str  # ingestion | refresh | overhead
    variant: str  # what ran, e.g. ours local[2], full recompute
    history_rows: int  # bronze events before the step
    events: int  # events the step processed (0: none new)
    seconds: float
    peak_jvm_mib: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.events else 0.0


@dataclass
class Plan:
    """The stream cut into segments, in order: hist1, par1, batch1, hist2, batch2, ...,
    small, warm_up, warm_batch."""

    scale: Scale
    segments: list[tuple[str, int]] = field(default_factory=list)

    @classmethod
    def of(cls, scale: Scale) -> "Plan":
        plan = cls(scale)
        bronze = 0
        for i, target in enumerate(scale.history, start=1):
            extra = [("par1", scale.batch)] if i == 1 and scale.one_core else []  # the local[1] merge batch
            history = target - bronze - sum(n for _, n in extra)
            if history < scale.batch:
                raise ValueError(f"scale {scale.name}: history point {target} leaves only {history} new events before it")
            plan.segments += [(f"hist{i}", history), *extra, (f"batch{i}", scale.batch)]
            bronze = target + scale.batch
        if scale.small_run:
            plan.segments.append(("small", scale.small_batch))
        # the scheduled loop's two passes (benchmarks/warm_loop.py): a first one, then a batch
        plan.segments += [("warm_up", scale.small_batch), ("warm_batch", scale.batch)]
        return plan

    @property
    def events(self) -> int:
        return sum(n for _, n in self.segments)


class Bench:
    """Runs the steps; `results` collects what they measured."""

    def __init__(self, scale: Scale, work: Path, master: str = "local[2]") -> None:
        self.scale, self.work, self.master = scale, work, master
        self.plan = Plan.of(scale)
        self.streams = work / "streams"
        self.logs = work / "logs"
        self.results: list[Result] = []
        self.manifest: dict = {}
        self.bronze_events = 0  # events landed in the main lakehouse so far
        self.notes: list[str] = []  # said under the results table
        self.on_step: Callable[[str, Measured], None] = lambda step, m: print(
            f"{step:<32} {m.seconds:8.1f}s  peak JVM {m.peak_jvm_mib:7.0f} MiB", flush=True)

    # --- plumbing -----------------------------------------------------------------
    def lakehouse(self, name: str = "main") -> Path:
        return self.work / "lakehouse" / name

    def env(self, lakehouse: Path, master: str | None = None, dbt_state: str = "run") -> dict[str, str]:
        return {
            "CDC_LAKEHOUSE_DIR": str(lakehouse),
            "CDC_SPARK_MASTER": master or self.master,
            # dbt re-parses the whole project when the vars differ from its last parse in
            # the target path: the checks (--vars) keep theirs apart, so a measured run
            # parses as a scheduled run repeating itself does.
            "DBT_TARGET_PATH": str(self.work / "dbt-target" / dbt_state),
            "DBT_LOG_PATH": str(self.work / "dbt-logs"),
        }

    def step(self, name: str, argv: list[str], lakehouse: Path, master: str | None = None,
             dbt_state: str = "run", pinned: bool = False) -> Measured:
        """Run one step; `pinned`: on one CPU (`one_cpu`)."""
        argv = [*one_cpu(), *argv] if pinned else argv
        measured = run_step(name, argv, self.logs, self.env(lakehouse, master, dbt_state), cwd=PROJECT_DIR)
        self.on_step(name, measured)
        return measured

    def local1_runs(self, variant: str) -> list[tuple[str, str, bool]]:
        """The local[1] runs of `variant` (INGEST_LOCAL1, MERGE_LOCAL1) as (variant, step
        name suffix, pinned), in this order: as is, then on one CPU."""
        return [(variant, "_local1", False), (variant + ONE_CPU, "_local1_cpu", True)]

    def events_in(self, segment: str) -> int:
        counts = self.manifest["counts"][segment]
        return sum(counts.get(op, 0) for op in "rcud")

    def empty_topics(self) -> Path:
        """A sink's `topics/` folder with no files in it."""
        path = self.work / "empty" / "topics"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def topics(self, segment: str) -> str:
        return str(self.streams / segment / "topics")

    def ingest(self, segment: str, lakehouse: Path, master: str | None = None, tag: str = "",
               pinned: bool = False) -> Measured:
        return self.step(f"ingest_{segment}{tag}", [
            PYTHON, "-m", "ingestion", "--input", self.topics(segment), "--sources-yml", str(SOURCES_YML),
        ], lakehouse, master, pinned=pinned)

    def dbt(self, name: str, args: list[str], master: str | None = None, dbt_state: str = "run",
            pinned: bool = False) -> Measured:
        return self.step(name, [DBT, *args, "--project-dir", str(BENCH_DBT)], self.lakehouse(), master, dbt_state,
                         pinned)

    # --- the run --------------------------------------------------------------------
    def stream(self) -> tuple[StreamConfig, Layout]:
        """The generated stream's settings: the sink files and the Kafka topic hold the same."""
        config = StreamConfig(events=self.plan.events, keys=self.scale.keys, row_bytes=self.scale.row_bytes)
        return config, Layout(records_per_file=self.scale.records_per_file)

    def generate(self) -> None:
        self.manifest = write_segments(*self.stream(), self.plan.segments, self.streams)

    def run(self) -> list[Result]:
        for name in ("lakehouse", "logs", "dbt-target"):
            shutil.rmtree(self.work / name, ignore_errors=True)
        self.generate()
        self.ingestion_comparison()
        self.format_comparison()
        self.kafka_ingestion()
        self.refresh_as_history_grows()
        self.warm_loop()
        return self.results

    def record(self, case: str, variant: str, history: int, events: int, m: Measured) -> None:
        self.results.append(Result(case, variant, history, events, round(m.seconds, 2), round(m.peak_jvm_mib)))

    def ingestion_comparison(self) -> None:
        """The first history segment into empty tables: ours on 2 and 1 cores, Hudi's own
        writer, and the parse alone (the floor). Ours and the writer run `rounds`
        times, alternated, each recorded as its median; the last landing of ours on 2
        cores is the one the later cases build on."""
        events = self.events_in("hist1")
        m = self.step("parse_only_hist1", [PYTHON, "-m", "benchmarks.parse_only", "--input", self.topics("hist1")],
                      self.lakehouse("parse"))
        self.record("ingestion", "parse only (floor)", 0, events, m)
        if self.scale.one_core:
            self.notes.append(
                f"`on one CPU (taskset)`: the step run as `taskset {' '.join(one_cpu()[1:])} <command>`; every other step "
                f"may use all {len(os.sched_getaffinity(0))} CPUs of the machine.")
        self.in_rounds(self.ingestion_round, events, (
            f"Ingestion of the first segment ({events:,} events into empty tables): "
            f"{self.scale.rounds} rounds alternated in this order, the median recorded above"))
        self.bronze_events = events

    def in_rounds(self, one_round: Callable[[str, bool], dict[str, Measured]], events: int, note: str,
                  case: str = "ingestion", history: int = 0) -> None:
        """Run `one_round(tag, last)` `rounds` times and record each variant's
        median; with more than one round, list every time under the results (`note` first)."""
        count = self.scale.rounds
        rounds: dict[str, list[Measured]] = {}
        for i in range(1, count + 1):
            for variant, measured in one_round(f"_round{i}" if count > 1 else "", i == count).items():
                rounds.setdefault(variant, []).append(measured)
        for variant, measured in rounds.items():
            self.record(case, variant, history, events, median(measured))
        if count > 1:
            self.notes.append(f"{note}: " + "; ".join(
                f"{variant} {', '.join(f'{m.seconds:.1f}' for m in measured)} s" for variant, measured in rounds.items()
            ) + ".")

    def ingestion_round(self, tag: str, last: bool) -> dict[str, Measured]:
        """One round of the comparison, in this order: Hudi's writer, ours on `local[1]`
        (with `one_core`) as is and on one CPU, ours on the bench's master into an
        existing lakehouse (INGEST_EXISTING, with `existing_lakehouse`), then into an
        empty one; each into empty tables, removed after it, except ours in the `last`
        round, which lands in the main lakehouse."""
        measured: dict[str, Measured] = {}
        writer = self.lakehouse("hudi_writer")
        measured["Hudi Spark writer (HoodieStreamer's path)"] = self.step(f"hudi_writer_hist1{tag}", [
            PYTHON, "-m", "benchmarks.hudi_writer", "--input", self.topics("hist1"), "--path", str(writer / "orders"),
        ], writer)
        shutil.rmtree(writer, ignore_errors=True)
        if self.scale.one_core:
            one_core = self.lakehouse("one_core")
            for variant, suffix, pinned in self.local1_runs(INGEST_LOCAL1):
                measured[variant] = self.ingest("hist1", one_core, "local[1]", f"{suffix}{tag}", pinned)
                shutil.rmtree(one_core, ignore_errors=True)
        if self.scale.existing_lakehouse:
            existing = self.lakehouse("existing")
            # unmeasured: a run over no files creates the metastore and the bronze schema
            self.step(f"create_lakehouse{tag}", [PYTHON, "-m", "ingestion", "--input", str(self.empty_topics())],
                      existing)
            measured[INGEST_EXISTING.format(self.master)] = self.ingest("hist1", existing, tag=f"_existing{tag}")
            shutil.rmtree(existing, ignore_errors=True)
        target = self.lakehouse() if last else self.lakehouse("scratch")
        measured[f"ours {self.master}"] = self.ingest("hist1", target, tag=tag)
        if not last:
            shutil.rmtree(target, ignore_errors=True)
        return measured

    def format_streams(self) -> tuple[Path, Path, int]:
        """The comparison's stream (flattened: Avro files hold no tombstones) as JSON sink
        files, schemas off, and as Avro files of the same records, converted from the
        same stream with its schemas (written once: the generator and the Avro folder's
        marker reuse a folder that holds them); (JSON topics, Avro topics, events)."""
        folder = self.work / "formats"
        events = self.scale.format_events
        config = StreamConfig(events=events, keys=min(self.scale.keys, events), row_bytes=self.scale.row_bytes)
        layout = Layout(shape=FLATTENED, records_per_file=self.scale.records_per_file)
        manifest = write_segments(config, layout, [("formats", events)], folder / "json")
        wrapped = folder / "wrapped"
        write_segments(config, replace(layout, wrapped=True), [("formats", events)], wrapped)
        avro_topics = folder / "avro" / "topics"
        marker = folder / "avro" / ".converted"
        if not marker.exists() or marker.read_text() != json.dumps(manifest, sort_keys=True):
            shutil.rmtree(avro_topics, ignore_errors=True)
            avro_sink.convert(wrapped / "formats" / "topics", avro_topics, "null")
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps(manifest, sort_keys=True))
        counts = manifest["counts"]["formats"]
        return folder / "json" / "formats" / "topics", avro_topics, counts["c"] + counts["u"] + counts["d"]

    def format_comparison(self) -> None:
        """Ours on the same events from JSON and from Avro sink files, into empty tables,
        `rounds` times alternated, the medians recorded (results.md: their ratio); left
        out when the scale's `format_events` is 0."""
        if not self.scale.format_events:
            return
        json_topics, avro_topics, events = self.format_streams()
        target = self.lakehouse("formats")

        def one_round(tag: str, last: bool) -> dict[str, Measured]:
            measured: dict[str, Measured] = {}
            for variant, name, topics in ((FROM_JSON, "json", json_topics), (FROM_AVRO, "avro", avro_topics)):
                measured[variant.format(self.master)] = self.step(f"ingest_formats_{name}{tag}", [
                    PYTHON, "-m", "ingestion", "--input", str(topics), "--sources-yml", str(SOURCES_YML),
                ], target)
                shutil.rmtree(target, ignore_errors=True)
            return measured

        self.in_rounds(one_round, events, (
            f"The same {events:,} events (flattened) from JSON sink files (schemas off) and from Avro sink files: "
            f"{self.scale.rounds} rounds alternated in this order, the median recorded above"))

    def kafka_ingestion(self) -> None:
        """The first history segment again, from a Kafka topic instead of sink files: the
        generator produces it (same records, partitions and offsets) to a broker of the
        bench's own, then ours lands it into empty tables, `rounds` times, the
        median recorded. After the file rounds, not between them: the broker stays out of
        the file comparison. Left out unless the scale's `kafka`."""
        if not self.scale.kafka:
            return
        events = self.events_in("hist1")
        with kafka_broker(self.work / "kafka") as bootstrap:
            try:
                produce_segments(*self.stream(), self.plan.segments, bootstrap, ["hist1"])
            except KafkaProduceError as exc:
                raise StepFailed(f"kafka: the generator could not fill the bench's topic: {exc}") from exc

            def one_round(tag: str, last: bool) -> dict[str, Measured]:
                target = self.lakehouse("kafka")
                measured = self.step(f"ingest_hist1_kafka{tag}", [
                    PYTHON, "-m", "ingestion", "--kafka-bootstrap-servers", bootstrap,
                    "--topic-pattern", re.escape(TOPIC), "--sources-yml", str(SOURCES_YML),
                ], target)
                shutil.rmtree(target, ignore_errors=True)
                return {f"ours from Kafka {self.master}": measured}

            self.in_rounds(one_round, events, (
                f"From Kafka, the same {events:,} events (`python -m ingestion --kafka-bootstrap-servers`), "
                f"{self.scale.rounds} rounds after the file rounds, the median recorded above"))

    def land(self, segment: str) -> None:
        m = self.ingest(segment, self.lakehouse())
        self.record("ingestion", f"ours {self.master}", self.bronze_events, self.events_in(segment), m)
        self.bronze_events += self.events_in(segment)

    def refresh_as_history_grows(self) -> None:
        m = self.dbt("silver_first_build", ["run", "--select", "orders"])
        self.record("refresh", "ours first build", self.bronze_events, self.bronze_events, m)
        if self.scale.one_core:
            self.merge_comparison()
        for i in range(1, len(self.scale.history) + 1):
            if i > 1:
                self.land(f"hist{i}")
                m = self.dbt(f"silver_catch_up_{i}", ["run", "--select", "orders"])
            history = self.bronze_events
            self.land(f"batch{i}")
            batch = self.events_in(f"batch{i}")
            m = self.dbt(f"merge_batch{i}", ["run", "--select", "orders"])
            self.record("refresh", f"ours incremental {self.master}", history, batch, m)
            m = self.dbt(f"full_recompute_{i}", ["run", "--select", "orders_full_recompute"])
            self.record("refresh", "full recompute (reference)", history, self.bronze_events, m)
            self.check(f"check_{i}", f"batch{i}")
        history = self.bronze_events
        m = self.dbt("no_new_data", ["run", "--select", "orders"])
        self.record("overhead", "run with no new data", history, 0, m)
        if self.scale.small_run:
            self.land("small")
            m = self.dbt("merge_small", ["run", "--select", "orders"])
            self.record("overhead", f"run with {self.events_in('small')} changes", history, self.events_in("small"), m)

    def merge_comparison(self) -> None:
        """`local[1]` (as is, and on one CPU) against the bench's master for the merge:
        the same batch (`par1`) into the same silver (the first build's), the lakehouse
        restored from a copy before each run, `rounds` times alternated, medians
        recorded. The last run, on the master, leaves the lakehouse the later cases
        build on."""
        self.land("par1")
        main, saved = self.lakehouse(), self.lakehouse("before_par1_merge")
        shutil.rmtree(saved, ignore_errors=True)
        main.rename(saved)  # copied back before each run: table locations in the metastore name `main`
        history, events = self.bronze_events - self.events_in("par1"), self.events_in("par1")

        def one_round(tag: str, last: bool) -> dict[str, Measured]:
            measured: dict[str, Measured] = {}
            local1 = [(variant, f"merge_par1{suffix}{tag}", "local[1]", pinned)
                      for variant, suffix, pinned in self.local1_runs(MERGE_LOCAL1)]
            on_master = (SAME_BATCH.format(self.master), f"merge_par1{tag}", None, False)
            for variant, name, master, pinned in (*local1, on_master):
                shutil.rmtree(main, ignore_errors=True)
                shutil.copytree(saved, main)
                measured[variant] = self.dbt(name, ["run", "--select", "orders"], master=master, pinned=pinned)
            return measured

        self.in_rounds(one_round, events, (
            f"The merge of the same {events:,} changes into the first build's silver, restored before each run: "
            f"{self.scale.rounds} rounds alternated in this order, the median recorded above"),
            case="refresh", history=history)
        shutil.rmtree(saved)

    def warm_loop(self) -> None:
        """The runner loop's case: one process, a first pass, then the measured runs
        (benchmarks/warm_loop.py); then the same equality check as the other batches."""
        history = self.bronze_events + self.events_in("warm_up")
        out = self.work / "warm_loop.json"
        m = self.step("warm_loop", [
            PYTHON, "-m", "benchmarks.warm_loop", "--warm-up", self.topics("warm_up"),
            "--measured", self.topics("warm_batch"), "--out", str(out),
        ], self.lakehouse())
        seconds = json.loads(out.read_text())
        self.bronze_events = history + self.events_in("warm_batch")
        batch = self.events_in("warm_batch")
        for case, variant, events, key in (
                ("refresh", f"warm process: ours incremental {self.master}", batch, "incremental"),
                ("refresh", "warm process: full recompute", self.bronze_events, "full_recompute"),
                ("overhead", "warm process: run with no new data", 0, "no_new_data")):
            self.results.append(Result(case, variant, history, events, round(seconds[key], 2), round(m.peak_jvm_mib)))
        self.check("check_warm", "warm_batch")

    def check(self, name: str, segment: str) -> None:
        """Silver equals the full recompute, and has as many rows as the generator counted live keys."""
        live = self.manifest["counts"][segment]["live_keys_after"]
        self.dbt(name, ["test", "--vars", f"{{bench_live_keys: {live}}}"], dbt_state="check")


@contextmanager
def kafka_broker(folder: Path, ports: dict[str, str] = KAFKA_PORTS) -> Iterator[str]:
    """A Kafka broker started by the stack's own code (Kafka only) in `folder`, on
    `ports` (the stack reads both from the environment, restored after); yields its
    bootstrap address, stops and removes it after."""
    import stack

    with mock.patch.dict(os.environ, {"CDC_STACK_DIR": str(folder), **ports}):
        try:
            info = stack.up(["kafka"])
        except Exception as exc:  # noqa: BLE001 - the bench stops with the reason
            stack.down(purge=False)
            raise StepFailed(f"kafka: the bench's Kafka broker did not start: {exc}") from exc
        try:
            yield info.kafka_bootstrap
        finally:
            stack.down(purge=True)
