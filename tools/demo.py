"""`make demo`: land the sample change streams in bronze, build silver and gold with dbt,
and print what was built. One Spark session serves the ingestion and dbt."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from dbt.cli.main import dbtRunner

from core.spark import PROJECT_DIR, get_session
from ingestion.pipeline import IngestConfig, run as ingest
from status.collect import MODEL_TABLE_SUFFIXES  # a model's own tables are not listed


def land_sample(sample_dir: Path, landing: Path) -> None:
    """Copy every batch's sink files into one landing folder, as the S3 sink would."""
    for batch in sorted((sample_dir / "batches").iterdir(), key=lambda p: int(p.name)):
        shutil.copytree(batch / "topics", landing, dirs_exist_ok=True)


def print_tables(spark, schemas: tuple[str, ...]) -> None:
    print(f"\n{'table':<40} {'rows':>8}")
    for schema in schemas:
        for row in sorted(spark.sql(f"show tables in `{schema}`").collect(), key=lambda r: r.tableName):
            if row.isTemporary or row.tableName.endswith(MODEL_TABLE_SUFFIXES):
                continue
            name = f"{schema}.{row.tableName}"
            print(f"{name:<40} {spark.table(name).count():>8}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sample", type=Path, default=PROJECT_DIR / "build" / "sample")
    parser.add_argument("--landing", type=Path, default=PROJECT_DIR / "build" / "landing" / "topics")
    args = parser.parse_args(argv)

    spark = get_session("local")
    land_sample(args.sample, args.landing)
    summary = ingest(spark, IngestConfig(input_uri=str(args.landing)))
    print(summary.render())
    result = dbtRunner().invoke(["build", "--project-dir", str(PROJECT_DIR)])
    if not result.success:
        print("dbt build failed", file=sys.stderr)
        return 1
    print_tables(spark, ("bronze", "silver", "gold"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
