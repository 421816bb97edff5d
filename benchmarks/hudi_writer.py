"""The reference ingestion: Hudi's own Spark writer, as HoodieStreamer drives it.

HoodieStreamer (hudi-utilities) reads a source (here: JsonDFSSource over the sink files,
with a schema provider), then calls Hudi's Spark datasource writer. hudi-utilities is not
on the Maven Central this project can reach (see benchmarks/README.md), so this runs the
same two steps itself: read the JSON lines with a fixed schema (what a schema provider
gives) and write them with `format("hudi")`, operation insert, duplicates dropped, the
same COPY_ON_WRITE, non-partitioned table settings as bronze.

    python -m benchmarks.hudi_writer --input DIR/topics --path TABLE_DIR
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import functions as F

from core.spark import get_session
from ingestion.load import INSERT_SETTINGS

ROW = ("struct<order_id:bigint,customer_id:int,status:string,amount:string,order_date:int,"
       "updated_at:bigint,note:string>")
ENVELOPE_SCHEMA = (
    f"before {ROW}, after {ROW}, "
    "source struct<version:string,connector:string,name:string,ts_ms:bigint,snapshot:string,db:string,"
    "sequence:string,ts_us:bigint,ts_ns:bigint,schema:string,table:string,txId:bigint,lsn:bigint,xmin:bigint>, "
    "op string, ts_ms bigint, ts_us bigint, ts_ns bigint"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.hudi_writer", description=__doc__)
    ap.add_argument("--input", required=True, help="the sink's topics/ folder")
    ap.add_argument("--path", required=True, help="where the Hudi table goes")
    args = ap.parse_args(argv)
    spark = get_session("local")
    events = (
        spark.read.schema(ENVELOPE_SCHEMA).json(f"{args.input}/*/partition=*/*.json")
        .where(F.col("op").isNotNull())  # tombstones (`null` lines) carry no event
        .withColumn("_lsn", F.col("source.lsn"))
    )
    (
        events.write.format("hudi")
        .option("hoodie.table.name", "orders_hudi_writer")
        .option("hoodie.datasource.write.table.type", "COPY_ON_WRITE")
        .option("hoodie.datasource.write.operation", "insert")
        .option("hoodie.datasource.insert.dup.policy", "drop")
        .option("hoodie.datasource.write.recordkey.field", "_lsn")
        .option("hoodie.datasource.write.keygenerator.class", "org.apache.hudi.keygen.NonpartitionedKeyGenerator")
        .option("hoodie.datasource.write.partitionpath.field", "")
        # the lakehouse's metadata-table setting (profiles/profiles.yml), as bronze has it
        .option("hoodie.metadata.enable", spark.conf.get("hoodie.metadata.enable", "true"))
        # the Parquet settings of bronze
        .option("hoodie.parquet.compression.codec", INSERT_SETTINGS["hoodie.parquet.compression.codec"])
        .option("hoodie.parquet.dictionary.enabled", INSERT_SETTINGS["hoodie.parquet.dictionary.enabled"])
        .mode("append")
        .save(args.path)
    )
    print(f"wrote {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
