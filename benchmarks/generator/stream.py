"""The change stream itself: which key changes how, in which transaction, at which LSN.

Memory stays small at millions of keys: a key's row is a pure function of (key, version)
(`row_values`), so the generator only keeps each key's version and whether it is alive.
"""

from __future__ import annotations

import random
from array import array
from dataclasses import dataclass
from typing import Iterator, NamedTuple

# A PostgreSQL table `bench.public.orders` (the Debezium server name is `bench`).
SERVER = "bench"
DATABASE = "bench"
PG_SCHEMA = "public"
TABLE = "orders"
TOPIC = f"{SERVER}.{PG_SCHEMA}.{TABLE}"
COLUMNS: dict[str, str] = {
    "order_id": "bigint",
    "customer_id": "integer",
    "status": "character varying",
    "amount": "numeric(12,2)",
    "order_date": "date",
    "updated_at": "timestamp without time zone",
    "note": "text",
}
PRIMARY_KEY = ["order_id"]
NOT_NULL = {"order_id", "customer_id", "status", "amount", "order_date", "updated_at"}
STATUSES = ("new", "paid", "packed", "shipped", "returned")
# 2020-09-13T12:26:40Z: first commit of the stream, in microseconds since the epoch.
START_US = 1_600_000_000_000_000


@dataclass(frozen=True)
class StreamConfig:
    """What to generate. Same config and seed, same stream, byte for byte."""

    events: int
    keys: int
    seed: int = 7
    delete_share: float = 0.05  # of the events on a live key; the rest are updates
    row_bytes: int = 200  # length of the `note` column, the knob for row width
    tx_max: int = 4  # events per source transaction: 1..tx_max, sharing ts_ms and txId
    # Start with Debezium's initial snapshot: one read (op r) of every key, in key order,
    # so silver holds `keys` rows from the first build on (the silver-size case).
    snapshot: bool = False

    def __post_init__(self) -> None:
        if self.events < 1 or self.keys < 1:
            raise ValueError(f"events and keys must be >= 1 (got events={self.events}, keys={self.keys})")
        if self.snapshot and self.events < self.keys:
            raise ValueError(f"a snapshot reads every key: events must be >= keys (got {self.events} < {self.keys})")
        if not 0 <= self.delete_share < 1:
            raise ValueError(f"delete_share must be in [0, 1) (got {self.delete_share})")
        if self.row_bytes < 0 or self.tx_max < 1:
            raise ValueError(f"row_bytes must be >= 0 and tx_max >= 1 (got {self.row_bytes}, {self.tx_max})")


class Event(NamedTuple):
    op: str  # r (snapshot read), c, u or d
    key: int
    version: int  # the row version after the event (for d: the version deleted)
    lsn: int
    last_commit_lsn: int
    tx_id: int
    commit_us: int  # source.ts_us: the transaction's commit time
    emitted_us: int  # envelope ts_us: when Debezium processed it


def row_values(key: int, version: int, row_bytes: int) -> tuple[int, int, str, int, int, int, str]:
    """(order_id, customer_id, status, amount in cents, order_date as days since epoch,
    updated_at in microseconds, note) of `key` at `version`: deterministic, no state."""
    note_head = f"order {key} v{version} "
    note = (note_head + "x" * max(0, row_bytes - len(note_head)))[:row_bytes] if row_bytes else ""
    return (
        key,
        (key * 2_654_435_761 + version * 40_503) % 1_000_000,
        STATUSES[(key + version) % len(STATUSES)],
        (key * 7_919 + version * 104_729) % 100_000_000,
        17_000 + key % 3_000,
        START_US + version * 3_600_000_000 + key * 1_000,
        note,
    )


def events(config: StreamConfig) -> Iterator[Event]:
    """The stream, in source commit order: keys drawn uniformly from [0, keys); a key
    that is not alive gets an insert, a live one an update or (delete_share) a delete.
    A re-insert after a delete continues the key's version count. With `snapshot`, every
    key is first read once (op r), all at the snapshot's LSN and transaction, as
    Debezium's initial snapshot reports them."""
    rng = random.Random(config.seed)
    version = array("I", bytes(4 * config.keys))
    alive = bytearray(config.keys)
    lsn = 0x2A000000
    tx_id = 1_000
    clock_us = START_US
    emitted = 0
    if config.snapshot:
        tx_id += 1
        for key in range(config.keys):
            version[key] = 1
            alive[key] = 1
            yield Event("r", key, 1, lsn, lsn, tx_id, clock_us, clock_us + 1_000)
        emitted = config.keys
    while emitted < config.events:
        tx_id += 1
        clock_us += rng.randrange(200, 20_000)
        lsn += rng.randrange(2, 40) * 8  # BEGIN
        last_commit_lsn = lsn
        for _ in range(min(rng.randint(1, config.tx_max), config.events - emitted)):
            key = rng.randrange(config.keys)
            if not alive[key]:
                op = "c"
                version[key] += 1
                alive[key] = 1
            elif rng.random() < config.delete_share:
                op = "d"
                alive[key] = 0
            else:
                op = "u"
                version[key] += 1
            lsn += rng.randrange(5, 25) * 8
            yield Event(op, key, version[key], lsn, last_commit_lsn, tx_id, clock_us,
                        clock_us + rng.randrange(1_000, 200_000))
            emitted += 1
        lsn += 0x30  # COMMIT
