"""Extract: list Kafka Connect S3-sink files through Hadoop FileSystem and read them with Spark.

Listing goes through the JVM's Hadoop FileSystem so any URI Spark can read
(file:, s3a:, abfs:, hdfs: ...) works the same way as a local folder. Every entry
under the input is either a file to read (SourceFile, possibly with a file-level
error that quarantines it) or skipped by a rule named in SKIP_RULES and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.identifiers import TableNameError
from ingestion import formats
from ingestion.errors import InputNotFoundError, SinkFileError
from ingestion.naming import (
    FILE_NAME_PATTERN,
    parse_file_name,
    partition_of_dir,
    table_for_topic,
)

CATALOG_SCHEMA = (
    "_source_file string, _topic string, _partition int, _start_offset bigint, "
    "_table string, _file_error string, _size bigint, _read boolean"
)
LINES_SCHEMA = "_source_file string, _block bigint, _row_id bigint, line string"

# Kafka's own bounds: partitions are int32, offsets int64.
MAX_PARTITION = 2**31 - 1
MAX_OFFSET = 2**63 - 1
# Files of other partitioners (time, field, custom folders) hold records of one Kafka
# partition in offset order but not every offset in between, so a record's offset is
# not in the files: its position is `start offset * LINE_SLOTS + line index`, unique
# (no two files of a partition share a start offset) and in the order the files allow.
LINE_SLOTS = 2**20
MAX_FOLDER_DEPTH = 8

# Debezium's heartbeat topics (`topic.heartbeat.prefix`, default `__debezium-heartbeat`):
# their records carry the connector's source position, no row change.
HEARTBEAT_PREFIX = "__debezium-heartbeat"
SKIP_HEARTBEAT = "heartbeat"
SKIP_BOOKKEEPING = "bookkeeping"
SKIP_COPYING = "copying"
SKIP_OUTSIDE = "outside layout"
SKIP_AWAITING_KEYS = "awaiting keys"
SKIP_AWAITING_VALUES = "awaiting values"
# How the run summary names each rule's count.
SKIP_RULES = {
    SKIP_HEARTBEAT: "file(s) of Debezium heartbeat topics",
    SKIP_BOOKKEEPING: "Hadoop bookkeeping file(s) or folder(s) (names starting with '.' or '_')",
    SKIP_COPYING: "file(s) still being copied (._COPYING_)",
    SKIP_OUTSIDE: "file(s) or folder(s) outside the sink's layouts (not read)",
    SKIP_AWAITING_KEYS: "newest file(s) of a partition whose record keys file is not written yet (read next run)",
    SKIP_AWAITING_VALUES: "record keys file(s) whose values file is not written (read with it)",
}

HIDDEN_NOT_READ = (
    "not read: Spark's file reader ignores files and folders whose names start with '_' or '.' "
    f"(Hadoop's hidden files); only Debezium heartbeat topics ({HEARTBEAT_PREFIX}*) are skipped by name: "
    "rename the topic folder and its files to land them"
)
# Characters Hadoop path strings give a meaning, which no Kafka topic name holds.
RESERVED_CHARACTERS = ":\\{}"
RESERVED_REASON = (
    "holds {chars}, which Hadoop paths reserve (':' for a URI scheme, '\\' as an escape and as Windows' "
    "separator, '{{' '}}' for glob alternatives) and no Kafka topic name holds "
    "(legal: ASCII letters, digits, '.', '_', '-')"
)
# Hadoop's checksummed file systems cannot even open a path with ':' in a name.
UNOPENABLE = ":"
ACCEPTED = (f"accepted: {formats.accepted()} named {FILE_NAME_PATTERN}, JSON files with their record keys in "
            "<name>.keys.json when the sink writes them")
# The S3 sink's `store.kafka.keys=true` companion of `<name>.json`: its record keys, a
# line per record in the same order (read with its values file: fill_record_keys).
KEYS_SUFFIX = ".keys.json"
# Companion files of the S3 sink, by what follows the start offset in their name.
OTHER_FORMATS = {
    ".keys.": "record keys file (the S3 sink's store.kafka.keys)",
    ".headers.": "record headers file (the S3 sink's store.kafka.headers)",
}
OTHER_FORMAT_NAME = re.compile(r"\+\d+(?P<kind>\.keys\.|\.headers\.)[a-z0-9.]+$")
GLOB_CHARACTERS = re.compile(r"([\[\]{}?*\\])")


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
    read: bool = True  # False: not read at all; one quarantine row stands for the file
    # True: in `<topic>/partition=<n>/` (DefaultPartitioner), offset = start offset + line
    # index; False: another partitioner's folders, position as LINE_SLOTS says.
    contiguous: bool = True
    keys_uri: str | None = None  # its record keys file (KEYS_SUFFIX), as Spark reports it
    keys_read_path: str | None = None  # the same, as Hadoop's Path(String) expects it
    format: str = formats.JSON  # the ingestion.formats name its file name gives
    # What its format's inspect found to read it with (None: nothing to find). Files with
    # the same one are read in one pass.
    reader_schema: str | None = None


@dataclass(frozen=True)
class Skipped:
    """An entry under the input that is not read, and the SKIP_RULES key why."""

    path: str
    rule: str


@dataclass
class Listing:
    files: list[SourceFile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def hidden(name: str) -> bool:
    """Spark's and Hadoop's rule for files they ignore."""
    return name.startswith((".", "_"))


def literal_path(path: str) -> str:
    """`path` escaped for Hadoop's glob syntax, which Spark applies to every path it is given."""
    return GLOB_CHARACTERS.sub(r"\\\1", path)


def _name_error(path_name: str, topic_dir: str, partition_dir: str) -> str | None:
    """Why a name that Hadoop paths reserve characters of cannot be the sink's, or None."""
    found = sorted({c for c in topic_dir + partition_dir + path_name if c in RESERVED_CHARACTERS},
                   key=RESERVED_CHARACTERS.index)
    if not found:
        return None
    error = f"bad file name {path_name!r}: " + RESERVED_REASON.format(chars=", ".join(f"'{c}'" for c in found))
    if any(c in UNOPENABLE for c in found):
        error += "; not read: Hadoop cannot open it"
    return error


def _bounds_error(path_name: str, partition: int | None, start_offset: int | None) -> str | None:
    if partition is not None and partition > MAX_PARTITION:
        return f"bad file name {path_name!r}: partition {partition} is above Kafka's largest partition {MAX_PARTITION}"
    if start_offset is not None and start_offset > MAX_OFFSET:
        return f"bad file name {path_name!r}: start offset {start_offset} is above Kafka's largest offset {MAX_OFFSET}"
    return None


def _other_format(path_name: str) -> str | None:
    """What a companion file of the sink is (it is not read), or None."""
    match = OTHER_FORMAT_NAME.search(path_name)
    if match is None:
        return None
    return f"{OTHER_FORMATS[match['kind']]}: not read yet; {ACCEPTED}"


def _readable(name: str, names: str) -> bool:
    """Whether Spark's text reader can read a file called `name` (in folders whose names
    and its own are `names`) as the JSON lines the run expects."""
    return not hidden(name) and _other_format(name) is None and not any(c in UNOPENABLE for c in names)


def _in_range(number: int | None, largest: int) -> int | None:
    return number if number is not None and number <= largest else None


def _describe(
    path_name: str, topic_dir: str, partition_dir: str | None
) -> tuple[int | None, int | None, str | None]:
    """(partition, start offset, error) for a file from its name, its topic folder and,
    in the default layout, its `partition=<n>` folder (None in other partitioners'
    folders, which say nothing of the partition); numbers Kafka cannot have are None (the
    error says why)."""
    parsed = parse_file_name(path_name)
    dir_partition = None if partition_dir is None else _in_range(partition_of_dir(partition_dir), MAX_PARTITION)
    where = f"{topic_dir}/partition=<n>" if partition_dir is not None else f"{topic_dir}/ or its folders"
    expected = f"expected {FILE_NAME_PATTERN} inside {where}"
    reserved = _name_error(path_name, topic_dir, partition_dir or "")
    if parsed is None:
        return dir_partition, None, reserved or _other_format(path_name) or f"bad file name {path_name!r}: {expected}"
    bounds = _bounds_error(path_name, parsed.partition, parsed.start_offset)
    if bounds is None and partition_dir is None and parsed.start_offset >= (MAX_OFFSET + 1) // LINE_SLOTS:
        bounds = (f"bad file name {path_name!r}: start offset {parsed.start_offset} is too large for a file "
                  f"outside partition=<n> folders, whose positions are start offset * {LINE_SLOTS} + line "
                  f"(largest: {(MAX_OFFSET + 1) // LINE_SLOTS - 1})")
    if bounds is not None:
        return _in_range(parsed.partition, MAX_PARTITION), None, bounds
    folder_partition = parsed.partition if partition_dir is None else partition_of_dir(partition_dir)
    if parsed.topic != topic_dir or parsed.partition != folder_partition:
        return dir_partition if partition_dir is not None else parsed.partition, None, reserved or (
            f"bad file name {path_name!r}: topic/partition do not match its folder "
            f"{topic_dir}/{partition_dir or '...'} ({expected})"
        )
    return parsed.partition, parsed.start_offset, reserved


def _source_file(jvm: Any, status: Any, topic: str, partition_dir: str | None, folders: str) -> SourceFile:
    """The SourceFile of a listed file in <topic>/<partition_dir>/ (partition_dir None:
    in other partitioners' folders, named `folders`)."""
    # Parsed again from its text, as Spark does with the paths it reads: a listing's
    # `file:///x` becomes `file:/x`, the form `_metadata.file_path` reports.
    path = jvm.org.apache.hadoop.fs.Path(status.getPath().toString())
    name = path.getName()
    partition, start_offset, error = _describe(name, topic, partition_dir)
    read = _readable(name, topic + folders + name)
    parsed = parse_file_name(name)
    kind = parsed.format if parsed is not None else formats.JSON
    if hidden(name):
        error = error or HIDDEN_NOT_READ
    if error is None and status.getLen() == 0:
        error = "empty file (0 bytes): the S3 sink never writes one, so its upload may have failed"
    try:
        table: str | None = table_for_topic(topic)
    except TableNameError as exc:
        table = None
        error = error or f"topic {topic!r} cannot be mapped to a bronze table name: {exc}"
    return SourceFile(
        uri=path.toUri().toString(),
        read_path=literal_path(path.toString()),
        topic=topic,
        partition=partition,
        start_offset=start_offset,
        table=table,
        error=error,
        size=int(status.getLen()),
        read=read,
        contiguous=partition_dir is not None,
        format=kind,
    )


def _skip_rule(name: str, is_file: bool, topic: str | None) -> str:
    """The SKIP_RULES key of an entry that is not a sink file of `topic`'s partition folders."""
    if hidden(name):
        return SKIP_BOOKKEEPING
    if topic is not None and topic.startswith(HEARTBEAT_PREFIX):
        return SKIP_HEARTBEAT
    if is_file and name.endswith("._COPYING_"):
        return SKIP_COPYING
    return SKIP_OUTSIDE


def _keys_name(name: str) -> str | None:
    """The values file name a record keys file belongs to, or None for other names."""
    if not name.endswith(KEYS_SUFFIX):
        return None
    values = name[: -len(KEYS_SUFFIX)] + ".json"
    return values if parse_file_name(values) is not None else None


def _list_partition(jvm: Any, fs: Any, folder: Any, topic: str, listing: Listing,
                    partition_dir: str | None = None, depth: int = 0) -> None:
    """The files of one folder: a `partition=<n>` folder (`partition_dir` its name), or a
    folder `depth` levels down another partitioner's tree under the topic, whose
    subfolders are listed too."""
    values: list[Any] = []
    keys: dict[str, Any] = {}  # values file name -> status of its keys file
    for status in fs.listStatus(folder):
        name = status.getPath().getName()
        parsed = parse_file_name(name)
        own = parsed is not None and parsed.topic == topic
        if (status.isDirectory() and partition_dir is None and not hidden(name)
                and not topic.startswith(HEARTBEAT_PREFIX) and depth < MAX_FOLDER_DEPTH):
            _list_partition(jvm, fs, status.getPath(), topic, listing, None, depth + 1)
        elif status.isDirectory() or (hidden(name) and not own) or name.endswith("._COPYING_"):
            listing.skipped.append(Skipped(status.getPath().toString(), _skip_rule(name, status.isFile(), topic)))
        elif topic.startswith(HEARTBEAT_PREFIX):
            listing.skipped.append(Skipped(status.getPath().toString(), SKIP_HEARTBEAT))
        elif (values_name := _keys_name(name)) is not None and not hidden(name):
            keys[values_name] = status
        else:
            values.append(status)
    names = {status.getPath().getName() for status in values}
    for name, status in keys.items():
        if name not in names:  # the sink writes the values file first: it may be on its way
            listing.skipped.append(Skipped(status.getPath().toString(), SKIP_AWAITING_VALUES))
    newest = _newest_unkeyed(names, set(keys))
    for status in values:
        name = status.getPath().getName()
        if name == newest:
            listing.skipped.append(Skipped(status.getPath().toString(), SKIP_AWAITING_KEYS))
            continue
        source = _source_file(jvm, status, topic, partition_dir, _folders_below_topic(folder, depth))
        if name in keys:
            path = jvm.org.apache.hadoop.fs.Path(keys[name].getPath().toString())
            source = replace(source, keys_uri=path.toUri().toString(), keys_read_path=literal_path(path.toString()))
        listing.files.append(source)


def _folders_below_topic(folder: Any, depth: int) -> str:
    """The names of the `depth` folders from the topic's folder down to `folder` (a
    partition folder: its own name), as one string."""
    names = []
    for _ in range(max(depth, 1)):
        names.append(folder.getName())
        folder = folder.getParent()
    return "/".join(reversed(names))


def _newest_unkeyed(values: set[str], keyed: set[str]) -> str | None:
    """The values file the sink may still be writing the keys file of: the partition's
    newest (highest start offset), when it has none and an older file of the partition
    has one. Older files without keys come from before `store.kafka.keys` was on: read."""
    offsets = {name: parsed.start_offset for name in values if (parsed := parse_file_name(name)) is not None}
    if not offsets:
        return None
    newest = max(offsets, key=lambda name: offsets[name])
    older_keyed = any(offsets[name] < offsets[newest] for name in keyed if name in offsets)
    return newest if newest not in keyed and older_keyed else None


def list_sink(spark: SparkSession, input_uri: str, topics: str | None = None) -> Listing:
    """Every entry under `input_uri` (the `topics/` folder): the sink files of the topics
    whose folder name fully matches the regex `topics` (like Kafka Connect `topics.regex`;
    all when None), and what is skipped by which rule. Folders are listed one level at a
    time, not globbed: a glob would read names as patterns."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    root = jvm.org.apache.hadoop.fs.Path(input_uri)
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    if not fs.exists(root):
        raise InputNotFoundError(f"input {input_uri!r} does not exist")
    topic_filter = re.compile(topics) if topics else None
    listing = Listing()
    for topic_status in fs.listStatus(root):
        topic = topic_status.getPath().getName()
        if topic_filter is not None and not topic_filter.fullmatch(topic):
            continue
        if not topic_status.isDirectory():
            listing.skipped.append(Skipped(topic_status.getPath().toString(), _skip_rule(topic, True, None)))
            continue
        for status in fs.listStatus(topic_status.getPath()):
            name = status.getPath().getName()
            if status.isDirectory() and name.startswith("partition="):
                _list_partition(jvm, fs, status.getPath(), topic, listing, name)
            elif status.isDirectory() and not hidden(name) and not topic.startswith(HEARTBEAT_PREFIX):
                # another partitioner: time (year=/month=/...), field (<field>=<value>/), custom
                _list_partition(jvm, fs, status.getPath(), topic, listing, None, 1)
            else:
                listing.skipped.append(Skipped(status.getPath().toString(), _skip_rule(name, status.isFile(), topic)))
    listing.files.sort(key=lambda f: f.uri)
    return listing


def first_position(f: SourceFile) -> int | None:
    """The bronze `_offset` of the file's first line (see LINE_SLOTS)."""
    if f.start_offset is None:
        return None
    return f.start_offset if f.contiguous else f.start_offset * LINE_SLOTS


def within_offset_range(spark: SparkSession, files: list[SourceFile]) -> list[SourceFile]:
    """`files`, those whose last offset would pass Kafka's largest offset with a
    file-level error (and no start offset, so no offset wraps around). A file has at most
    as many lines as bytes, so only files starting within their size of the largest
    offset are counted, in one small job."""
    suspects = [f for f in files if f.read and f.error is None and f.start_offset is not None
                and (f.start_offset + f.size > MAX_OFFSET or (not f.contiguous and f.size >= LINE_SLOTS))]
    if not suspects:
        return files
    lines = {r["_source_file"]: r["count"] for r in read_lines(spark, suspects).groupBy("_source_file").count().collect()}
    return [_offset_range_checked(f, lines.get(f.uri, 0)) if f in suspects else f for f in files]


def _offset_range_checked(f: SourceFile, lines: int) -> SourceFile:
    name = re.sub(r"\\(.)", r"\1", f.read_path).rsplit("/", 1)[-1]
    if f.start_offset is not None and not f.contiguous and lines > LINE_SLOTS:
        return replace(f, start_offset=None, error=(
            f"too many records: {name!r} has {lines} line(s); a file outside partition=<n> folders can "
            f"have at most {LINE_SLOTS} (positions are start offset * {LINE_SLOTS} + line): lower the "
            "sink's flush.size"))
    if f.start_offset is None or not f.contiguous or f.start_offset + lines - 1 <= MAX_OFFSET:
        return f
    return replace(f, start_offset=None, error=(
        f"offsets out of range: {name!r} has {lines} line(s) from start offset "
        f"{f.start_offset}, which passes Kafka's largest offset {MAX_OFFSET}"))


def share_offsets(files: list[SourceFile], lines: Mapping[str, int]) -> bool:
    """Whether two readable files of one topic partition cover a common offset, file
    `f` covering [start offset, start offset + its `lines[f.uri]`). The S3 sink writes
    disjoint ranges; overlaps come from a range written again under another start
    offset (e.g. by a sink restarted with other flush settings) or a copied file."""
    ranges = sorted(
        (f.topic, f.partition, first, first + lines.get(f.uri, 0))
        for f in files
        if f.error is None and f.partition is not None and (first := first_position(f)) is not None
    )
    # Sorted by start: a range that overlaps any later one overlaps the next one.
    return any(a[:2] == b[:2] and b[2] < a[3] for a, b in zip(ranges, ranges[1:]))


def catalog_frame(spark: SparkSession, files: list[SourceFile]) -> DataFrame:
    """The file list as a small DataFrame, joined to the lines by `_source_file`."""
    rows = [(f.uri, f.topic, f.partition, f.start_offset, f.table, f.error, f.size, f.read) for f in files]
    return spark.createDataFrame(rows, CATALOG_SCHEMA)


def read_lines(spark: SparkSession, files: list[SourceFile]) -> DataFrame:
    """One row per line of the files to read (formats.base.SinkFormat.read_lines):
    `_source_file` (URI as Spark reports it), `_block` (start byte of the file split the
    line was read from), `_row_id` (rising by one from line to line inside a split) and
    the `line`, the JSON JsonConverter writes for the record. Files of one format and
    reader schema (inspect) are read together."""
    groups: dict[tuple[str, str], list[str]] = {}
    for f in files:
        if f.read:
            if f.reader_schema is None and formats.get(f.format).needs_inspection:
                raise ValueError(f"{f.uri}: {f.format} file not inspected (extract.inspect)")
            groups.setdefault((f.format, f.reader_schema or ""), []).append(f.read_path)
    frames = [formats.get(kind).read_lines(spark, schema or None, paths) for (kind, schema), paths in sorted(groups.items())]
    if not frames:
        return spark.createDataFrame([], LINES_SCHEMA)
    lines = frames[0]
    for frame in frames[1:]:
        lines = lines.unionByName(frame)
    return lines


def inspect(spark: SparkSession, files: list[SourceFile]) -> list[SourceFile]:
    """`files`, each one to read with the reader schema its format found
    (SinkFormat.inspect) or, when it cannot be read (not of its format, cut short, a codec
    Spark cannot decode), not read and with an error naming the file and what was found:
    its one quarantine row stands for it, and the run goes on. Reads headers and last
    bytes, not records."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    checked = []
    for f in files:
        kind = formats.get(f.format)
        if not f.read or not kind.needs_inspection:
            checked.append(f)
            continue
        path = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(f.uri))
        try:
            checked.append(replace(f, reader_schema=kind.inspect(spark, path, path.getName(), f.size)))
        except SinkFileError as exc:
            # No offset is claimed for records that were not read.
            checked.append(replace(f, read=False, start_offset=None, error=f.error or str(exc)))
    return checked


def read_key_lines(spark: SparkSession, files: list[SourceFile]) -> DataFrame:
    """The lines of the record keys files of `files` as read_lines gives them, with
    `_source_file` the URI of the values file each belongs to."""
    keyed = [f for f in files if f.read and f.keys_read_path is not None]
    if not keyed:
        return spark.createDataFrame([], LINES_SCHEMA)
    owners = spark.createDataFrame([(f.keys_uri, f.uri) for f in keyed], "_keys_file string, _values_file string")
    lines = read_lines(spark, [replace(f, read_path=f.keys_read_path) for f in keyed])
    return (
        lines.join(F.broadcast(owners), lines["_source_file"] == owners["_keys_file"])
        .select(F.col("_values_file").alias("_source_file"), "_block", "_row_id", "line")
    )
