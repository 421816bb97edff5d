"""Extract: list Kafka Connect S3-sink files through Hadoop FileSystem and read them with Spark.

Listing goes through the JVM's Hadoop FileSystem so any URI Spark can read
(file:, s3a:, abfs:, hdfs: ...) works the same way as a local folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion.errors import InputNotFoundError, TableNameError
from ingestion.naming import FILE_NAME_PATTERN, parse_file_name, partition_of_dir, table_for_topic

# <input>/<topic>/partition=<n>/<file>
FILE_GLOB = "*/partition=*/*"

CATALOG_SCHEMA = (
    "_source_file string, _topic string, _partition int, _start_offset bigint, "
    "_table string, _file_error string, _size bigint"
)


@dataclass(frozen=True)
class SourceFile:
    """One sink file and what its location says about the records in it."""

    uri: str  # as Spark reports it in `_metadata.file_path` (URI-encoded)
    read_path: str  # as Hadoop's Path(String) expects it (not encoded)
    topic: str
    partition: int | None
    start_offset: int | None
    table: str | None
    error: str | None  # set when every line of the file must go to quarantine
    size: int = 0  # bytes, as listed


def _describe(path_name: str, topic_dir: str, partition_dir: str) -> tuple[int | None, int | None, str | None]:
    """(partition, start offset, error) for a file from its name and its two parent folders."""
    parsed = parse_file_name(path_name)
    dir_partition = partition_of_dir(partition_dir)
    expected = f"expected {FILE_NAME_PATTERN} inside {topic_dir}/partition=<n>"
    if parsed is None:
        return dir_partition, None, f"bad file name {path_name!r}: {expected}"
    if parsed.topic != topic_dir or parsed.partition != dir_partition:
        return dir_partition, None, (
            f"bad file name {path_name!r}: topic/partition do not match its folder "
            f"{topic_dir}/{partition_dir} ({expected})"
        )
    return parsed.partition, parsed.start_offset, None


def list_source_files(spark: SparkSession, input_uri: str, topics: str | None = None) -> list[SourceFile]:
    """All sink files under `input_uri` (the `topics/` folder), optionally only topics
    whose folder name fully matches the regex `topics` (like Kafka Connect `topics.regex`)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    root = jvm.org.apache.hadoop.fs.Path(input_uri)
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    if not fs.exists(root):
        raise InputNotFoundError(f"input {input_uri!r} does not exist")
    topic_filter = re.compile(topics) if topics else None
    statuses = fs.globStatus(jvm.org.apache.hadoop.fs.Path(root, FILE_GLOB)) or []
    files: list[SourceFile] = []
    for status in statuses:
        if not status.isFile():
            continue
        path = status.getPath()
        name = path.getName()
        if name.startswith((".", "_")):  # Hadoop convention: hidden/bookkeeping files (.crc, _SUCCESS)
            continue
        partition_dir = path.getParent().getName()
        topic = path.getParent().getParent().getName()
        if topic_filter is not None and not topic_filter.fullmatch(topic):
            continue
        partition, start_offset, error = _describe(name, topic, partition_dir)
        if error is None and status.getLen() == 0:
            error = "empty file (0 bytes): the S3 sink never writes one, so its upload may have failed"
        try:
            table: str | None = table_for_topic(topic)
        except TableNameError as exc:
            table = None
            error = error or f"topic {topic!r} cannot be mapped to a bronze table name: {exc}"
        files.append(
            SourceFile(
                uri=path.toUri().toString(),
                read_path=path.toString(),
                topic=topic,
                partition=partition,
                start_offset=start_offset,
                table=table,
                error=error,
                size=int(status.getLen()),
            )
        )
    return sorted(files, key=lambda f: f.uri)


def share_offsets(files: list[SourceFile], lines: Mapping[str, int]) -> bool:
    """Whether two readable files of one topic partition cover a common offset, file
    `f` covering [start offset, start offset + its `lines[f.uri]`). The S3 sink writes
    disjoint ranges; overlaps come from a range written again under another start
    offset (e.g. by a sink restarted with other flush settings) or a copied file."""
    ranges = sorted(
        (f.topic, f.partition, f.start_offset, f.start_offset + lines.get(f.uri, 0))
        for f in files
        if f.error is None and f.partition is not None and f.start_offset is not None
    )
    # Sorted by start: a range that overlaps any later one overlaps the next one.
    return any(a[:2] == b[:2] and b[2] < a[3] for a, b in zip(ranges, ranges[1:]))


def catalog_frame(spark: SparkSession, files: list[SourceFile]) -> DataFrame:
    """The file list as a small DataFrame, joined to the lines by `_source_file`."""
    rows = [(f.uri, f.topic, f.partition, f.start_offset, f.table, f.error, f.size) for f in files]
    return spark.createDataFrame(rows, CATALOG_SCHEMA)


def read_lines(spark: SparkSession, files: list[SourceFile]) -> DataFrame:
    r"""One row per line, read splittably: `_source_file` (URI as Spark reports it),
    `_block` (start byte of the file split the line was read from), `_row_id` (rising by
    one from line to line inside a split) and the `line` as stored, with any `\r`.

    Splitting only at `\n` (not at a lone `\r`, Hadoop's default) keeps the lines the S3
    sink wrote, so that line index = offset - start offset (transform.number_lines)."""
    return (
        spark.read.option("lineSep", "\n").text([f.read_path for f in files])
        .select(
            F.col("_metadata.file_path").alias("_source_file"),
            F.col("_metadata.file_block_start").alias("_block"),
            # (partition id << 33) + row number in the partition; a partition reads its
            # splits one after the other, so it rises by one inside a split.
            F.monotonically_increasing_id().alias("_row_id"),
            F.col("value").alias("line"),
        )
    )
