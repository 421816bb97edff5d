"""What every sink file format provides: its file name, how a file is checked, how it is read.

A format reads its files as change-event lines: the JSON Kafka Connect's JsonConverter
writes for a record (ingestion.transform parses every format from there), each with its
place in the files (`_source_file`, `_block`, `_row_id`; extract.read_lines).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F


class SinkFormat(ABC):
    """One Kafka Connect S3 sink format (`format.class`)."""

    name: ClassVar[str]  # SourceFile.format, ParsedFileName.format
    # The end of a values file's name, a regular expression (at most one group, `codec`).
    extension: ClassVar[str]
    # How the list of accepted inputs names it, and how a file name's end is shown.
    described: ClassVar[str]
    shown: ClassVar[str]
    # Its lines are the file's own bytes (one per `\n`), not records rendered as JSON: the
    # file's size weighs its share of a run, and a last line without `\n` can be told.
    stored_as_lines: ClassVar[bool] = False
    # Its files are read with a schema found in each (inspect): files without one are not read.
    needs_inspection: ClassVar[bool] = False

    def inspect(self, spark: SparkSession, path: Any, name: str, size: int) -> str | None:
        """The reader schema of the file at Hadoop `path` (None: the format needs none);
        ingestion.errors.SinkFileError when the file is not one of this format or cannot be
        read whole. Reads its header and last bytes, not its records."""
        return None

    @abstractmethod
    def read_lines(self, spark: SparkSession, reader_schema: str | None, paths: list[str]) -> DataFrame:
        """The lines of files (literal paths) that share `reader_schema`: `_source_file`,
        `_block`, `_row_id` (position_columns) and `line`, the record's JsonConverter JSON."""


def position_columns() -> list[Column]:
    """Where a line was read: the file (URI as Spark reports it), the start byte of its
    split, and a number rising by one from line to line inside the split."""
    return [
        F.col("_metadata.file_path").alias("_source_file"),
        F.col("_metadata.file_block_start").alias("_block"),
        # (partition id << 33) + row number in the partition; a partition reads its
        # splits one after the other, so it rises by one inside a split.
        F.monotonically_increasing_id().alias("_row_id"),
    ]


def read_range(spark: SparkSession, path: Any, position: int, length: int) -> bytes:
    """`length` bytes of the file at Hadoop `path` from `position`."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    stream = path.getFileSystem(spark._jsc.hadoopConfiguration()).open(path)  # type: ignore[attr-defined]
    try:
        stream.seek(position)
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream, length))
    finally:
        stream.close()
