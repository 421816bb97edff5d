"""Fixed cost of one Hudi statement with the metadata table on and off.

A dbt build runs a few Hudi statements per model (a CTAS on the first build, MERGEs,
reads of silver and bronze), so on small batches their fixed cost is most of the build.
This measures, in one Spark session, a CTAS of 1,000 rows, MERGEs of 20 rows and a
filtered read of the same table, `--rounds` times per setting, alternating the settings
so that drift of the machine hits both. The project's choice (`hoodie.metadata.enable`
in profiles/profiles.yml) is made from its output.

    python -m benchmarks.hudi_settings [--rounds 3] [--out benchmarks/results/hudi_settings.csv]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from benchmarks.measure import timed_sql
from core.spark import get_session, session_settings

SETTINGS = {"metadata table on": "true", "metadata table off": "false"}
TABLE = "bench_scratch.hudi_settings"


def one_round(spark: SparkSession, metadata: str, merges: int = 3) -> dict[str, list[float]]:
    """Seconds of each statement kind for one fresh table written with `metadata`."""
    seconds: dict[str, list[float]] = {"ctas": [], "merge": [], "read": []}
    with session_settings(spark, {"hoodie.metadata.enable": metadata}):
        spark.sql(f"drop table if exists {TABLE} purge")
        seconds["ctas"].append(timed_sql(spark, (
            f"create table {TABLE} using hudi "
            "tblproperties ('type' = 'cow', 'primaryKey' = 'id', 'preCombineField' = 'o') "
            "as select id, lpad(cast(id as string), 10, '0') as o, 'x' as v from range(1000)")))
        for i in range(1, merges + 1):
            seconds["merge"].append(timed_sql(spark, (
                f"merge into {TABLE} as s using ("
                f"select id, lpad(cast(id + {i} as string), 10, '0') as o, 'y' as v "
                f"from range({i * 10}, {i * 10 + 20})"
                ") as c on s.id = c.id "
                "when matched then update set o = c.o, v = c.v "
                "when not matched then insert (id, o, v) values (c.id, c.o, c.v)")))
            seconds["read"].append(timed_sql(spark, f"select count(*) from {TABLE} where v = 'y'"))
        spark.sql(f"drop table if exists {TABLE} purge")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.hudi_settings", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/hudi_settings.csv"))
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    spark = get_session("local")
    spark.sql("create database if not exists bench_scratch")
    samples: dict[tuple[str, str], list[float]] = {}
    one_round(spark, "false", merges=1)  # JIT and class loading, not measured
    for _ in range(args.rounds):
        for name, value in SETTINGS.items():
            for kind, values in one_round(spark, value).items():
                samples.setdefault((name, kind), []).extend(values)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["setting", "statement", "samples", "median_s", "min_s", "max_s"])
        for (name, kind), values in samples.items():
            row = [name, kind, len(values), f"{statistics.median(values):.3f}", f"{min(values):.3f}",
                   f"{max(values):.3f}"]
            writer.writerow(row)
            print(" ".join(str(x) for x in row))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
