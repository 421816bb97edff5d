"""Source log positions, what silver has reached, and whether silver is behind.

Silver keeps, per row, the ordering key of the row's last event (`_cdc_order`:
`<lsn>|<binlog file>|<binlog pos>|<binlog row>|<partition>|<offset>`, zero-padded), and
the state table keeps it for deleted keys too. The highest one over the compared tables
of a source is the position silver has reached. The source is read in one snapshot
together with its own position; the rule (docs/decisions/verify-reconciliation.md):

- the snapshot's position is at or before the reached one: silver is at the snapshot;
- else the source's log between the two is read for committed changes to each compared
  table: none, silver is at the snapshot for that table (any difference is real); some,
  it is behind by that many changes (a difference may be lag);
- a log that cannot be read (no right to, rotated away, too long) counts as changes:
  behind, by the distance in bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Iterable, Mapping

AT = "at"
BEHIND = "behind"


@dataclass(frozen=True, order=True)
class Lsn:
    """A PostgreSQL WAL position."""

    value: int

    @classmethod
    def parse(cls, text: str) -> Lsn:
        high, _, low = text.partition("/")
        return cls((int(high, 16) << 32) + int(low, 16))

    def __str__(self) -> str:
        return f"{self.value >> 32:X}/{self.value & 0xFFFFFFFF:X}"


@total_ordering
@dataclass(frozen=True)
class BinlogPosition:
    """A MySQL / MariaDB binlog position: file, byte offset, row within the event."""

    file: str
    pos: int
    row: int = 0

    def order(self) -> tuple:
        stem, _, number = self.file.rpartition(".")
        return (stem, int(number) if number.isdigit() else -1, number, self.pos, self.row)

    def __lt__(self, other: BinlogPosition) -> bool:
        return self.order() < other.order()

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" row {self.row}" if self.row else "")


Position = Lsn | BinlogPosition


@dataclass(frozen=True)
class Reached:
    """Silver's newest event of a set of tables: its source position, and whether it was
    read by the connector's snapshot (whose position is a point between transactions)
    rather than streamed (inside its transaction)."""

    position: Position
    snapshot: bool


def parse_cdc_order(text: str | None) -> Position | None:
    """The source position in a `_cdc_order` value, None when it holds none."""
    if not text:
        return None
    parts = text.split("|")
    if len(parts) != 6:
        return None
    lsn, file, pos, row = parts[0], parts[1], parts[2], parts[3]
    if file:
        return BinlogPosition(file, int(pos or 0), int(row or 0))
    if lsn.strip("0"):
        return Lsn(int(lsn))
    return None


def distance(snapshot: Position, reached: Position | None) -> str:
    """How far the snapshot is past the reached position, in words."""
    if reached is None:
        return "silver holds no event of these tables"
    if isinstance(snapshot, Lsn) and isinstance(reached, Lsn):
        return f"{max(snapshot.value - reached.value, 0):,} bytes of WAL"
    if isinstance(snapshot, BinlogPosition) and isinstance(reached, BinlogPosition):
        if snapshot.file == reached.file:
            return f"{max(snapshot.pos - reached.pos, 0):,} bytes of binlog"
        files = snapshot.order()[1] - reached.order()[1]
        return f"{files} binlog file(s) later ({reached.file} -> {snapshot.file})"
    return "positions of different kinds"


@dataclass(frozen=True)
class Gap:
    """What the source's log between silver's position and the snapshot holds."""

    inspected: bool
    changes: Mapping[str, int] = field(default_factory=dict)  # table -> committed row changes
    reason: str = ""  # why it was not inspected


@dataclass(frozen=True)
class Verdict:
    state: str  # AT or BEHIND
    snapshot: str
    reached: str | None
    changes_after: int | None  # committed changes to the table after silver's position, when known
    detail: str


def decide(table: str, snapshot: Position, reached: Position | None, gap: Gap | None) -> Verdict:
    """Where silver stands for `table` against the source's snapshot (the module's rule)."""
    reached_text = str(reached) if reached is not None else None
    if reached is not None and type(reached) is type(snapshot) and snapshot <= reached:
        return Verdict(AT, str(snapshot), reached_text, 0, "silver has reached the snapshot's position")
    if reached is None:
        return Verdict(BEHIND, str(snapshot), None, None, "silver holds no event of these tables")
    if gap is not None and gap.inspected:
        changes = gap.changes.get(table, 0)
        if changes == 0:
            return Verdict(AT, str(snapshot), reached_text, 0,
                           f"no change to the table in the source's log after silver's position "
                           f"({distance(snapshot, reached)} read)")
        return Verdict(BEHIND, str(snapshot), reached_text, changes,
                       f"{changes} committed row change(s) to the table after silver's position "
                       f"({distance(snapshot, reached)})")
    why = gap.reason if gap is not None else "the source's log was not read"
    return Verdict(BEHIND, str(snapshot), reached_text, None,
                   f"the snapshot is {distance(snapshot, reached)} past silver's position and {why}")


# --- PostgreSQL: WAL records (pg_walinspect) ---------------------------------------------------
@dataclass(frozen=True)
class WalRecord:
    lsn: Lsn
    xid: int
    resource_manager: str
    record_type: str
    description: str
    block_ref: str


DATA_RECORD = re.compile(r"^(INSERT|UPDATE|HOT_UPDATE|DELETE|MULTI_INSERT)(\+INIT)?$")
BLOCK_RELATION = re.compile(r"rel (\d+)/(\d+)/(\d+)")
SUBTRANSACTIONS = re.compile(r"subxacts:((?: \d+)+)")
TRUNCATED = re.compile(r"\brelids((?: \d+)+)")


@dataclass(frozen=True)
class Relation:
    """Where a table's rows live: its (and its partitions') file nodes and object ids."""

    file_nodes: frozenset[int]
    oids: frozenset[int]


def wal_changes(records: Iterable[WalRecord], reached: Lsn, reached_xid: int | None, database_oid: int,
                relations: Mapping[str, Relation]) -> dict[str, int]:
    """Row changes per table made by transactions that committed after silver's last one.

    Debezium sends transactions in commit order, so silver holds every transaction that
    committed before the one of its last event (`reached_xid`, whose commit follows
    `reached`): the transactions that count are those whose COMMIT comes after that
    one's (after `reached` when it is not in the records). Their changes may lie before
    `reached` (they began earlier), so `records` should start before it."""
    records = list(records)
    committed_at: dict[int, Lsn] = {}
    for record in records:
        if record.resource_manager == "Transaction" and record.record_type in ("COMMIT", "COMMIT_PREPARED"):
            if record.lsn <= reached:
                continue
            committed_at[record.xid] = record.lsn
            found = SUBTRANSACTIONS.search(record.description)
            for sub in (found.group(1).split() if found else []):
                committed_at[int(sub)] = record.lsn
    boundary = committed_at.get(reached_xid, reached) if reached_xid is not None else reached
    later = {xid for xid, lsn in committed_at.items() if lsn > boundary}
    by_node = {node: table for table, relation in relations.items() for node in relation.file_nodes}
    by_oid = {oid: table for table, relation in relations.items() for oid in relation.oids}
    changes: dict[str, int] = {}
    for record in records:
        if record.xid not in later:
            continue
        if record.resource_manager == "Heap" and record.record_type == "TRUNCATE":
            found = TRUNCATED.search(record.description)
            tables = {by_oid[int(o)] for o in (found.group(1).split() if found else []) if int(o) in by_oid}
        elif record.resource_manager in ("Heap", "Heap2") and DATA_RECORD.match(record.record_type):
            blocks = BLOCK_RELATION.findall(record.block_ref)
            tables = {by_node[int(node)] for _, db, node in blocks if int(db) == database_oid and int(node) in by_node}
        else:
            continue
        for table in tables:
            changes[table] = changes.get(table, 0) + 1
    return changes


# --- MariaDB / MySQL: binlog events (SHOW BINLOG EVENTS) ----------------------------------------
@dataclass(frozen=True)
class BinlogEvent:
    file: str
    pos: int
    event_type: str
    end_pos: int
    info: str


TABLE_MAP = re.compile(r"table_id: (\d+) \(([^)]*)\)")
ROWS_TABLE = re.compile(r"table_id: (\d+)")
ROW_EVENT = re.compile(r"^(Write|Update|Delete)_rows")


def binlog_changes(events: Iterable[BinlogEvent], tables: Mapping[str, str], in_transaction: bool) -> dict[str, int]:
    """Row events per table (`tables`: `db.table` -> name) in `events`, which start at
    silver's last event. A streamed event lies inside its transaction, which is silver's:
    with `in_transaction` the events up to that transaction's end (its Xid event or
    COMMIT query) are skipped. A snapshot's position lies between transactions.

    The binlog holds each transaction whole at its commit, in commit order, so every
    transaction after that point committed after silver's last one."""
    changes: dict[str, int] = {}
    past_first = not in_transaction
    mapped: dict[str, str] = {}
    for event in events:
        ends_transaction = event.event_type == "Xid" or (
            event.event_type == "Query" and event.info.strip().upper() == "COMMIT")
        if not past_first:
            past_first = ends_transaction
            continue
        if event.event_type == "Table_map":
            found = TABLE_MAP.search(event.info)
            if found:
                mapped[found.group(1)] = found.group(2)
        elif ROW_EVENT.match(event.event_type):
            found = ROWS_TABLE.search(event.info)
            name = tables.get(mapped.get(found.group(1), "")) if found else None
            if name is not None:
                changes[name] = changes.get(name, 0) + 1
        elif event.event_type == "Query":
            statement = event.info.lower()
            for qualified, name in tables.items():
                table = qualified.split(".", 1)[1]
                if re.search(rf"\btruncate\b.*\b{re.escape(table)}\b", statement):
                    changes[name] = changes.get(name, 0) + 1
    return changes
