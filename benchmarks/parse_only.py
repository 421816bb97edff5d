"""The floor for ingestion: read and parse the sink files exactly as the ingestion does
(extract + transform), count the records by status, write nothing.

    python -m benchmarks.parse_only --input DIR/topics
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import functions as F

from core.spark import get_session
from ingestion import extract, transform


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.parse_only", description=__doc__)
    ap.add_argument("--input", required=True)
    ap.add_argument("--primary-key", default="order_id", help="the topic's key columns, comma-separated")
    args = ap.parse_args(argv)
    spark = get_session("local")
    files = extract.list_sink(spark, args.input).files
    keys = {f.topic: args.primary_key.split(",") for f in files}
    catalog = extract.catalog_frame(spark, files)
    lines = transform.attach_file_info(transform.split_lines(extract.read_lines(spark, files), catalog), catalog)
    counts = transform.prepare(lines, keys).groupBy("_status").agg(F.count("*").alias("n")).collect()
    print({row["_status"]: row["n"] for row in counts})
    return 0


if __name__ == "__main__":
    sys.exit(main())
