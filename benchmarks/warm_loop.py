"""The scheduled loop's case: the runner's passes in one warm process.

    python -m benchmarks.warm_loop --warm-up DIR/topics --measured DIR/topics --out FILE.json

`python -m runner --every N` ingests and builds in one process, on one Spark session, so
from its second pass on the JVM is warm (classes loaded, code compiled) and dbt has
parsed the project. This step does what such a loop does: a first pass on the `warm-up`
segment (not measured), then, timed one by one: the incremental `orders` run after the
`measured` segment landed, a run with no new data, and the full recompute run twice (the
second is the warm one). Each other step of the benchmark is a process of its own and
pays the JVM's start and warm-up in every run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from dbt.cli.main import dbtRunner

from benchmarks.cases import BENCH_DBT, SOURCES_YML
from core.spark import get_session
from ingestion.pipeline import IngestConfig, run as ingest


class LoopStepFailed(RuntimeError):
    """A dbt run of the loop failed; the message names the run."""


def timed_dbt(select: str) -> float:
    start = time.perf_counter()
    result = dbtRunner().invoke(["run", "--select", select, "--project-dir", str(BENCH_DBT)])
    if not result.success:
        raise LoopStepFailed(f"dbt run --select {select} failed: {result.exception or result.result}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.warm_loop", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warm-up", required=True, help="topics folder of the first, unmeasured pass")
    ap.add_argument("--measured", required=True, help="topics folder of the measured pass")
    ap.add_argument("--out", required=True, type=Path, help="JSON file the seconds are written to")
    args = ap.parse_args(argv)
    spark = get_session("local")
    ingest(spark, IngestConfig(input_uri=args.warm_up, sources_yml=SOURCES_YML))
    timed_dbt("orders")
    ingest(spark, IngestConfig(input_uri=args.measured, sources_yml=SOURCES_YML))
    seconds = {"incremental": timed_dbt("orders"), "no_new_data": timed_dbt("orders")}
    timed_dbt("orders_full_recompute")  # its first run in this process compiles its plan's code
    seconds["full_recompute"] = timed_dbt("orders_full_recompute")
    args.out.write_text(json.dumps(seconds))
    print(json.dumps(seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
