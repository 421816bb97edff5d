"""JsonFormat: a record value per line, as JsonConverter writes it."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion.formats.base import SinkFormat, position_columns


class JsonLines(SinkFormat):
    name = "json"
    extension = r"\.json"
    described = "record values as JSON lines (JsonFormat)"
    shown = ".json"
    stored_as_lines = True

    def read_lines(self, spark: SparkSession, reader_schema: str | None, paths: list[str]) -> DataFrame:
        r"""Read splittably, each line as stored (with any `\r`): splitting only at `\n`
        (not at a lone `\r`, Hadoop's default) keeps the lines the S3 sink wrote, so that
        line index = offset - start offset (transform.number_lines)."""
        return spark.read.option("lineSep", "\n").text(paths).select(*position_columns(), F.col("value").alias("line"))
