"""Random Debezium change streams for the property tests, as hypothesis strategies.

A stream is what one source table sends through Debezium and the Kafka Connect S3 sink:
source transactions (inserts, updates, deletes, re-inserts after a delete, primary-key
changes) over a handful of keys, encoded as Debezium record values of one shape, spread
over Kafka partitions by key, with at-least-once redelivery (exact copies of earlier
records at new offsets), cut into sink files, and the files landed in batches, some
files late (a batch lands a file of older offsets after newer ones).

Two sources: PostgreSQL `pagila.public.actor` (ordered by LSN; a primary-key change is
a delete and a create at one LSN) and MariaDB `mariadb.movies_db.movies` (ordered by
binlog file, position, row; the binlog rotates; `country` is added by ALTER TABLE
part way). Every change of a transaction shares its `ts_ms`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

KEYS = 4  # a handful of keys: collisions between changes are the point
NAMES = ["ANNA", "BOB", "CHEN", "DANA", "ÉMILE", "O'HARA"]
EPOCH_MS = 1_700_000_000_000


@dataclass(frozen=True)
class Source:
    table: str  # the silver model
    topic: str
    primary_key: str
    postgres: bool  # else MariaDB


ACTOR = Source("actor", "pagila.public.actor", "actor_id", postgres=True)
MOVIES = Source("movies", "mariadb.movies_db.movies", "movie_id", postgres=False)
SOURCES = [ACTOR, MOVIES]


@dataclass
class SinkFile:
    partition: int
    start_offset: int
    lines: list[str]

    def name(self, topic: str) -> str:
        return f"{topic}+{self.partition}+{self.start_offset:010d}.json"


@dataclass
class Stream:
    source: Source
    shape: str  # envelope | flattened
    wrapped: bool  # JsonConverter {schema, payload}
    partitions: int
    batches: list[list[SinkFile]]
    transactions: int = 0
    changes: int = 0
    duplicates: int = 0
    late_files: int = 0

    def write_batch(self, index: int, topics_dir: Path) -> Path:
        """Land batch `index` under `topics_dir` in the S3 sink layout; returns its folder."""
        for f in self.batches[index]:
            folder = topics_dir / self.source.topic / f"partition={f.partition}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f.name(self.source.topic)).write_text("".join(line + "\n" for line in f.lines))
        return topics_dir

    def describe(self) -> str:
        files = sum(len(b) for b in self.batches)
        return (f"{self.source.topic} {self.shape}{' wrapped' if self.wrapped else ''}, "
                f"{self.partitions} partition(s), {self.transactions} transactions, {self.changes} changes, "
                f"{self.duplicates} redelivered records, {files} files in {len(self.batches)} batches, "
                f"{self.late_files} late file(s)")


class _Position:
    """The source log position: a PostgreSQL LSN, or a MariaDB binlog (file, pos, row)."""

    def __init__(self, postgres: bool):
        self.postgres = postgres
        self.lsn = 23_000_000
        self.file_no, self.pos, self.row = 3, 1_000, 0

    def next_statement(self, step: int) -> None:
        if self.postgres:
            self.lsn += step
        else:
            self.pos += step
            self.row = 0

    def next_row(self) -> None:
        """The next row of one MariaDB rows event (same file and position)."""
        self.row += 1

    def rotate(self) -> None:
        self.file_no += 1
        self.pos, self.row = 4, 0

    def fields(self) -> dict:
        if self.postgres:
            return {"lsn": self.lsn}
        return {"file": f"mariadb-bin.{self.file_no:06d}", "pos": self.pos, "row": self.row}


def _record(source: Source, shape: str, op: str, before: dict | None, after: dict | None,
            position: dict, ts_ms: int, tx: int, snapshot: str) -> dict:
    if shape == "envelope":
        if source.postgres:
            src = {"version": "3.5.0.Final", "connector": "postgresql", "name": "pagila", "ts_ms": ts_ms,
                   "snapshot": snapshot, "db": "pagila", "schema": "public", "table": "actor",
                   "txId": 700 + tx, "xmin": None, **position}
        else:
            src = {"version": "3.5.0.Final", "connector": "mariadb", "name": "mariadb", "ts_ms": ts_ms,
                   "snapshot": snapshot, "db": "movies_db", "table": "movies", "server_id": 1,
                   "gtid": f"0-1-{tx}", "thread": None, "query": None, **position}
        return {"before": before, "after": after, "source": src, "transaction": None, "op": op,
                "ts_ms": ts_ms + 7}
    deleted = op == "d"
    row = dict(before if deleted else after)
    row.update({"__op": op, "__table": source.table, "__source_ts_ms": ts_ms,
                "__deleted": "true" if deleted else "false"})
    row.update({f"__{k}": v for k, v in position.items()})
    return row


def _wrap(value: dict | None, wrapped: bool) -> str:
    if value is None:
        return "null"
    if wrapped:  # the converter's schema is not read; its presence is what matters
        value = {"schema": {"type": "struct", "optional": False, "name": "Value", "fields": []}, "payload": value}
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@st.composite
def change_streams(draw, max_transactions: int = 8, max_batches: int = 4) -> Stream:
    source = draw(st.sampled_from(SOURCES), label="source")
    shape = draw(st.sampled_from(["envelope", "flattened"]), label="shape")
    wrapped = draw(st.booleans(), label="wrapped")
    partitions = draw(st.integers(1, 2), label="partitions")
    tombstones = draw(st.booleans(), label="kafka tombstones after deletes")
    pos = _Position(source.postgres)
    # MariaDB: `country` exists from this transaction on (ALTER TABLE ADD COLUMN)
    country_from = draw(st.integers(0, max_transactions), label="country added at")

    state: dict[int, dict] = {}
    records: list[tuple[int, str]] = []  # (key, line) in source order
    stream = Stream(source, shape, wrapped, partitions, [])

    def new_row(key: int, tx: int, ts_ms: int) -> dict:
        if source.postgres:
            return {"actor_id": key, "first_name": draw(st.sampled_from(NAMES)),
                    "last_name": draw(st.one_of(st.none(), st.sampled_from(NAMES))),
                    "last_update": ts_ms * 1000 + draw(st.integers(0, 999))}
        row = {"movie_id": key, "title": draw(st.sampled_from(NAMES)),
               "release_year": draw(st.one_of(st.none(), st.integers(1950, 2025)))}
        if tx >= country_from:
            row["country"] = draw(st.one_of(st.none(), st.sampled_from(["FR", "US", "JP"])))
        return row

    def delete_image(row: dict) -> dict:
        # PostgreSQL (REPLICA IDENTITY DEFAULT) sends the key and defaults; MariaDB the full row
        if source.postgres:
            return {"actor_id": row["actor_id"], "first_name": "", "last_name": None, "last_update": 0}
        return dict(row)

    def emit(key: int, op: str, before, after, ts_ms: int, tx: int, snapshot: str = "false") -> None:
        value = _record(source, shape, op, before, after, pos.fields(), ts_ms, tx, snapshot)
        records.append((key, _wrap(value, wrapped)))
        if op == "d" and tombstones:
            records.append((key, "null"))

    ts_ms = EPOCH_MS
    if draw(st.booleans(), label="initial snapshot"):
        keys = sorted(draw(st.sets(st.integers(1, KEYS), min_size=1), label="snapshot keys"))
        pos.next_statement(40)  # snapshot records share one position
        for key in keys:
            state[key] = new_row(key, 0, ts_ms)
            emit(key, "r", None, state[key], ts_ms, 0, "true")
            stream.changes += 1

    for tx in range(1, draw(st.integers(2, max_transactions), label="transactions") + 1):
        ts_ms += draw(st.integers(1, 5000))
        if not source.postgres and draw(st.integers(0, 5)) == 0:
            pos.rotate()
        pos.next_statement(draw(st.integers(8, 300)))
        stream.transactions += 1
        for i in range(draw(st.integers(1, 3))):
            if i > 0:  # same statement (MariaDB: next row of the rows event) or a new one
                if source.postgres or draw(st.booleans()):
                    pos.next_statement(draw(st.integers(8, 300)))
                else:
                    pos.next_row()
            key = draw(st.integers(1, KEYS))
            stream.changes += 1
            if key not in state:  # insert, or re-insert after a delete
                state[key] = new_row(key, tx, ts_ms)
                emit(key, "c", None, state[key], ts_ms, tx)
                continue
            free = [k for k in range(1, KEYS + 1) if k not in state]
            # deletes weigh double: a delete followed by late or redelivered events is the hard case
            op = draw(st.sampled_from(["u", "d", "d", "k"] if free else ["u", "d", "d"]))
            old = state[key]
            if op == "u":
                state[key] = new_row(key, tx, ts_ms)
                emit(key, "u", None if source.postgres else old, state[key], ts_ms, tx)
            elif op == "d":
                del state[key]
                emit(key, "d", delete_image(old), None, ts_ms, tx)
            else:  # primary-key change: a delete and a create at one position
                new_key = draw(st.sampled_from(free))
                del state[key]
                state[new_key] = new_row(new_key, tx, ts_ms)
                emit(key, "d", delete_image(old), None, ts_ms, tx)
                if not source.postgres:
                    pos.next_row()
                emit(new_key, "c", None, state[new_key], ts_ms, tx)

    # Kafka: a record goes to its key's partition; at-least-once redelivery re-sends a
    # run of earlier records (same values, new offsets) later in the partition.
    per_partition: list[list[str]] = [[] for _ in range(partitions)]
    for key, line in records:
        per_partition[key % partitions].append(line)
    for lines in per_partition:
        for _ in range(draw(st.integers(0, 3), label="redeliveries")):
            if not lines:
                break
            start = draw(st.integers(0, len(lines) - 1))
            run = lines[start:start + draw(st.integers(1, 3))]
            at = draw(st.integers(start + len(run), len(lines)))
            lines[at:at] = run
            stream.duplicates += len(run)

    # S3 sink: files of a few records; batches land files in offset order, but a file
    # may be late (landed in a later batch than files after it).
    n_batches = draw(st.integers(2, max_batches), label="batches")
    stream.batches = [[] for _ in range(n_batches)]
    for partition, lines in enumerate(per_partition):
        offset = 0
        while offset < len(lines):
            size = draw(st.integers(1, 4))
            chunk = SinkFile(partition, offset, lines[offset:offset + size])
            natural = min(n_batches - 1, offset * n_batches // max(len(lines), 1))
            landed = draw(st.integers(natural, n_batches - 1)) if draw(st.booleans()) else natural
            stream.late_files += landed > natural
            stream.batches[landed].append(chunk)
            offset += size
    return stream


def late_events_after_delete() -> Stream:
    """A fixed stream with the cases random draws reach only sometimes: key 1 is
    inserted, updated and deleted in batch 1; batch 2 brings a redelivered copy of its
    older update and a late file with an older insert of key 2, which batch 1 already
    updated. Neither older event may win."""
    pos = _Position(postgres=True)
    lines = []

    def add(op: str, before, after, ts_ms: int, tx: int) -> None:
        pos.next_statement(64)
        lines.append(_wrap(_record(ACTOR, "envelope", op, before, after, pos.fields(), ts_ms, tx, "false"), False))

    def row(key: int, name: str, ts_ms: int) -> dict:
        return {"actor_id": key, "first_name": name, "last_name": None, "last_update": ts_ms * 1000}

    t = EPOCH_MS
    add("c", None, row(2, "BOB", t), t, 1)                  # offset 0: late, lands in batch 2
    add("c", None, row(1, "ANNA", t + 1), t + 1, 2)         # 1
    add("u", None, row(1, "DANA", t + 2), t + 2, 3)         # 2: redelivered in batch 2
    add("u", None, row(2, "CHEN", t + 3), t + 3, 3)         # 3
    add("d", {"actor_id": 1, "first_name": "", "last_name": None, "last_update": 0}, None, t + 4, 4)  # 4
    batch_1 = [SinkFile(0, 1, lines[1:5])]
    batch_2 = [SinkFile(0, 0, lines[0:1]), SinkFile(0, 5, [lines[2]])]
    return Stream(ACTOR, "envelope", False, 1, [batch_1, batch_2], transactions=4, changes=5,
                  duplicates=1, late_files=1)
