"""Where one Spark SQL statement's time goes: parsing and analysis, optimization, physical
planning and execution, each timed apart, run after run in one embedded session (the
`local` profile target's, on the lakehouse CDC_LAKEHOUSE_DIR names).

    python -m tools.statement_phases batch.sql                     # 5 runs
    python -m tools.statement_phases a.sql b.sql --runs 3          # each file in turn, 3 rounds
    python -m tools.statement_phases batch.sql --setting spark.sql.adaptive.enabled=false

A file holds one query (a `select`, or a `with ... select`): take a statement from dbt's
log (`logs/dbt.log`, the text after `create table ... as`) to time a build's step on its
own. Execution writes the rows nowhere (Spark's `noop` format), so the whole plan runs,
every column included. The first run in a process pays for loading and compiling
classes; a file's first run after another file's shows what a new query shape costs in
a warm process (docs/reference/build-cost.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.cli import number


@dataclass(frozen=True)
class Phases:
    analyze: float
    optimize: float
    plan: float
    execute: float

    @property
    def total(self) -> float:
        return self.analyze + self.optimize + self.plan + self.execute


def timed(spark: Any, sql: str) -> Phases:
    """One run of `sql`, each phase forced in turn (Spark's QueryExecution is lazy)."""
    started = time.perf_counter()
    frame = spark.sql(sql)
    execution = frame._jdf.queryExecution()
    execution.analyzed()
    analyzed = time.perf_counter()
    execution.optimizedPlan()
    optimized = time.perf_counter()
    execution.executedPlan()
    planned = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    done = time.perf_counter()
    return Phases(analyzed - started, optimized - analyzed, planned - optimized, done - planned)


def setting(text: str) -> tuple[str, str]:
    """An argparse type: `KEY=VALUE`, a Spark setting."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.statement_phases",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="files of one query each")
    parser.add_argument("--runs", type=number(int, above=0), default=5, help="rounds over the files (default 5)")
    parser.add_argument("--setting", type=setting, action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the session, repeatable")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = dict(args.setting)
    queries = {path: path.read_text(encoding="utf-8") for path in args.files}
    from core.spark import get_session

    spark = get_session("local", overrides=settings)
    print(f"{'run':>3}  {'file':<28} {'analyze':>8} {'optimize':>8} {'plan':>8} {'execute':>8} {'total':>8}")
    for run in range(1, args.runs + 1):
        for path, sql in queries.items():
            p = timed(spark, sql)
            print(f"{run:>3}  {path.name:<28} {p.analyze:8.2f} {p.optimize:8.2f} {p.plan:8.2f} {p.execute:8.2f} "
                  f"{p.total:8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
