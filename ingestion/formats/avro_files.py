"""AvroFormat: Avro object container files of Connect's Avro records (AvroData)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ingestion import avro
from ingestion.errors import SinkFileError
from ingestion.formats.base import SinkFormat, position_columns, read_range

# Avro headers are read in one piece of this size, or whole when larger (a writer schema
# of a wide table).
HEAD_BYTES = 64 * 1024


class AvroFiles(SinkFormat):
    name = "avro"
    extension = r"\.avro"
    described = "Avro container files (AvroFormat)"
    shown = ".avro"
    needs_inspection = True

    def inspect(self, spark: SparkSession, path: Any, name: str, size: int) -> str:
        """The writer schema without logical types (avro.without_logical_types), so the
        records come out in JsonConverter's encodings; SinkFileError if the file has no
        Avro header, or is cut short."""
        head = read_range(spark, path, 0, min(size, HEAD_BYTES))
        try:
            header = avro.container_header(head, name)
        except IndexError:
            if size <= len(head):
                raise SinkFileError(f"{name}: cut short inside its Avro header ({size} bytes)") from None
            try:
                header = avro.container_header(read_range(spark, path, 0, size), name)
            except IndexError:
                raise SinkFileError(f"{name}: cut short inside its Avro header ({size} bytes)") from None
        # Every block ends with the sync marker, so a whole file ends with it.
        tail = read_range(spark, path, size - avro.SYNC_BYTES, avro.SYNC_BYTES) if size > header.length else header.sync
        if size > header.length and tail != header.sync:
            raise SinkFileError(
                f"{name}: cut short or damaged: an Avro container file ends with its sync marker "
                f"{header.sync.hex()}, this one ends with {tail.hex()} ({size} bytes)")
        return avro.without_logical_types(header.schema)

    def read_lines(self, spark: SparkSession, reader_schema: str | None, paths: list[str]) -> DataFrame:
        records = spark.read.format("avro").option("avroSchema", reader_schema).load(paths)
        return records.select(*position_columns(), avro.jsonconverter_line(records).alias("line"))
