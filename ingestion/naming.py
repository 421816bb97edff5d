"""Topic -> table names and the Kafka Connect S3 file-name pattern."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from core.identifiers import TableNameError, validate_identifier
from ingestion import formats

# Kafka Connect S3 sink (DefaultPartitioner): <topic>+<kafkaPartition>+<startOffset><extension>,
# the extension its format writes (ingestion.formats).
FILE_NAME = re.compile(r"^(?P<topic>.+)\+(?P<partition>\d+)\+(?P<offset>\d+)" + formats.extension_pattern() + "$")
FILE_NAME_PATTERN = formats.file_name_pattern()
PARTITION_DIR = re.compile(r"^partition=(?P<partition>\d+)$")


def table_for_topic(topic: str) -> str:
    """`pagila.public.film_actor` -> `pagila_public_film_actor` (lower case, other chars -> `_`)."""
    table = re.sub(r"[^a-z0-9_]", "_", topic.lower())
    return validate_identifier(table, "table name")


def table_collisions(topics: Iterable[str]) -> dict[str, str]:
    """topic -> error for topics that map to the same bronze table as another topic
    (`a.b` and `a_b` both give `a_b`): their events must not mix in one change log."""
    by_table: dict[str, set[str]] = {}
    for topic in topics:
        try:
            by_table.setdefault(table_for_topic(topic), set()).add(topic)
        except TableNameError:
            continue  # reported on its own
    errors = {}
    for table, names in by_table.items():
        if len(names) > 1:
            listed = ", ".join(repr(n) for n in sorted(names))
            for topic in names:
                errors[topic] = (f"topics {listed} all map to bronze table {table!r}; "
                                 f"land them into separate bronze schemas (--bronze-schema) or rename a topic")
    return errors


@dataclass(frozen=True)
class ParsedFileName:
    topic: str
    partition: int
    start_offset: int
    format: str = formats.JSON  # ingestion.formats: the format's name
    codec: str | None = None  # a format that names its codec (Parquet): its extension ("" for none)


def parse_file_name(name: str) -> ParsedFileName | None:
    """The topic, partition and first offset encoded in a sink file name, or None."""
    match = FILE_NAME.match(name)
    if match is None:
        return None
    kind = next(f for f in formats.FORMATS if match[f.name] is not None)
    codec = (match["codec"] or "") if "codec" in re.compile(kind.extension).groupindex else None
    return ParsedFileName(match["topic"], int(match["partition"]), int(match["offset"]), kind.name, codec)


def partition_of_dir(name: str) -> int | None:
    match = PARTITION_DIR.match(name)
    return int(match["partition"]) if match else None
