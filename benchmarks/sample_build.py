"""The sample project's case: the whole `dbt build` of the project (every silver and gold
model and their data tests) in the runner's warm loop (issue 53's targets).

    python -m benchmarks.sample_build [--sample build/sample] [--work DIR] [--out DIR]

One process, as `python -m runner --every N` runs: each pass is the runner's own
(`runner.cli.one_pass`: the ingestion of the landing folder, then `dbt build`), its
times taken from the runner's own log line. Pass 1 lands the sample's first batch (the
snapshot of every table), pass 2 its second; neither is measured beyond being recorded.
Pass 3 lands the third batch, a few changes in every table: the measured build. Pass 4
finds nothing new, so the runner skips `dbt build`; then `dbt build` is run anyway with
nothing new, as a user or a loop with `--build-always` runs it. The sample comes from
`make sample` (`tools.sample_data`, from the Pagila dataset); the lakehouse is a new one
under --work. Results: `sample_build.csv` and `sample_build.md` in --out.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
PASS_LINE = "ingestion %.1fs, dbt build %.1fs: %s"
TARGETS = {  # step -> (target in seconds, what the target is)
    "dbt build, a few changes in every table (pass 3)": 20.0,
    "pass with no new data (dbt build skipped)": 1.0,
}


class PassTimes(logging.Handler):
    """Keeps the (ingestion s, dbt build s, ok) of each runner pass from its log line."""

    def __init__(self) -> None:
        super().__init__()
        self.passes: list[tuple[float, float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == PASS_LINE:
            self.passes.append(record.args)  # type: ignore[arg-type]


def run(sample: Path, work: Path) -> list[dict]:
    from dbt.cli.main import dbtRunner

    from ingestion import cli as ingestion_cli
    from runner.cli import LoopState, one_pass

    landing = work / "landing" / "topics"
    times = PassTimes()
    logging.getLogger("runner").addHandler(times)
    logging.getLogger("runner").setLevel(logging.INFO)
    ingest_args = ingestion_cli.build_parser().parse_args(["--input", str(landing)])
    state = LoopState()
    rows: list[dict] = []
    batches = sorted((sample / "batches").iterdir(), key=lambda p: int(p.name))
    for number, batch in enumerate([*batches, None], start=1):
        if batch is not None:
            shutil.copytree(batch / "topics", landing, dirs_exist_ok=True)
        code = one_pass(ingest_args, [], "local", state)
        if code != 0:
            raise SystemExit(f"runner pass {number} exited {code}")
        ingestion_s, dbt_s, _ = times.passes[-1]
        what = f"batch {batch.name}" if batch is not None else "no new data"
        rows.append({"step": f"pass {number} ({what}): ingestion", "seconds": ingestion_s})
        if batch is None:
            rows.append({"step": "pass with no new data (dbt build skipped)", "seconds": ingestion_s + dbt_s})
        elif number == len(batches):
            rows.append({"step": f"dbt build, a few changes in every table (pass {number})", "seconds": dbt_s})
        else:
            rows.append({"step": f"pass {number} ({what}): dbt build", "seconds": dbt_s})
    start = time.perf_counter()
    result = dbtRunner().invoke(["build", "--project-dir", str(PROJECT_DIR), "--exclude-resource-type", "unit_test"])
    if not result.success:
        raise SystemExit(f"dbt build with no new data failed: {result.exception}")
    rows.append({"step": "dbt build with no new data (run anyway)", "seconds": time.perf_counter() - start})
    return [{**r, "seconds": round(r["seconds"], 2)} for r in rows]


def write(rows: list[dict], out: Path) -> None:
    from benchmarks.results import machine

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "sample_build.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "seconds"])
        writer.writeheader()
        writer.writerows(rows)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# The sample project's build in the runner loop", "",
             f"Run {when} by `python -m benchmarks.sample_build`: the runner's passes in one warm process over "
             "the sample's three batches, then a pass with no new data (benchmarks/sample_build.py).", ""]
    lines += [f"- {k}: {v}" for k, v in machine().items()]
    lines += ["", "## Targets", "", "| what | seconds | target | met |", "|---|---:|---|---|"]
    for row in rows:
        if row["step"] in TARGETS:
            limit = TARGETS[row["step"]]
            lines.append(f"| {row['step']} | {row['seconds']} | <= {limit:g} s | "
                         f"{'yes' if row['seconds'] <= limit else 'NO'} |")
    lines += ["", "## Passes", "", "| step | seconds |", "|---|---:|"]
    lines += [f"| {r['step']} | {r['seconds']} |" for r in rows]
    (out / "sample_build.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sample_build", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample", type=Path, default=PROJECT_DIR / "build" / "sample",
                    help="the sample change streams (make sample)")
    ap.add_argument("--work", type=Path, default=PROJECT_DIR / "build" / "bench" / "sample_build")
    ap.add_argument("--out", type=Path, default=None, help="where results go (default <work>/results)")
    args = ap.parse_args(argv)
    if not (args.sample / "batches").is_dir():
        print(f"no sample at {args.sample}: run `make sample` first", file=sys.stderr)
        return 2
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    # a lakehouse and dbt folders of its own, set before Spark or dbt read them
    os.environ["CDC_LAKEHOUSE_DIR"] = str(work / "lakehouse")
    os.environ["DBT_TARGET_PATH"] = str(work / "dbt-target")
    os.environ["DBT_LOG_PATH"] = str(work / "dbt-logs")
    rows = run(args.sample.resolve(), work)
    out = args.out or work / "results"
    write(rows, out)
    for row in rows:
        print(f"  {row['step']}: {row['seconds']} s")
    print(f"wrote {out}/sample_build.md and sample_build.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
