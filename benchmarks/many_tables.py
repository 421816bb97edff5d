"""The many-tables case: a project of N generated tables of 1,000 keys each, and passes
in which 2 of them get 100 events each, cold and warm, with N as the axis.

    python -m benchmarks.many_tables [--tables 16 64 256] [--rounds 3] [--work DIR] [--out DIR]
    python -m benchmarks.many_tables plot CSV          # redraw many_tables.png from a results file

Per N, a lakehouse and a dbt project of their own (`<work>/<N>/`): tables `t000`...,
topics `many.public.t000`..., the bench table's shape (benchmarks/generator), one silver
model each with `not_null` and `unique` on its key. The first pass lands every table's
snapshot and builds every model (recorded, not a target). Then:
- cold: `rounds` passes of `python -m runner --once`, a process each as cron runs it,
  each after 100 new events landed in each of the 2 changed tables' sink folders;
  with N <= --baseline-max also one `--build-always` pass (every model built, what a
  pass did before the runner built only what changed);
- warm: one process running the runner's passes (`runner.cli.one_pass`) as `--every`
  does: a first pass with new events (warm-up, recorded), then `rounds` measured ones.
A pass's time is the runner's report: from the start of its ingestion to the end of
the last test (`ingestion` + `selection` + `dbt_build`); a cold pass's whole process
(JVM start included) is recorded beside it. The check, in the warm process after its
passes: both changed tables and an unchanged one equal, row by row, the state the
generator's events give. Results: many_tables.csv, many_tables.md, many_tables.png in --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from benchmarks.generator.encode import ENVELOPE, record_lines
from benchmarks.generator.stream import Event, StreamConfig, events, row_values

PROJECT_DIR = Path(__file__).resolve().parent.parent
KEYS = 1_000
CHANGED = 2  # tables changed in a pass
EVENTS = 100  # events per changed table per pass
ROW_BYTES = 50
SERVER, SCHEMA = "many", "public"
TARGETS = {  # (what, target) of the done-means, read off the CSV's medians
    "warm_ratio": 1.2,  # warm pass, 2 changed of the largest N / of the smallest N
    "warm_seconds": 5.0,  # warm pass, 2 tables x 100 events
}


def table_name(index: int) -> str:
    return f"t{index:03d}"


def topic(index: int) -> str:
    return f"{SERVER}.{SCHEMA}.{table_name(index)}"


def stream(index: int, changes: int) -> list[Event]:
    """Table `index`'s events: the snapshot of its KEYS keys, then `changes` more."""
    return list(events(StreamConfig(events=KEYS + changes, keys=KEYS, seed=1_000 + index, snapshot=True,
                                    row_bytes=ROW_BYTES)))


def lines_of(index: int, chunk: list[Event]) -> list[str]:
    """The sink file lines of `chunk` (JsonConverter, schemas off; a delete's tombstone after it)."""
    lines = []
    for event in chunk:
        for line in record_lines(event, ENVELOPE, None, ROW_BYTES):
            lines.append(line.replace('"table":"orders"', f'"table":"{table_name(index)}"'))
    return lines


@dataclass
class Landing:
    """Where each table's next events go in the sink folder, and which it has landed."""

    topics: Path
    streams: dict[int, list[Event]]
    landed: dict[int, int]  # table -> events written so far
    offsets: dict[int, int]  # table -> next Kafka offset

    def land(self, index: int, count: int) -> None:
        """The table's next `count` events as one sink file, renamed into place whole."""
        chunk = self.streams[index][self.landed[index]:self.landed[index] + count]
        assert len(chunk) == count, f"{table_name(index)}: its stream ran out"
        lines = lines_of(index, chunk)
        name = f"{topic(index)}+0+{self.offsets[index]}.json"
        folder = self.topics / topic(index) / "partition=0"
        folder.mkdir(parents=True, exist_ok=True)
        staged = self.topics.parent / (name + ".partial")
        staged.write_text("\n".join(lines) + "\n")
        os.replace(staged, folder / name)
        self.landed[index] += count
        self.offsets[index] += len(lines)

    def expected(self, index: int) -> dict[int, tuple]:
        """key -> (order_id, customer_id, status) after the events landed so far."""
        alive: dict[int, int] = {}
        for event in self.streams[index][:self.landed[index]]:
            if event.op == "d":
                alive.pop(event.key, None)
            else:
                alive[event.key] = event.version
        return {key: row_values(key, version, ROW_BYTES)[:3] for key, version in alive.items()}


def new_landing(work: Path, tables: int, passes: int) -> Landing:
    changes = {i: (EVENTS * passes if i < CHANGED else 0) for i in range(tables)}
    streams = {i: stream(i, changes[i]) for i in range(tables)}
    return Landing(work / "landing" / "topics", streams, {i: 0 for i in range(tables)}, {i: 0 for i in range(tables)})


def write_project(project: Path, tables: int) -> None:
    """A dbt project of `tables` silver models over the generated topics, on the main
    project's macros, as a user's project of many tables is."""
    models = project / "models" / "silver"
    models.mkdir(parents=True, exist_ok=True)
    macros = os.path.relpath(PROJECT_DIR / "macros", project)
    (project / "dbt_project.yml").write_text(f"""\
name: cdc_many
version: "0.1.0"
config-version: 2
profile: cdc_lakehouse
model-paths: ["models"]
macro-paths: ["{macros}"]
on-run-end:
  - "{{{{ cdc_unlock_failed_builds(results) }}}}"
vars:
  cdc_bronze_schema: bronze
  cdc_decimal_handling_mode: precise
models:
  cdc_many:
    silver:
      +schema: silver
      +materialized: cdc_incremental
      +file_format: hudi
""")
    sources, entries = [], []
    for i in range(tables):
        name = table_name(i)
        bronze = f"{SERVER}_{SCHEMA}_{name}"
        sources.append(f"      - name: {bronze}\n        meta: {{topic: {topic(i)}, primary_key: [order_id]}}\n")
        entries.append(f"""\
  - name: {name}
    columns:
      - name: order_id
        data_type: bigint
        data_tests: [not_null, unique]
      - {{name: customer_id, data_type: int}}
      - {{name: status, data_type: string}}
      - {{name: amount, data_type: "decimal(12,2)"}}
      - {{name: order_date, data_type: date}}
      - {{name: updated_at, data_type: timestamp}}
      - {{name: note, data_type: string}}
""")
        (models / f"{name}.sql").write_text(
            "with\n\ncurrent_state as (\n"
            f"    {{{{ cdc_current_state(source('bronze', '{bronze}')) }}}}\n"
            "),\n\nfinal as (\n    select * from current_state\n)\n\nselect * from final\n")
    (models / "_silver__sources.yml").write_text(
        "version: 2\n\nsources:\n  - name: bronze\n    schema: \"{{ var('cdc_bronze_schema') }}\"\n    tables:\n"
        + "".join(sources))
    (models / "_silver__models.yml").write_text("version: 2\n\nmodels:\n" + "".join(entries))


def env(base: Path) -> dict[str, str]:
    return {**os.environ, "CDC_LAKEHOUSE_DIR": str(base / "lakehouse"), "DBT_TARGET_PATH": str(base / "target"),
            "DBT_LOG_PATH": str(base / "logs"), "DBT_PROFILES_DIR": str(PROJECT_DIR / "profiles")}


def runner_args(base: Path, report: Path) -> list[str]:
    project = base / "project"
    return ["--input", str(base / "landing" / "topics"),
            "--sources-yml", str(project / "models" / "silver" / "_silver__sources.yml"),
            "--dbt-arg=--project-dir", f"--dbt-arg={project}", "--report", str(report)]


# The runner's steps a pass's time adds up (pass_seconds), each a CSV column too.
PASS_STEPS = ("ingestion", "selection", "dbt_build")


def pass_seconds(report: dict) -> float:
    """From the start of the pass's ingestion to the end of its build."""
    return sum(report["seconds"].get(step, 0.0) for step in PASS_STEPS)


def cold_pass(base: Path, name: str, extra: tuple[str, ...] = ()) -> dict:
    """One `python -m runner --once` process; its report with the process's wall time."""
    report = base / "reports" / f"{name}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    log = base / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.run([sys.executable, "-m", "runner", "--once", *runner_args(base, report), *extra],
                              cwd=PROJECT_DIR, env=env(base), stdout=out, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"runner pass {name} exited {code}: see {log}")
    return {**json.loads(report.read_text()), "wall": wall}


def warm(base: Path, tables: int, rounds: int) -> None:
    """In this process (a new one): the warm passes and the check, results into
    <base>/warm.json."""
    state = json.loads((base / "landing.json").read_text())
    landing = new_landing(base, tables, state["passes"])
    landing.landed.update({int(k): v for k, v in state["landed"].items()})
    landing.offsets.update({int(k): v for k, v in state["offsets"].items()})
    os.environ.update(env(base))
    passes = warm_passes(base, landing, rounds)
    from core.spark import get_session

    check(get_session("local"), landing, tables)
    (base / "warm.json").write_text(json.dumps(passes, indent=1))


def warm_passes(base: Path, landing: Landing, rounds: int) -> list[dict]:
    """A warm-up pass and `rounds` measured ones of the runner (`one_pass`, one
    process, as `--every` runs them), each after new events in the changed tables;
    their reports."""
    from ingestion import cli as ingestion_cli
    from runner.cli import LoopState, one_pass
    from runner.report import PassReport

    ingest_args = ingestion_cli.build_parser().parse_args(runner_args(base, base / "reports" / "warm.json")[:4])
    dbt_args = ["--project-dir", str(base / "project"), "--target-path", str(base / "target")]
    loop, passes = LoopState(), []
    for number in range(rounds + 1):
        for index in range(CHANGED):
            landing.land(index, EVENTS)
        report = PassReport()
        code = one_pass(ingest_args, dbt_args, "local", loop, report=report,
                        state_dir=base / "lakehouse" / "runner-state")
        if code != 0:
            raise SystemExit(f"warm pass {number} exited {code}: {report.dbt}")
        passes.append({**report.as_dict(), "warm_up": number == 0})
    return passes


def check(spark, landing: Landing, tables: int) -> None:  # noqa: ANN001 - a SparkSession
    """Both changed tables and the last, unchanged one equal, row by row, the state the
    generated events give; raises naming the first keys that differ."""
    for index in sorted({*range(CHANGED), tables - 1}):
        got = {row[0]: tuple(row) for row in spark.sql(
            f"select order_id, customer_id, status from silver.{table_name(index)}").collect()}
        want = landing.expected(index)
        if got != want:
            wrong = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))[:5]
            raise SystemExit(f"silver.{table_name(index)} differs from the generated events at keys {wrong}")


def one_size(work: Path, tables: int, rounds: int, baseline: bool) -> Iterator[dict]:
    """Every measured pass at N = `tables`, as CSV rows."""
    base = work / str(tables)
    shutil.rmtree(base, ignore_errors=True)
    write_project(base / "project", tables)
    passes = 2 * rounds + 1 + (1 if baseline else 0)
    landing = new_landing(base, tables, passes)
    for index in range(tables):
        landing.land(index, KEYS)
    first = cold_pass(base, "first")
    yield row_of(tables, "first build", 1, first, first["wall"])
    runs = [("cold", ())] * rounds + ([("cold, every model (--build-always)", ("--build-always",))] if baseline else [])
    for number, (mode, extra) in enumerate(runs, start=1):
        for index in range(CHANGED):
            landing.land(index, EVENTS)
        report = cold_pass(base, f"cold-{number}", extra)
        yield row_of(tables, mode, number, report, report["wall"])
    (base / "landing.json").write_text(json.dumps(
        {"passes": passes, "landed": landing.landed, "offsets": landing.offsets}))
    log = base / "logs" / "warm.log"
    with open(log, "w") as out:
        code = subprocess.run([sys.executable, "-m", "benchmarks.many_tables", "warm", "--work", str(work),
                               "--tables", str(tables), "--rounds", str(rounds)],
                              cwd=PROJECT_DIR, env=env(base), stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise SystemExit(f"the warm passes at {tables} tables failed: see {log}")
    for number, report in enumerate(json.loads((base / "warm.json").read_text())):
        yield row_of(tables, "warm-up" if report["warm_up"] else "warm", number, report)


def row_of(tables: int, mode: str, number: int, report: dict, process: float | None = None) -> dict:
    """A CSV row of one pass: its time, its steps' (the runner's and the ingestion's) and
    its process's wall time for a cold pass."""
    steps = report["seconds"]
    ingestion_steps = (report.get("ingestion") or {}).get("seconds") or {}
    return {"tables": tables, "mode": mode, "round": number, "pass_seconds": round(pass_seconds(report), 2),
            "process_seconds": "" if process is None else round(process, 2), "models_built": models_built(report),
            **{f"{step}_seconds": round(steps.get(step, 0.0), 2) for step in PASS_STEPS},
            "ingestion_steps": ";".join(f"{step}={value:.2f}" for step, value in ingestion_steps.items())}


def models_built(report: dict) -> int:
    return sum(1 for node in (report.get("dbt") or {}).get("nodes", []) if node["resource_type"] == "model")


def medians(rows: list[dict]) -> dict[tuple[int, str], float]:
    grouped: dict[tuple[int, str], list[float]] = {}
    for row in rows:
        grouped.setdefault((int(row["tables"]), row["mode"]), []).append(float(row["pass_seconds"]))
    return {key: statistics.median(values) for key, values in grouped.items()}


def write(rows: list[dict], out: Path) -> None:
    from benchmarks.results import machine

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "many_tables.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["tables", "mode", "round", "pass_seconds", "process_seconds",
                                               "models_built", *[f"{step}_seconds" for step in PASS_STEPS],
                                               "ingestion_steps"])
        writer.writeheader()
        writer.writerows(rows)
    mid = medians(rows)
    sizes = sorted({t for t, _ in mid})
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# Many tables: a pass with 2 changed tables of N", "",
             f"Run {when} by `python -m benchmarks.many_tables --tables {' '.join(map(str, sizes))}` "
             f"(benchmarks/many_tables.py): {KEYS:,} keys a table, {CHANGED} tables x {EVENTS} events a pass; "
             "a pass's seconds run from the start of its ingestion to the end of its last test.", ""]
    lines += [f"- {k}: {v}" for k, v in machine().items()]
    lines += ["", "## Targets", "", "| what | measured | target | met |", "|---|---:|---|---|"]
    small, large = sizes[0], sizes[-1]
    if (large, "warm") in mid and (small, "warm") in mid and large != small:
        ratio = mid[(large, "warm")] / mid[(small, "warm")]
        lines.append(f"| warm pass, {large} / {small} tables | {ratio:.2f} | <= {TARGETS['warm_ratio']} | "
                     f"{'yes' if ratio <= TARGETS['warm_ratio'] else 'NO'} |")
    for size in sizes:
        if (size, "warm") in mid:
            seconds = mid[(size, "warm")]
            lines.append(f"| warm pass at {size} tables (s) | {seconds:.2f} | <= {TARGETS['warm_seconds']:g} | "
                         f"{'yes' if seconds <= TARGETS['warm_seconds'] else 'NO'} |")
    lines += ["", "## Medians (seconds of a pass)", "", "| tables | " + " | ".join(
        mode for mode in MODES) + " |", "|---:|" + "---:|" * len(MODES)]
    for size in sizes:
        lines.append(f"| {size} | " + " | ".join(
            f"{mid[(size, mode)]:.2f}" if (size, mode) in mid else "-" for mode in MODES) + " |")
    lines += ["", "## Passes", "", "| tables | mode | round | pass s | process s | models built | ingestion s "
              "| dbt build s | the ingestion's steps (s) |", "|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r['tables']} | {r['mode']} | {r['round']} | {r['pass_seconds']} | {r['process_seconds']} | "
              f"{r['models_built']} | {r.get('ingestion_seconds', '')} | {r.get('dbt_build_seconds', '')} | "
              f"{(r.get('ingestion_steps') or '').replace(';', ', ')} |" for r in rows]
    (out / "many_tables.md").write_text("\n".join(lines) + "\n")
    plot(rows, out / "many_tables.png")


MODES = ("first build", "cold", "cold, every model (--build-always)", "warm-up", "warm")


def plot_series(rows: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """mode -> [(tables, median pass seconds)] for the modes drawn."""
    mid = medians(rows)
    series: dict[str, list[tuple[int, float]]] = {}
    for (tables, mode), seconds in sorted(mid.items()):
        if mode in ("cold", "cold, every model (--build-always)", "warm"):
            series.setdefault(mode, []).append((tables, seconds))
    return series


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for mode, points in plot_series(rows).items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tables in the project")
    ax.set_ylabel("seconds, ingestion start to last test (median)")
    ax.set_title(f"A pass with {CHANGED} changed tables x {EVENTS} events")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["plot"]:
        with open(argv[1]) as f:
            rows = list(csv.DictReader(f))
        plot(rows, Path(argv[1]).with_suffix(".png"))
        return 0
    ap = argparse.ArgumentParser(prog="python -m benchmarks.many_tables", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", nargs="?", choices=["warm"], help=argparse.SUPPRESS)
    ap.add_argument("--tables", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--rounds", type=int, default=3, help="measured passes of each kind per N (default 3)")
    ap.add_argument("--baseline-max", type=int, default=64,
                    help="run the --build-always pass only up to this many tables (default 64)")
    ap.add_argument("--work", type=Path, default=PROJECT_DIR / "build" / "bench" / "many_tables")
    ap.add_argument("--out", type=Path, default=None, help="where results go (default <work>/results)")
    args = ap.parse_args(argv)
    work = args.work.resolve()
    if args.mode == "warm":
        warm(work / str(args.tables[0]), args.tables[0], args.rounds)
        return 0
    rows: list[dict] = []
    out = args.out or work / "results"
    for tables in args.tables:
        for row in one_size(work, tables, args.rounds, tables <= args.baseline_max):
            print(f"  {row['tables']} tables, {row['mode']} {row['round']}: {row['pass_seconds']} s", flush=True)
            rows.append(row)
        write(rows, out)  # after each size: a run stopped later keeps what it measured
    print(f"wrote {out}/many_tables.md, many_tables.csv and many_tables.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
