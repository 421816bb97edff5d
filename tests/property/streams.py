"""Random Debezium change streams for the property tests, as hypothesis strategies.

A stream is what one source table sends through Debezium and the Kafka Connect S3 sink:
source transactions (inserts, updates, deletes, re-inserts after a delete, primary-key
changes, truncates, a connector reset with a fresh snapshot that misses changes made
while no connector ran) over a handful of keys, encoded as Debezium record values of one
shape, spread over Kafka partitions by key, with at-least-once redelivery (exact copies
of earlier records at new offsets, never across a reset), cut into sink files, and the
files landed in batches, some files late (a batch lands a file of older offsets after
newer ones).

Two sources: PostgreSQL `pagila.public.actor` (ordered by LSN; a primary-key change is
a delete and a create at one LSN) and MariaDB `mariadb.movies_db.movies` (ordered by
binlog file, position, row; the binlog rotates; `country` is added by ALTER TABLE
part way). Every change of a transaction shares its `ts_ms`. Only PostgreSQL sends
truncates, and only there can a change committed during a snapshot have an older log
position than the snapshot (a transaction that started before it).
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
    soft_deletes_model: str | None = None  # a second model of the table, cdc_deletes='soft'
    history_model: str | None = None  # its SCD type 2 history (materialized cdc_history)

    def models(self) -> list[tuple[str, str]]:
        """(silver model, kind: hard / soft deletes or history) of every model built from this source."""
        soft = [(self.soft_deletes_model, "soft")] if self.soft_deletes_model else []
        history = [(self.history_model, "history")] if self.history_model else []
        return [(self.table, "hard"), *soft, *history]


ACTOR = Source("actor", "pagila.public.actor", "actor_id", postgres=True, history_model="actor_history")
MOVIES = Source("movies", "mariadb.movies_db.movies", "movie_id", postgres=False,
                soft_deletes_model="movies_including_deleted", history_model="movies_history")
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
    truncates: int = 0
    resets: int = 0

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
                f"{self.duplicates} redelivered records, {self.truncates} truncate(s), "
                f"{self.resets} connector reset(s), {files} files in {len(self.batches)} batches, "
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

    def just_before(self) -> dict:
        """A position just before the current one (a transaction that began earlier)."""
        assert self.postgres
        return {"lsn": self.lsn - 1}

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
    row.update({"__op": op, "__table": source.table, "__source_ts_ms": ts_ms, "__snapshot": snapshot,
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
    # (partition key, era, line) in source order; a connector reset starts a new era
    records: list[tuple[int, int, str]] = []
    era = 0
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

    def emit(key: int | None, op: str, before, after, ts_ms: int, tx: int, snapshot: str = "false",
             position: dict | None = None) -> None:
        # a truncate stays an envelope: ExtractNewRecordState has no row to flatten
        value = _record(source, "envelope" if op == "t" else shape, op, before, after,
                        position or pos.fields(), ts_ms, tx, snapshot)
        records.append((key or 0, era, _wrap(value, wrapped)))  # a truncate has no key
        if op == "d" and tombstones:
            records.append((key, era, "null"))

    def snapshot(tx: int, ts_ms: int) -> None:
        """Every current row as `r` at one position; Debezium marks the last one."""
        pos.next_statement(40)
        keys = sorted(state)
        for i, key in enumerate(keys):
            mark = "last" if i == len(keys) - 1 else "first" if i == 0 else "true"
            emit(key, "r", None, state[key], ts_ms, tx, mark)
            stream.changes += 1

    ts_ms = EPOCH_MS
    if draw(st.booleans(), label="initial snapshot"):
        for key in sorted(draw(st.sets(st.integers(1, KEYS), min_size=1), label="snapshot keys")):
            state[key] = new_row(key, 0, ts_ms)
        snapshot(0, ts_ms)

    kinds = ["changes"] * 5 + ["reset"] + (["truncate"] if source.postgres else [])
    for tx in range(1, draw(st.integers(2, max_transactions), label="transactions") + 1):
        ts_ms += draw(st.integers(1, 5000))
        if not source.postgres and draw(st.integers(0, 5)) == 0:
            pos.rotate()
        pos.next_statement(draw(st.integers(8, 300)))
        stream.transactions += 1
        kind = draw(st.sampled_from(kinds), label="transaction kind")
        if kind == "truncate":
            emit(None, "t", None, None, ts_ms, tx)
            state.clear()
            stream.changes += 1
            stream.truncates += 1
            continue
        if kind == "reset":
            # Connector reset: what changed while no connector ran is never streamed
            # (rows deleted, updated, inserted); a fresh snapshot follows.
            for key in sorted(state):
                fate = draw(st.sampled_from(["keep", "update", "delete"]), label="while stopped")
                if fate == "update":
                    state[key] = new_row(key, tx, ts_ms)
                elif fate == "delete":
                    del state[key]
            if not state or draw(st.booleans(), label="inserted while stopped"):
                key = draw(st.sampled_from([k for k in range(1, KEYS + 1) if k not in state] or [1]))
                state[key] = new_row(key, tx, ts_ms)
            era += 1
            snapshot(tx, ts_ms)
            stream.resets += 1
            free = [k for k in range(1, KEYS + 1) if k not in state]
            if source.postgres and free and draw(st.booleans(), label="insert during the snapshot"):
                # began before the snapshot, committed after it: older LSN, streamed after it
                key = draw(st.sampled_from(free))
                state[key] = new_row(key, tx, ts_ms)
                emit(key, "c", None, state[key], ts_ms, tx, position=pos.just_before())
                stream.changes += 1
            continue
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
    # run of earlier records (same values, new offsets) later in the partition, before
    # the next connector reset (a reset connector does not resend the old one's records).
    per_partition: list[list[tuple[int, str]]] = [[] for _ in range(partitions)]
    for key, record_era, line in records:
        per_partition[key % partitions].append((record_era, line))
    for entries in per_partition:
        for _ in range(draw(st.integers(0, 3), label="redeliveries")):
            if not entries:
                break
            start = draw(st.integers(0, len(entries) - 1))
            run_era = entries[start][0]
            end_of_era = max(i for i, (e, _) in enumerate(entries) if e == run_era) + 1
            run = entries[start:min(start + draw(st.integers(1, 3)), end_of_era)]
            at = draw(st.integers(start + len(run), end_of_era))
            entries[at:at] = run
            stream.duplicates += len(run)
    per_partition = [[line for _, line in entries] for entries in per_partition]

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


def truncate_and_reset() -> Stream:
    """A fixed stream for resets: a snapshot of keys 1-3; key 1 updated; TRUNCATE; keys
    2 and 4 inserted. Then a connector reset: while no connector ran, key 4 was deleted
    and key 2 updated; the new snapshot holds only key 2, and key 3 is inserted by a
    transaction that began before the snapshot (older LSN) and committed after it.
    The pre-truncate update of key 1 lands late, in the last batch. Expected: keys 2
    (its snapshot row) and 3; keys 1 and 4 must not come back."""
    pos = _Position(postgres=True)
    lines = []

    def add(op: str, after, snapshot: str = "false", lsn: int | None = None) -> None:
        if lsn is None:
            pos.next_statement(64)
        position = {"lsn": lsn} if lsn is not None else pos.fields()
        t = EPOCH_MS + len(lines)
        lines.append(_wrap(_record(ACTOR, "envelope", op, None, after, position, t, len(lines), snapshot), False))

    def row(key: int, name: str) -> dict:
        return {"actor_id": key, "first_name": name, "last_name": None, "last_update": EPOCH_MS * 1000}

    pos.next_statement(40)
    add("r", row(1, "ANNA"), "first", lsn=pos.lsn)   # offset 0
    add("r", row(2, "BOB"), "true", lsn=pos.lsn)     # 1
    add("r", row(3, "CHEN"), "last", lsn=pos.lsn)    # 2
    add("u", row(1, "DANA"))                          # 3: lands late, after the truncate
    add("t", None)                                    # 4
    add("c", row(2, "ÉMILE"))                         # 5
    add("c", row(4, "O'HARA"))                        # 6
    pos.next_statement(64)
    add("r", row(2, "BOB"), "last", lsn=pos.lsn)     # 7: the new snapshot
    add("c", row(3, "ANNA"), lsn=pos.lsn - 1)        # 8: committed during the snapshot
    batches = [[SinkFile(0, 0, lines[0:3])], [SinkFile(0, 4, lines[4:7])],
               [SinkFile(0, 7, lines[7:9]), SinkFile(0, 3, lines[3:4])]]
    return Stream(ACTOR, "envelope", False, 1, batches, transactions=6, changes=9, late_files=1,
                  truncates=1, resets=1)


def soft_deleted_values_arrive_late() -> Stream:
    """A fixed MariaDB stream for soft deletes: key 1 is inserted, updated and deleted,
    its insert landing late; key 3's delete lands before its own insert. A soft-deleted
    row keeps the values of its latest live event, whenever that event lands: key 1
    keeps BOB (the late insert is older), key 3 gets CHEN from its late insert."""
    pos = _Position(postgres=False)
    lines = []

    def add(op: str, before, after) -> None:
        pos.next_statement(64)
        t = EPOCH_MS + len(lines)
        lines.append(_wrap(_record(MOVIES, "envelope", op, before, after, pos.fields(), t, len(lines), "false"), False))

    def row(key: int, title: str) -> dict:
        return {"movie_id": key, "title": title, "release_year": 1999, "country": None}

    add("c", None, row(1, "ANNA"))            # offset 0: late
    add("c", None, row(3, "CHEN"))            # 1: late
    add("u", row(1, "ANNA"), row(1, "BOB"))   # 2
    add("d", row(1, "BOB"), None)             # 3
    add("d", row(3, "CHEN"), None)            # 4
    add("c", None, row(2, "DANA"))            # 5
    batches = [[SinkFile(0, 2, lines[2:6])], [SinkFile(0, 0, lines[0:2])]]
    return Stream(MOVIES, "envelope", False, 1, batches, transactions=6, changes=6, late_files=1)


def history_versions_split_and_merged() -> Stream:
    """A fixed stream for history tables: batch 1 gives key 1 the versions ANNA, BOB and
    key 2 CHEN, DANA. Batch 2 brings late updates: key 1's BOB at an older position
    (BOB now starts there: the stored BOB version is retired and ANNA ends earlier), key
    2's EVE between CHEN and DANA (a version is split in), then key 1's delete (ends
    BOB) and a redelivered copy of DANA (no new version)."""
    pos = _Position(postgres=True)
    lines = []

    def add(op: str, before, after) -> None:
        pos.next_statement(64)
        t = EPOCH_MS + len(lines)
        lines.append(_wrap(_record(ACTOR, "envelope", op, before, after, pos.fields(), t, len(lines), "false"), False))

    def row(key: int, name: str) -> dict:
        return {"actor_id": key, "first_name": name, "last_name": None, "last_update": EPOCH_MS * 1000}

    add("c", None, row(1, "ANNA"))    # offset 0
    add("u", None, row(1, "BOB"))     # 1: late
    add("u", None, row(1, "BOB"))     # 2
    add("c", None, row(2, "CHEN"))    # 3
    add("u", None, row(2, "EVE"))     # 4: late
    add("u", None, row(2, "DANA"))    # 5: redelivered at 7
    add("d", {"actor_id": 1, "first_name": None, "last_name": None, "last_update": None}, None)  # 6
    batches = [[SinkFile(0, 0, lines[0:1]), SinkFile(0, 2, lines[2:4]), SinkFile(0, 5, lines[5:6])],
               [SinkFile(0, 1, lines[1:2]), SinkFile(0, 4, lines[4:5]), SinkFile(0, 6, lines[6:7] + lines[5:6])]]
    return Stream(ACTOR, "envelope", False, 1, batches, transactions=7, changes=7, duplicates=1, late_files=2)
