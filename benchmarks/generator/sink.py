"""Write a stream as the Kafka Connect S3 sink lays it out, cut into segments.

    <out>/<segment>/topics/<topic>/partition=<p>/<topic>+<p>+<startOffset>.json

A segment is a consecutive slice of the stream (e.g. `history`, then `batch`): offsets
and LSNs go on across segments, as when the sink keeps running between two loads.
Records go to partitions as Kafka's default partitioner puts them (murmur2 of the key).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence, TextIO

from testdata.debezium import murmur2

from .encode import ENVELOPE, SHAPES, key_json, record_lines, schema_json
from .stream import TOPIC, StreamConfig, events

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Layout:
    shape: str = ENVELOPE
    wrapped: bool = False  # JsonConverter schemas.enable=true: {"schema":..., "payload":...}
    partitions: int = 2
    records_per_file: int = 100_000  # the sink's flush.size

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"shape must be one of {', '.join(SHAPES)} (got {self.shape!r})")
        if self.partitions < 1 or self.records_per_file < 1:
            raise ValueError("partitions and records_per_file must be >= 1")


def partition_of(key: int, partitions: int) -> int:
    if partitions == 1:
        return 0
    return (murmur2(key_json(key).encode("ascii")) & 0x7FFFFFFF) % partitions


class _PartitionWriter:
    """One partition's files of one segment: a new file every records_per_file records."""

    def __init__(self, root: Path, partition: int, next_offset: int, per_file: int) -> None:
        self.folder = root / "topics" / TOPIC / f"partition={partition}"
        self.partition = partition
        self.offset = next_offset
        self.per_file = per_file
        self.in_file = 0
        self.handle: TextIO | None = None

    def write(self, line: str) -> None:
        if self.handle is None or self.in_file == self.per_file:
            self.close()
            self.folder.mkdir(parents=True, exist_ok=True)
            name = f"{TOPIC}+{self.partition}+{self.offset:010d}.json"
            self.handle = open(self.folder / name, "w", encoding="ascii", buffering=1 << 20)
            self.in_file = 0
        self.handle.write(line)
        self.handle.write("\n")
        self.in_file += 1
        self.offset += 1

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class Record(NamedTuple):
    """One Kafka record of the stream: where it goes and what it holds."""

    segment: str
    partition: int
    key: int  # the row's primary key (key_json gives the record key)
    line: str  # the record value as the S3 sink writes it; TOMBSTONE for a null value


def check_segments(config: StreamConfig, segments: Sequence[tuple[str, int]]) -> None:
    if sum(n for _, n in segments) != config.events:
        raise ValueError(f"segments add up to {sum(n for _, n in segments)} events, the config has {config.events}")


def stream_records(
    config: StreamConfig, layout: Layout, segments: Sequence[tuple[str, int]], counts: dict[str, dict[str, int]]
) -> Iterator[Record]:
    """Every record of the stream in order, segment by segment. Fills `counts` as it goes:
    per segment its events by op, its records and the keys alive after it (the row count
    silver must have), complete once the iterator is exhausted."""
    schema = schema_json(layout.shape) if layout.wrapped else None
    stream: Iterator = events(config)
    live = 0
    for name, n in segments:
        ops = counts.setdefault(name, {"r": 0, "c": 0, "u": 0, "d": 0, "records": 0, "live_keys_after": 0})
        for _ in range(n):
            ev = next(stream)
            partition = partition_of(ev.key, layout.partitions)
            for line in record_lines(ev, layout.shape, schema, config.row_bytes):
                yield Record(name, partition, ev.key, line)
                ops["records"] += 1
            ops[ev.op] += 1
            live += {"r": 1, "c": 1, "u": 0, "d": -1}[ev.op]
        ops["live_keys_after"] = live


def write_segments(config: StreamConfig, layout: Layout, segments: Sequence[tuple[str, int]], out: Path) -> dict:
    """Write the stream's events in `segments` ((name, events) in order; their events
    add up to config.events) under `out`; returns and writes the manifest. Skips the
    work when `out` already holds a manifest of the same config, layout and segments."""
    check_segments(config, segments)
    wanted = {"config": asdict(config), "layout": asdict(layout), "segments": [list(s) for s in segments], "topic": TOPIC}
    manifest_path = out / MANIFEST
    if manifest_path.exists():
        existing = json.loads(manifest_path.read_text())
        if {k: existing.get(k) for k in wanted} == wanted:
            return existing
    manifest_path.unlink(missing_ok=True)  # written last: a half-written folder has none

    for name, _ in segments:
        shutil.rmtree(out / name, ignore_errors=True)
    next_offsets = [0] * layout.partitions
    counts: dict[str, dict[str, int]] = {}
    writers: list[_PartitionWriter] = []
    current = None
    for record in stream_records(config, layout, segments, counts):
        if record.segment != current:  # offsets go on across segments
            for w in writers:
                w.close()
                next_offsets[w.partition] = w.offset
            current = record.segment
            writers = [_PartitionWriter(out / current, p, next_offsets[p], layout.records_per_file)
                       for p in range(layout.partitions)]
        writers[record.partition].write(record.line)
    for w in writers:
        w.close()
    manifest = {**wanted, "counts": counts}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
