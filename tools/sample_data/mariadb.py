"""A second source: the MariaDB table movies_db.movies, captured by the Debezium MariaDB
connector (3.5.x) and serialized by JsonConverter with schemas.enable=false (no
schema wrapper, so nothing in a record says a column's type).

The rows are invented here (not Pagila). Batch 1 is the initial snapshot; in batch 2 the
table gets a new column (`ALTER TABLE movies ADD COLUMN country varchar(60)`): events
from then on carry `country`, older ones do not have the field at all. Events are
ordered by binlog coordinates: file, position, row (the row's index inside one binlog
rows event); the binlog file rotates between batch 2 and batch 3, so batch-3 positions
are smaller than batch-2 ones. Updates and deletes carry the full before image
(binlog_row_image=FULL).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from testdata.debezium import CONNECTOR_VERSION

SERVER_NAME = "mariadb"
DB_NAME = "movies_db"
TABLE = "movies"
TOPIC = f"{SERVER_NAME}.{DB_NAME}.{TABLE}"
PRIMARY_KEY = ["movie_id"]
# MariaDB column types; `country` exists from the ALTER TABLE in batch 2 on.
COLUMNS = {"movie_id": "int(11)", "title": "varchar(200)", "release_year": "year(4)",
           "country": "varchar(60)"}
LATER_COLUMNS = {"country"}

MOVIES = [
    (1, "Harbor Lights at Dawn", 1994),
    (2, "The Cartographer's Silence", 2003),
    (3, "Seven Bridges North", 1978),
    (4, "Paper Moons Over Lisbon", 2011),
    (5, "A Quiet Kind of Thunder", 2019),
    (6, "The Salt Road", 1966),
    (7, "Midnight at the Observatory", 2008),
    (8, "Café Lumière, \"Encore\"", 2015),
    (9, "Where the Trams Turn Around", 1999),
    (10, "Winter Ledger", 2022),
]

SNAPSHOT_TIME = datetime(2024, 6, 3, 8, 5, 0)
BATCH_START = {2: datetime(2024, 6, 3, 8, 25, 0), 3: datetime(2024, 6, 3, 9, 45, 0)}
BINLOG = {1: "mariadb-bin.000003", 2: "mariadb-bin.000003", 3: "mariadb-bin.000004"}


def _ms(dt: datetime) -> int:
    d = dt - datetime(1970, 1, 1)
    return (d.days * 86_400 + d.seconds) * 1000 + d.microseconds // 1000


class MoviesWorkload:
    def __init__(self, seed: int):
        self.rng = random.Random(seed * 31 + 5)
        self.state: dict[tuple, dict] = {(m,): {"movie_id": m, "title": t, "release_year": y}
                                         for m, t, y in MOVIES}
        self.columns = [c for c in COLUMNS if c not in LATER_COLUMNS]
        self.batches: dict[int, list[dict]] = {1: [], 2: [], 3: []}
        self.special: list[dict] = []
        self.file = BINLOG[1]
        self.pos = 1_048_000 + self.rng.randrange(0, 4000)
        self.gtid_seq = 5000 + self.rng.randrange(0, 500)
        self.clock = SNAPSHOT_TIME
        self._tx = None

    def note(self, case: str, key: tuple, batches: list[int], detail: str = ""):
        self.special.append({"case": case, "table": TABLE, "key": {"movie_id": key[0]},
                             "batches": batches, "detail": detail})

    def _image(self, row: dict | None) -> dict | None:
        return None if row is None else {c: row.get(c) for c in self.columns}

    def snapshot(self):
        ts_ms = _ms(self.clock)
        rows = [self.state[k] for k in sorted(self.state)]
        for i, row in enumerate(rows):
            self.batches[1].append({
                "op": "r", "before": None, "after": self._image(row), "file": self.file,
                "pos": self.pos, "row": 0, "server_id": 0, "gtid": None, "thread": None,
                "source_ts_ms": ts_ms, "ts_ms": ts_ms + 40 + i,
                "snapshot": "first" if i == 0 else ("last" if i == len(rows) - 1 else "true"),
            })

    def begin(self, batch: int):
        if self.clock < BATCH_START[batch]:
            self.clock = BATCH_START[batch]
        if self.file != BINLOG[batch]:  # the server rotated its binlog
            self.file, self.pos = BINLOG[batch], 256
        self.clock += timedelta(seconds=self.rng.randrange(5, 60))
        self.gtid_seq += 1
        self.pos += self.rng.randrange(40, 200)  # GTID and query events
        self._tx = {"batch": batch, "gtid": f"0-1-{self.gtid_seq}", "thread": None,
                    "source_ts_ms": _ms(self.clock) // 1000 * 1000,  # binlog: whole seconds
                    "ts_ms": _ms(self.clock) + self.rng.randrange(150, 900)}

    def alter_add_column(self, column: str):
        """DDL: goes to the schema history, not to the table's topic; later events carry the column."""
        self.columns.append(column)
        for row in self.state.values():
            row.setdefault(column, None)
        self.pos += self.rng.randrange(150, 300)

    def rows_event(self, changes: list[tuple[str, tuple, dict | None]]):
        """One binlog rows event (one statement) changing several rows: one position,
        row = 0, 1, ... . changes: (op, key, new values or None for a delete)."""
        tx = self._tx
        self.pos += self.rng.randrange(60, 400)
        for i, (op, key, values) in enumerate(changes):
            before = None if op == "c" else dict(self.state[key])
            if op == "d":
                after = None
                del self.state[key]
            else:
                after = dict(before or {c: None for c in self.columns})
                after.update(values)
                self.state[key] = after
            self.batches[tx["batch"]].append({
                "op": op, "before": self._image(before), "after": self._image(after),
                "file": self.file, "pos": self.pos, "row": i, "server_id": 1, "gtid": tx["gtid"],
                "thread": tx["thread"], "source_ts_ms": tx["source_ts_ms"], "ts_ms": tx["ts_ms"],
                "snapshot": "false",
            })
        self.pos += 31  # XID event

    def commit(self):
        self._tx = None


def build(seed: int) -> MoviesWorkload:
    w = MoviesWorkload(seed)
    w.snapshot()
    rng = w.rng
    updated, deleted, twice = rng.sample(sorted(k for k in w.state if k[0] > 2), 3)

    # ================= batch 2 ======================================================
    w.begin(2)
    w.alter_add_column("country")
    w.commit()
    w.begin(2)
    w.rows_event([("u", (1,), {"country": "Portugal"}), ("u", (2,), {"country": "Canada"})])
    w.commit()
    w.note("multi_row_event", (1,), [2], "one UPDATE statement for movies 1 and 2: same position, rows 0 and 1")
    w.begin(2)
    w.rows_event([("c", (11,), {"movie_id": 11, "title": "The Night Ferry", "release_year": 2024,
                                "country": "Norway"})])
    w.rows_event([("c", (12,), {"movie_id": 12, "title": "Untitled Project", "release_year": 2025,
                                "country": None})])
    w.rows_event([("u", updated, {"title": w.state[updated]["title"] + " (Director's Cut)"})])
    w.commit()
    w.note("insert", (11,), [2], "inserted with country")
    w.note("update_before_country", updated, [2], "title changed; country stays null")
    w.begin(2)
    w.rows_event([("u", twice, {"country": "Japan"})])
    w.rows_event([("u", twice, {"country": "South Korea"})])
    w.rows_event([("d", deleted, None)])
    w.commit()
    w.note("two_updates_one_tx", twice, [2, 3], "Japan then South Korea in one transaction; batch 3 again")
    w.note("delete_snapshot_row", deleted, [2])

    # ================= batch 3: the binlog rotated, positions start small again ==========
    w.begin(3)
    w.rows_event([("u", twice, {"country": "France", "release_year": 2001})])
    w.rows_event([("d", (12,), None)])
    w.rows_event([("c", (13,), {"movie_id": 13, "title": "Tide Tables", "release_year": 2023,
                                "country": None})])
    w.commit()
    w.note("binlog_rotation", twice, [3], "new binlog file with a smaller position: file order wins")
    w.note("delete_of_batch2_insert", (12,), [2, 3])
    return w


def record_value(ev: dict) -> dict:
    """The record value (JsonConverter, schemas.enable=false)."""
    return {
        "before": ev["before"],
        "after": ev["after"],
        "source": {
            "version": CONNECTOR_VERSION,
            "connector": "mariadb",
            "name": SERVER_NAME,
            "ts_ms": ev["source_ts_ms"],
            "snapshot": ev["snapshot"],
            "db": DB_NAME,
            "sequence": None,
            "ts_us": ev["source_ts_ms"] * 1000,
            "ts_ns": ev["source_ts_ms"] * 1_000_000,
            "table": TABLE,
            "server_id": ev["server_id"],
            "gtid": ev["gtid"],
            "file": ev["file"],
            "pos": ev["pos"],
            "row": ev["row"],
            "thread": ev["thread"],
            "query": None,
        },
        "transaction": None,
        "op": ev["op"],
        "ts_ms": ev["ts_ms"],
        "ts_us": ev["ts_ms"] * 1000,
        "ts_ns": ev["ts_ms"] * 1_000_000,
    }
