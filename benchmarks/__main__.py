"""python -m benchmarks [--scale smoke|small|full] [--work DIR] [--results DIR]

Runs every case on one generated stream and writes results.csv, results.md and PNG plots
(see benchmarks/README.md). `make bench` runs the full scale; `make test` a smoke run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks import freshness, results
from benchmarks.cases import PROJECT_DIR, SCALES, Bench, Result
from benchmarks.measure import StepFailed, run_step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=sorted(SCALES), default="full")
    ap.add_argument("--master", default="local[2]", help="Spark master of the measured runs (default local[2])")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default build/bench/<scale>)")
    ap.add_argument("--results", type=Path, default=None,
                    help="where results go (default benchmarks/results for full, else <work>/results)")
    ap.add_argument("--freshness", action=argparse.BooleanOptionalAction, default=None,
                    help="also measure commit-to-silver freshness with the real CDC stack (default: on at full scale)")
    ap.add_argument("--freshness-every", type=float, default=5.0, help="the runner loop's pause between passes (s)")
    ap.add_argument("--silver-size", action=argparse.BooleanOptionalAction, default=None,
                    help="also run the silver-size and sample-build cases (benchmarks/silver_size.py, "
                         "benchmarks/sample_build.py; default: on at full scale)")
    ap.add_argument("--many-tables", action=argparse.BooleanOptionalAction, default=None,
                    help="also run the many-tables case (benchmarks/many_tables.py: 16, 64 and 256 tables, "
                         "a pass with 2 changed; default: on at full scale)")
    args = ap.parse_args(argv)
    scale = SCALES[args.scale]
    work = (args.work or PROJECT_DIR / "build" / "bench" / scale.name).resolve()
    out = args.results or (PROJECT_DIR / "benchmarks" / "results" if scale.name == "full" else work / "results")
    bench = Bench(scale, work, args.master)
    try:
        measured = bench.run()
    except StepFailed as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    failed = ""
    if args.freshness if args.freshness is not None else scale.name == "full":
        try:
            fresh = freshness.measure(work / "freshness", every=args.freshness_every)
            variant = f"PostgreSQL commit -> row in silver (runner --every {fresh.pass_interval:g})"
            measured += [Result("freshness", variant, 0, 1, s, round(fresh.peak_jvm_mib)) for s in fresh.seconds]
            bench.notes.append(freshness.MEMORY_NOTE)
        except freshness.FreshnessError as exc:
            failed = f"freshness failed: {exc}"  # the other cases took half an hour: keep them
    if args.silver_size if args.silver_size is not None else scale.name == "full":
        # processes of their own: each sets its own lakehouse before Spark starts
        for module, extra in (("benchmarks.silver_size", ["--scale", "full", "--work", str(work / "silver_size")]),
                              ("benchmarks.sample_build", ["--work", str(work / "sample_build")])):
            try:
                run_step(module.split(".")[1], [sys.executable, "-m", module, *extra, "--out", str(out)],
                         work / "logs", cwd=PROJECT_DIR)
            except StepFailed as exc:
                failed = f"{module} failed: {exc}"
    if args.many_tables if args.many_tables is not None else scale.name == "full":
        try:
            run_step("many_tables", [sys.executable, "-m", "benchmarks.many_tables", "--work",
                                     str(work / "many_tables"), "--out", str(out)], work / "logs", cwd=PROJECT_DIR)
        except StepFailed as exc:
            failed = f"benchmarks.many_tables failed: {exc}"
    checks = results.write(measured, scale, args.master, out, notes="\n\n".join(bench.notes))
    print(f"\nwrote {out}/results.md, results.csv and plots")
    for t in checks:
        print(f"  {t.what}: {t.measured} (target {t.wanted}) {'' if t.met is None else ('met' if t.met else 'MISSED')}")
    if failed:
        print(f"benchmark incomplete, {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
