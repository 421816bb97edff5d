"""Silver's size case: what a build costs when silver itself is large, and what a read
costs between compactions (issue 53's targets).

    python -m benchmarks.silver_size [--scale full|smoke] [--keys 10000000] [--work DIR] [--out DIR]

For each silver size (1M and 10M keys at full scale) the generator writes a stream that
opens with Debezium's initial snapshot of every key (so silver holds that many rows from
its first build on), then segments of random changes over all the keys. Then:

  cold   each step its own process, as a scheduled run is: the snapshot landed and the
         first build; then per batch size (1,000, 10,000 and 100,000 changes) the batch
         landed and `dbt run --select orders` timed.
  warm   one process, as `python -m runner --every N` runs (the `warm` subcommand): a
         first pass (not measured); per batch size a batch landed and the build timed; a
         build with no new data; then 20 builds of small batches, a gold query on silver
         timed after each, with the delta commits silver's state table holds since its
         last compaction (the log files a read merges);
         compaction forced and the gold query timed again (median of 3, as after the
         20th build); last the reference full recompute twice (the second timed).

Then `dbt test` checks silver against the full recompute row by row and its row count
against the generator's live keys: a wrong answer fails the run. Results go to
`silver_size.csv`, `silver_size.md` (its targets table) and `silver_size.png` in --out
(`python -m benchmarks.silver_size plot CSV` draws the plot again from a CSV).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.generator import Layout, StreamConfig, write_segments
from benchmarks.measure import StepFailed, run_step, timed_sql

PROJECT_DIR = Path(__file__).resolve().parent.parent
BENCH_DBT = PROJECT_DIR / "benchmarks" / "dbt"
SOURCES_YML = BENCH_DBT / "models" / "silver" / "_silver__sources.yml"
STATE_TABLE = "silver.orders__cdc_state"
# What a gold model or a dashboard asks of silver: an aggregate over every current row,
# read through the view, so a merge-on-read table's log files are merged into it.
GOLD_QUERY = ("select status, count(*) as orders, sum(amount) as amount, max(updated_at) as last_update "
              "from silver.orders group by status")


@dataclass(frozen=True)
class SizeScale:
    name: str
    keys: tuple[int, ...]  # silver sizes
    batches: tuple[int, ...]  # changes per measured build
    runs: int = 20  # small builds before the gold query is compared with after compaction
    run_batch: int = 1_000
    records_per_file: int = 100_000
    cold_batches: tuple[int, ...] | None = None  # default: all of `batches`


SIZE_SCALES = {
    # make test: one small silver, each kind of step once
    "smoke": SizeScale("smoke", keys=(3_000,), batches=(20,), runs=2, run_batch=20, records_per_file=3_000,
                       cold_batches=(20,)),
    "full": SizeScale("full", keys=(1_000_000, 10_000_000), batches=(1_000, 10_000, 100_000)),
}


def segments(scale: SizeScale, keys: int) -> list[tuple[str, int]]:
    cold = scale.batches if scale.cold_batches is None else scale.cold_batches
    return [("snapshot", keys), *[(f"cold_{b}", b) for b in cold], ("warm_up", scale.run_batch),
            *[(f"warm_{b}", b) for b in scale.batches], *[(f"run_{i:02d}", scale.run_batch)
                                                           for i in range(1, scale.runs + 1)]]


def events_in(counts: dict) -> int:
    return sum(counts.get(op, 0) for op in "rcud")


# --- the warm process (python -m benchmarks.silver_size warm ...) --------------------------
def _pending_delta_commits(spark) -> int:
    """Delta commits of the state table since its last compaction: the log files a read
    of each file group merges with its base file."""
    location = spark.sql(f"describe formatted {STATE_TABLE}").where("col_name = 'Location'").collect()[0][1]
    timeline = Path(location.removeprefix("file:")) / ".hoodie" / "timeline"
    completed = sorted(p.name for p in timeline.iterdir() if "_" in p.name and "." in p.name)
    compactions = [name for name in completed if name.endswith(".commit")]
    since = compactions[-1].split("_")[0] if compactions else ""
    return sum(1 for name in completed if name.endswith(".deltacommit") and name.split("_")[0] > since)


def warm(spark, streams: Path, batches: list[int], runs: int, first: bool = False,
         dbt_args: tuple[str, ...] = ()) -> dict:
    """The warm process's steps on `spark` (see the module's docstring); `first`: land the
    snapshot and build first (the smoke test, in its own session); `dbt_args` go to every
    dbt run. Returns the seconds measured."""
    from dbt.cli.main import dbtRunner

    from ingestion.pipeline import IngestConfig, run as ingest

    def land(segment: str) -> None:
        ingest(spark, IngestConfig(input_uri=str(streams / segment / "topics"), sources_yml=SOURCES_YML))

    def build(select: str = "orders") -> float:
        start = time.perf_counter()
        result = dbtRunner().invoke(["run", "--select", select, "--project-dir", str(BENCH_DBT), *dbt_args])
        if not result.success:
            raise StepFailed(f"dbt run --select {select} failed: {result.exception or result.result}")
        return time.perf_counter() - start

    def gold(times: int) -> float:
        return statistics.median(timed_sql(spark, GOLD_QUERY) for _ in range(times))

    if first:
        land("snapshot")
        build()
    land("warm_up")
    build()
    gold(1)  # the query's first run in the process compiles its code
    seconds: dict = {}
    for b in batches:
        land(f"warm_{b}")
        seconds[f"incremental_{b}"] = build()
    seconds["no_new_data"] = build()
    seconds["runs"] = []
    for i in range(1, runs + 1):
        land(f"run_{i:02d}")
        run_s = build()
        seconds["runs"].append({"build": run_s, "gold": gold(1), "pending_delta_commits": _pending_delta_commits(spark)})
    seconds["gold_after_runs"] = gold(3)
    seconds["pending_delta_commits_after_runs"] = _pending_delta_commits(spark)
    # Compact whatever is pending (the table's own trigger waits for 5 delta commits).
    compacted = spark.sql(f"call run_compaction(op => 'scheduleAndExecute', table => '{STATE_TABLE}', "
                          "options => 'hoodie.compact.inline.max.delta.commits=1')").collect()
    if seconds["pending_delta_commits_after_runs"] and not compacted:
        raise StepFailed(f"call run_compaction on {STATE_TABLE} compacted nothing")
    seconds["pending_delta_commits_after_compaction"] = _pending_delta_commits(spark)
    seconds["gold_after_compaction"] = gold(3)
    build("orders_full_recompute")  # its first run in this process compiles its plan's code
    seconds["full_recompute"] = build("orders_full_recompute")
    return seconds


# --- the orchestrating run --------------------------------------------------------------------
class SilverSize:
    def __init__(self, scale: SizeScale, work: Path, master: str = "local[2]") -> None:
        self.scale, self.work, self.master = scale, work, master
        self.rows: list[dict] = []

    def run_size(self, keys: int) -> None:
        folder = self.work / f"keys_{keys}"
        streams, lakehouse, logs = folder / "streams", folder / "lakehouse", folder / "logs"
        for name in ("lakehouse", "logs", "dbt-target"):
            shutil.rmtree(folder / name, ignore_errors=True)
        plan = segments(self.scale, keys)
        config = StreamConfig(events=sum(n for _, n in plan), keys=keys, snapshot=True)
        manifest = write_segments(config, Layout(records_per_file=self.scale.records_per_file), plan, streams)
        counts = manifest["counts"]
        env = {"CDC_LAKEHOUSE_DIR": str(lakehouse), "CDC_SPARK_MASTER": self.master,
               "DBT_TARGET_PATH": str(folder / "dbt-target" / "run"), "DBT_LOG_PATH": str(folder / "dbt-logs")}

        def step(name: str, argv: list[str], env_extra: dict | None = None) -> float:
            m = run_step(name, argv, logs, {**env, **(env_extra or {})}, cwd=PROJECT_DIR)
            print(f"keys {keys:>10,}  {name:<24} {m.seconds:8.1f}s  peak JVM {m.peak_jvm_mib:7.0f} MiB", flush=True)
            return m.seconds

        def land(segment: str) -> float:
            return step(f"ingest_{segment}", [sys.executable, "-m", "ingestion", "--input",
                                              str(streams / segment / "topics"), "--sources-yml", str(SOURCES_YML)])

        def dbt(name: str, args: list[str], env_extra: dict | None = None) -> float:
            return step(name, [str(Path(sys.executable).with_name("dbt")), *args, "--project-dir", str(BENCH_DBT)],
                        env_extra)

        def record(mode: str, what: str, events: int, seconds: float, **extra) -> None:
            self.rows.append({"silver_keys": keys, "mode": mode, "step": what, "events": events,
                              "seconds": round(seconds, 2), **extra})

        record("cold", "land snapshot", keys, land("snapshot"))
        record("cold", "first build", keys, dbt("first_build", ["run", "--select", "orders"]))
        for b in self.scale.cold_batches or self.scale.batches:
            land(f"cold_{b}")
            record("cold", "incremental", events_in(counts[f"cold_{b}"]), dbt(f"build_cold_{b}",
                                                                               ["run", "--select", "orders"]))
        out = folder / "warm.json"
        step("warm_loop", [sys.executable, "-m", "benchmarks.silver_size", "warm", "--streams", str(streams),
                           "--batches", ",".join(map(str, self.scale.batches)), "--runs", str(self.scale.runs),
                           "--out", str(out)])
        warm_s = json.loads(out.read_text())
        for b in self.scale.batches:
            record("warm", "incremental", events_in(counts[f"warm_{b}"]), warm_s[f"incremental_{b}"])
        record("warm", "no new data", 0, warm_s["no_new_data"])
        for i, run in enumerate(warm_s["runs"], start=1):
            record("warm", f"small build {i}", self.scale.run_batch, run["build"], pending_delta_commits=run["pending_delta_commits"])
            record("warm", f"gold query after build {i}", 0, run["gold"], pending_delta_commits=run["pending_delta_commits"])
        record("warm", f"gold query after {self.scale.runs} builds (median of 3)", 0, warm_s["gold_after_runs"],
               pending_delta_commits=warm_s["pending_delta_commits_after_runs"])
        record("warm", "gold query after compaction (median of 3)", 0, warm_s["gold_after_compaction"],
               pending_delta_commits=warm_s["pending_delta_commits_after_compaction"])
        record("warm", "full recompute (reference)", sum(events_in(c) for c in counts.values()),
               warm_s["full_recompute"])
        live = list(counts.values())[-1]["live_keys_after"]
        dbt("check", ["test", "--vars", f"{{bench_live_keys: {live}}}"],
            {"DBT_TARGET_PATH": str(folder / "dbt-target" / "check")})

    def run(self) -> list[dict]:
        for keys in self.scale.keys:
            self.run_size(keys)
        return self.rows


@dataclass(frozen=True)
class Ratio:
    what: str
    value: float | None
    wanted: str
    met: bool | None


def _seconds(rows: list[dict], keys: int, mode: str, step: str, events: int | None = None) -> float | None:
    found = [r["seconds"] for r in rows if r["silver_keys"] == keys and r["mode"] == mode and r["step"] == step
             and (events is None or r["events"] == events)]
    return found[0] if found else None


def targets(rows: list[dict], scale: SizeScale) -> list[Ratio]:
    out: list[Ratio] = []

    def ratio(what: str, a: float | None, b: float | None, wanted: str, limit: float | None) -> None:
        value = round(a / b, 3) if a is not None and b else None
        out.append(Ratio(what, value, wanted, None if value is None or limit is None else value <= limit))

    small, large = scale.batches[0], scale.batches[-1]
    big, little = max(scale.keys), min(scale.keys)

    def warm_incremental(keys: int, batch: int) -> float | None:
        return next((r["seconds"] for r in rows if r["silver_keys"] == keys and r["mode"] == "warm"
                     and r["step"] == "incremental" and r["events"] == batch), None)

    full = _seconds(rows, big, "warm", "full recompute (reference)")
    ratio(f"{big:,} silver keys, warm: {small:,} changes / full recompute", warm_incremental(big, small), full,
          "<= 0.05", 0.05)
    ratio(f"{big:,} silver keys, warm: {large:,} changes / full recompute", warm_incremental(big, large), full,
          "<= 0.2", 0.2)
    ratio(f"{big:,} silver keys, warm: {small:,} changes / {large:,} changes", warm_incremental(big, small),
          warm_incremental(big, large), "<= 0.25", 0.25)
    if big != little:
        ratio(f"warm {small:,} changes: {big:,} / {little:,} silver keys", warm_incremental(big, small),
              warm_incremental(little, small), "<= 1.3", 1.3)

    def mean_small_build(keys: int) -> float | None:
        found = [r["seconds"] for r in rows if r["silver_keys"] == keys and r["step"].startswith("small build ")]
        return sum(found) / len(found) if found else None

    # the small builds' mean: what a build costs on average once the compactions it runs
    # (every fifth delta commit) are counted in
    ratio(f"{big:,} silver keys, warm: mean of the {scale.runs} {scale.run_batch:,}-change builds / full recompute",
          mean_small_build(big), full, "reported", None)
    if big != little:
        ratio(f"warm, mean of the {scale.run_batch:,}-change builds: {big:,} / {little:,} silver keys",
              mean_small_build(big), mean_small_build(little), "reported", None)
    for keys in scale.keys:
        after = _seconds(rows, keys, "warm", "gold query after compaction (median of 3)")
        ratio(f"{keys:,} silver keys: gold query after {scale.runs} builds / after compaction",
              _seconds(rows, keys, "warm", f"gold query after {scale.runs} builds (median of 3)"), after, "<= 1.3", 1.3)
        worst = max((r["seconds"] for r in rows if r["silver_keys"] == keys and r["step"].startswith("gold query after build")),
                    default=None)
        ratio(f"{keys:,} silver keys: slowest gold query of the {scale.runs} builds / after compaction", worst, after,
              "reported", None)
    return out


@dataclass(frozen=True)
class Series:
    """One line of the plot: its silver size and kind (cold, warm, recompute, build,
    gold), its (x, y) points, and the x of the points to mark."""
    label: str
    points: list[tuple[float, float]]
    marked: tuple[float, ...] = ()
    keys: int = 0
    kind: str = ""


def plot_series(rows: list[dict]) -> tuple[list[Series], list[Series]]:
    """What `silver_size.png` draws. Left: a build's seconds by the changes it applies, per
    silver size and mode, and the full recompute at each size. Right: the 20 small builds
    in order (the ones that compacted marked) and the gold query after each, per size."""
    by_batch, loop = [], []
    for keys in sorted({r["silver_keys"] for r in rows}):
        mine = [r for r in rows if r["silver_keys"] == keys]
        batches = set()
        for mode in ("cold", "warm"):
            points = sorted((r["events"], r["seconds"]) for r in mine if r["mode"] == mode and r["step"] == "incremental")
            if points:
                by_batch.append(Series(f"{keys:,} keys, {mode} build", points, keys=keys, kind=mode))
                batches.update(events for events, _ in points)
        full = _seconds(rows, keys, "warm", "full recompute (reference)")
        if full is not None and batches:
            by_batch.append(Series(f"{keys:,} keys, full recompute (warm)", [(min(batches), full), (max(batches), full)],
                                   keys=keys, kind="recompute"))
        builds = [(int(r["step"].rsplit(" ", 1)[1]), r["seconds"], r.get("pending_delta_commits"))
                  for r in mine if r["step"].startswith("small build ")]
        if builds:
            loop.append(Series(f"{keys:,} keys, build", [(n, sec) for n, sec, _ in builds],
                               marked=tuple(n for n, _, pending in builds if pending == 0), keys=keys, kind="build"))
        golds = [(int(r["step"].rsplit(" ", 1)[1]), r["seconds"]) for r in mine
                 if r["step"].startswith("gold query after build ")]
        if golds:
            loop.append(Series(f"{keys:,} keys, gold query after it", golds, keys=keys, kind="gold"))
    return by_batch, loop


def plot(rows: list[dict], out: Path) -> Path:
    """Draw `silver_size.png` in `out` from the case's rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_batch, loop = plot_series(rows)
    sizes = sorted({series.keys for series in by_batch + loop})
    color = {keys: f"C{i}" for i, keys in enumerate(sizes)}  # one colour per silver size
    style = {"cold": "o:", "warm": "s-", "recompute": "--", "build": "o", "gold": "-"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for series in by_batch:
        left.plot(*zip(*series.points), style[series.kind], color=color[series.keys], label=series.label)
    left.set_xscale("log")
    left.set_xlabel("changes in the batch")
    left.set_ylabel("seconds")
    left.set_title("A build by its batch, and the full recompute")
    left.set_ylim(bottom=0)
    left.legend(fontsize=7)
    for series in loop:
        right.plot(*zip(*series.points), style[series.kind], color=color[series.keys], label=series.label)
        compacted = [(x, y) for x, y in series.points if x in series.marked]
        if compacted:
            right.plot(*zip(*compacted), "x", markersize=11, color="black" if len(sizes) == 1 else color[series.keys],
                       label=f"{series.label} that compacted")
    right.set_xlabel("small build in the warm loop")
    right.set_ylabel("seconds (log scale)")
    right.set_yscale("log")
    highest = max((y for series in loop for _, y in series.points), default=1.0)
    right.set_ylim(top=max(highest, 1.0) * 8)  # room for the legend above the points
    right.xaxis.get_major_locator().set_params(integer=True)
    right.set_title("Small builds in a row, and a gold query after each")
    right.legend(fontsize=7, loc="upper center", ncol=2)
    fig.tight_layout()
    path = out / "silver_size.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def read_csv(path: Path) -> list[dict]:
    """The rows of a `silver_size.csv`, typed as the case produced them."""
    with open(path, newline="") as f:
        return [{**r, "silver_keys": int(r["silver_keys"]), "events": int(r["events"]),
                 "seconds": float(r["seconds"]),
                 "pending_delta_commits": int(r["pending_delta_commits"]) if r["pending_delta_commits"] else ""}
                for r in csv.DictReader(f)]


def write(rows: list[dict], scale: SizeScale, master: str, out: Path) -> list[Ratio]:
    from benchmarks.results import machine

    out.mkdir(parents=True, exist_ok=True)
    fields = ["silver_keys", "mode", "step", "events", "seconds", "pending_delta_commits"]
    with open(out / "silver_size.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows({k: r.get(k, "") for k in fields} for r in rows)
    ratios = targets(rows, scale)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Silver size ({scale.name} scale)", "",
             f"Run {when} by `python -m benchmarks.silver_size --scale {scale.name}`; Spark master {master}. "
             "A stream per silver size opens with a snapshot of every key; `cold` steps are processes of their "
             "own, `warm` ones run in one process as the runner loop does (benchmarks/silver_size.py).", ""]
    lines += [f"- {k}: {v}" for k, v in machine().items()]
    lines += ["", "## Targets", "", "| what | measured | target | met |", "|---|---:|---|---|"]
    for t in ratios:
        met = "-" if t.met is None else ("yes" if t.met else "NO")
        lines.append(f"| {t.what} | {'?' if t.value is None else t.value} | {t.wanted} | {met} |")
    lines += ["", "## Steps", "", "| silver keys | mode | step | events | seconds | delta commits since compaction |",
              "|---:|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['silver_keys']:,} | {r['mode']} | {r['step']} | {r['events']:,} | {r['seconds']} "
                     f"| {r.get('pending_delta_commits', '')} |")
    (out / "silver_size.md").write_text("\n".join(lines) + "\n")
    plot(rows, out)
    return ratios


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["plot"]:
        ap = argparse.ArgumentParser(prog="python -m benchmarks.silver_size plot",
                                     description="Draw silver_size.png again from a silver_size.csv.")
        ap.add_argument("csv", type=Path)
        ap.add_argument("--out", type=Path, default=None, help="folder of the PNG (default: the CSV's)")
        args = ap.parse_args(argv[1:])
        print(f"wrote {plot(read_csv(args.csv), args.out or args.csv.parent)}")
        return 0
    if argv[:1] == ["warm"]:
        ap = argparse.ArgumentParser(prog="python -m benchmarks.silver_size warm")
        ap.add_argument("--streams", type=Path, required=True)
        ap.add_argument("--batches", required=True, help="comma-separated batch sizes")
        ap.add_argument("--runs", type=int, required=True)
        ap.add_argument("--out", type=Path, required=True)
        args = ap.parse_args(argv[1:])
        from core.spark import get_session

        seconds = warm(get_session("local"), args.streams, [int(b) for b in args.batches.split(",")], args.runs)
        args.out.write_text(json.dumps(seconds, indent=2))
        return 0
    ap = argparse.ArgumentParser(prog="python -m benchmarks.silver_size", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=sorted(SIZE_SCALES), default="full")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keys", default="", help="comma-separated silver sizes instead of the scale's")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default build/bench/silver_size_<scale>)")
    ap.add_argument("--out", type=Path, default=None,
                    help="where results go (default benchmarks/results for full, else <work>/results)")
    args = ap.parse_args(argv)
    scale = SIZE_SCALES[args.scale]
    if args.keys:
        scale = replace(scale, keys=tuple(int(k) for k in args.keys.split(",")))
    work = (args.work or PROJECT_DIR / "build" / "bench" / f"silver_size_{scale.name}").resolve()
    out = args.out or (PROJECT_DIR / "benchmarks" / "results" if scale.name == "full" else work / "results")
    try:
        rows = SilverSize(scale, work, args.master).run()
    except StepFailed as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    for t in write(rows, scale, args.master, out):
        print(f"  {t.what}: {t.value} (target {t.wanted}) "
              f"{'' if t.met is None else ('met' if t.met else 'MISSED')}")
    print(f"wrote {out}/silver_size.md, silver_size.csv and silver_size.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
