"""The scripted workload the fixtures are recorded from, as data.

Every statement is built from structured values, so the SQL that runs and the
expectations the tests derive (ops per primary key, the values each change sets, where
a big value stays unchanged) come from the same place and cannot disagree. The
recorder writes all of it to ``tests/fixtures/debezium/workload.json``; the tests read
that file, never this module.

Rules the workload keeps:

- it only creates and changes its own rows, with ids >= 95000 and values invented
  here. Pagila ids appear only as foreign-key targets (store 1, staff 1, language 1,
  city 1, country 1, address 1, customer 1, film 1), never as changed rows. Pagila
  declares several foreign-key columns `smallint` (customer.address_id,
  rental.customer_id/staff_id, payment.customer_id, inventory.film_id, city.country_id,
  film_actor, film_category), so rows with ids >= 95000 cannot be referenced through
  them: those references point at Pagila rows, and film_actor / film_category (both
  columns smallint) are not touched at all;
- `country` has REPLICA IDENTITY NOTHING: insert only;
- `customer.active` and `film.revenue_projection` are generated: never set;
- every inner list of ``POSTGRES`` / ``MARIADB`` is one transaction, run in order.

Value kinds (``to_json`` gives their form in workload.json): ``None``, ``str``,
``int``, ``bool``, ``list[str]`` (text[]), and the tagged kinds below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


# --- value kinds ------------------------------------------------------------------------
@dataclass(frozen=True)
class Numeric:
    value: str  # e.g. "2.99", "-0.50"


@dataclass(frozen=True)
class Date:
    value: str  # ISO date


@dataclass(frozen=True)
class Timestamp:
    value: str  # "YYYY-MM-DD HH:MM:SS[.ffffff]" (timestamp without time zone)


@dataclass(frozen=True)
class TimestampTz:
    value: str  # "YYYY-MM-DD HH:MM:SS[.ffffff]+HH:MM"


@dataclass(frozen=True)
class Bytea:
    hex: str


@dataclass(frozen=True)
class Range:
    type: str  # tsrange | tstzrange
    value: str  # PostgreSQL's text form, e.g. ["2024-05-01 10:00:00.5",) or empty


@dataclass(frozen=True)
class Big:
    """A value big enough to be TOASTed out of line: md5 strings do not compress.

    text: md5(1) || md5(2) || ... || md5(n), one string
    text[]: array of md5(i) || md5(-i) for i in 1..n
    bytea: the bytes of the hex string md5(1) || ... || md5(n)
    """

    kind: str  # text | text[] | bytea
    n: int

    def sql(self) -> str:
        if self.kind == "text":
            return f"(select string_agg(md5(i::text), '' order by i) from generate_series(1, {self.n}) as i)"
        if self.kind == "text[]":
            return (f"(select array_agg(md5(i::text) || md5((-i)::text) order by i)"
                    f" from generate_series(1, {self.n}) as i)")
        if self.kind == "bytea":
            return (f"(select decode(string_agg(md5(i::text), '' order by i), 'hex')"
                    f" from generate_series(1, {self.n}) as i)")
        raise ValueError(self.kind)


BIG_TEXT = Big("text", 200)      # 6,400 characters
BIG_ARRAY = Big("text[]", 100)   # 100 elements of 64 characters
BIG_BYTES = Big("bytea", 200)    # 3,200 bytes


def literal(value: Any) -> str:
    """The SQL literal of a value (PostgreSQL and MariaDB alike for plain kinds)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, list):
        return "array[" + ", ".join(literal(v) for v in value) + "]::text[]"
    if isinstance(value, Numeric):
        return value.value
    if isinstance(value, Date):
        return f"date '{value.value}'"
    if isinstance(value, Timestamp):
        return f"timestamp '{value.value}'"
    if isinstance(value, TimestampTz):
        return f"timestamptz '{value.value}'"
    if isinstance(value, Bytea):
        return f"'\\x{value.hex}'::bytea"
    if isinstance(value, Range):
        return literal(value.value) + "::" + value.type
    if isinstance(value, Big):
        return value.sql()
    raise TypeError(f"no literal for {value!r}")


def to_json(value: Any) -> Any:
    """A value as workload.json states it."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, list):
        return {"type": "text[]", "value": list(value)}
    if isinstance(value, Numeric):
        return {"type": "numeric", "value": value.value}
    if isinstance(value, Date):
        return {"type": "date", "value": value.value}
    if isinstance(value, Timestamp):
        return {"type": "timestamp", "value": value.value}
    if isinstance(value, TimestampTz):
        return {"type": "timestamptz", "value": value.value}
    if isinstance(value, Bytea):
        return {"type": "bytea", "hex": value.hex}
    if isinstance(value, Range):
        return {"type": value.type, "value": value.value}
    if isinstance(value, Big):
        return {"type": "big", "kind": value.kind, "n": value.n}
    raise TypeError(f"no JSON form for {value!r}")


# --- statements ---------------------------------------------------------------------------
@dataclass
class Change:
    op: str  # c | u | d | r
    key: dict[str, Any]
    set: dict[str, Any] = field(default_factory=dict)  # the columns this change sets

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "key": self.key, "set": {k: to_json(v) for k, v in self.set.items()}}


@dataclass
class Statement:
    sql: str
    table: str | None = None
    changes: list[Change] = field(default_factory=list)
    # None, or how the row changes of the statement relate:
    # "key_change": a primary-key update (delete of the old key, create of the new key, one WAL record / binlog row)
    # "partition_move": the partition key changes (delete + create of the same key, two WAL records)
    # "add_columns": DDL that adds `add_columns` to `table` (no row change)
    kind: str | None = None
    add_columns: list[str] = field(default_factory=list)
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        result: dict[str, Any] = {"sql": self.sql, "table": self.table, "kind": self.kind,
                                  "changes": [c.to_json() for c in self.changes]}
        if self.add_columns:
            result["add_columns"] = self.add_columns
        if self.note:
            result["note"] = self.note
        return result


def _where(key: dict[str, Any]) -> str:
    return " and ".join(f"{k} = {literal(v)}" for k, v in key.items())


def insert(table: str, key_columns: tuple[str, ...], *rows: dict[str, Any]) -> Statement:
    """One INSERT of one or more rows (changes in VALUES order)."""
    columns = list(rows[0])
    values = ", ".join("(" + ", ".join(literal(r[c]) for c in columns) + ")" for r in rows)
    return Statement(
        f"insert into {table} ({', '.join(columns)}) values {values}", table,
        [Change("c", {k: r[k] for k in key_columns}, dict(r)) for r in rows],
    )


def update(table: str, key: dict[str, Any], values: dict[str, Any]) -> Statement:
    assignments = ", ".join(f"{c} = {literal(v)}" for c, v in values.items())
    return Statement(f"update {table} set {assignments} where {_where(key)}", table,
                     [Change("u", dict(key), dict(values))])


def delete(table: str, key: dict[str, Any]) -> Statement:
    return Statement(f"delete from {table} where {_where(key)}", table, [Change("d", dict(key))])


def change_key(table: str, old: dict[str, Any], new: dict[str, Any]) -> Statement:
    """A primary-key update: Debezium sends a delete of the old key and a create of the new."""
    assignments = ", ".join(f"{c} = {literal(v)}" for c, v in new.items())
    return Statement(
        f"update {table} set {assignments} where {_where(old)}", table,
        [Change("d", dict(old)), Change("c", dict(new), dict(new))],
        kind="key_change",
        note="primary-key change: delete of the old key, then create of the new key (the other columns move along)",
    )


def add_columns(table: str, columns: dict[str, str]) -> Statement:
    """ALTER TABLE ... ADD COLUMN for each (name, type)."""
    clauses = ", ".join(f"add column {name} {kind}" for name, kind in columns.items())
    return Statement(f"alter table {table} {clauses}", table, kind="add_columns", add_columns=list(columns))


# --- PostgreSQL (Pagila schema, database pagila) ---------------------------------------------
ID = 95001
PG_KEYS: dict[str, tuple[str, ...]] = {
    "actor": ("actor_id",), "address": ("address_id",), "category": ("category_id",),
    "city": ("city_id",), "country": ("country_id",), "customer": ("customer_id",),
    "film": ("film_id",), "inventory": ("inventory_id",), "language": ("language_id",),
    "rental": ("rental_id",), "staff": ("staff_id",), "payment": ("payment_id",),
}

# Columns Pagila's BEFORE UPDATE triggers overwrite on every update of a row, whatever
# the statement set: `last_updated()` sets last_update = now() on every table but payment
# (film.fulltext is recomputed on insert and update too, but never set by the workload).
PG_SET_BY_UPDATE_TRIGGERS: dict[str, list[str]] = {
    table: ["last_update"] for table in PG_KEYS if table != "payment"
}

# Generated (STORED) columns: never set by the workload; pgoutput before PostgreSQL 18 does
# not publish them, so streamed records lack them.
PG_GENERATED_COLUMNS: dict[str, list[str]] = {"customer": ["active"], "film": ["revenue_projection"]}


def _pg_insert(table: str, *rows: dict[str, Any]) -> Statement:
    return insert(table, PG_KEYS[table], *rows)


POSTGRES: list[tuple[str, list[Statement]]] = [
    ("inserts: own parent rows, every Pagila column type, NULLs, a payment (partitioned table)", [
        _pg_insert("country", {"country_id": ID, "country": "Fixtureland"}),
        _pg_insert("city", {"city_id": ID, "city": "Fixture City", "country_id": 1}),
        _pg_insert("language", {"language_id": ID, "name": "Esperanto".ljust(20)}),  # character(20)
        _pg_insert("category", {"category_id": ID, "name": "Fixture Shorts"}),
        _pg_insert(
            "actor",
            {"actor_id": 95001, "first_name": "ADA", "last_name": "LOVELACE"},
            {"actor_id": 95003, "first_name": "GRACE", "last_name": "HOPPER"},
        ),
        _pg_insert("address", {
            "address_id": ID, "address": "1 Fixture Lane", "address2": None, "district": "Testshire",
            "city_id": 1, "postal_code": "00000", "phone": "555-0100",
        }),
        _pg_insert("customer", {
            "customer_id": ID, "store_id": 1, "first_name": "ZOË", "last_name": "FIXTURE", "email": None,
            "address_id": 1, "activebool": False, "create_date": Date("1906-12-09"),
            "last_update": Timestamp("2001-02-03 04:05:06.789012"),
        }),
        _pg_insert("film", {
            "film_id": ID, "title": "FIXTURE ODYSSEY", "description": "A small film recorded for the fixtures",
            "release_year": 2024, "language_id": 1, "original_language_id": None, "rental_duration": 5,
            "rental_rate": Numeric("2.99"), "length": 97, "replacement_cost": Numeric("20.00"),
            "rating": "PG-13", "special_features": ["Trailers", "Deleted Scenes"],
        }),
        _pg_insert("staff", {
            "staff_id": ID, "first_name": "FIX", "last_name": "TURE", "address_id": 1, "email": None,
            "store_id": 1, "active": True, "username": "fixture", "password": None, "picture": Bytea("00ff10"),
        }),
        _pg_insert("inventory", {"inventory_id": ID, "film_id": 1, "store_id": 1}),
        _pg_insert(
            "rental",
            {"rental_id": ID, "inventory_id": ID, "customer_id": 1, "staff_id": 1,
             "rental_period": Range("tsrange", '["2024-05-01 10:00:00.5",)')},
            {"rental_id": 95003, "inventory_id": ID, "customer_id": 1, "staff_id": 1,
             "rental_period": Range("tsrange", '["2024-04-01 09:00:00","2024-04-02 09:00:00")')},
        ),
        _pg_insert(
            "payment",
            {"payment_id": 95001, "customer_id": 1, "staff_id": 1, "rental_id": ID, "amount": Numeric("3.99"),
             "payment_date": Timestamp("2024-05-01 10:00:00.123456")},
            {"payment_id": 95002, "customer_id": 1, "staff_id": 1, "rental_id": ID, "amount": Numeric("1.00"),
             "payment_date": Timestamp("2007-02-15 12:00:00")},
        ),
    ]),
    ("several updates of one row in one transaction", [
        update("actor", {"actor_id": 95001}, {"last_name": "LOVELACE-1"}),
        update("actor", {"actor_id": 95001}, {"last_name": "LOVELACE-2"}),
        update("actor", {"actor_id": 95001}, {"first_name": "AUGUSTA"}),
        update("payment", {"payment_id": 95001}, {"amount": Numeric("4.99")}),
        update("payment", {"payment_id": 95001}, {"amount": Numeric("-0.50")}),
    ]),
    # On actor (or any table whose key other tables reference ON UPDATE CASCADE through a
    # smallint column) a key change to >= 95000 fails: the cascade casts the new key to
    # smallint even when nothing references the row. rental is referenced by payment
    # without an ON UPDATE action, through an integer column.
    ("a primary-key change", [
        change_key("rental", {"rental_id": 95003}, {"rental_id": 95004}),
    ]),
    ("deletes", [
        delete("actor", {"actor_id": 95003}),
        delete("category", {"category_id": ID}),
    ]),
    ("NULLs set and cleared; enum, domain, numeric, boolean, text[] and tsrange changes", [
        update("customer", {"customer_id": ID}, {"email": "zoe@example.org", "activebool": True}),
        update("address", {"address_id": ID}, {"address2": "Suite 9", "postal_code": None}),
        update("film", {"film_id": ID}, {
            "rating": "NC-17", "release_year": 2025, "rental_rate": Numeric("0.99"),
            "replacement_cost": Numeric("123.45"), "special_features": ["Commentaries"],
            "original_language_id": 1,
        }),
        update("staff", {"staff_id": ID}, {"active": False}),
        update("rental", {"rental_id": ID},
               {"rental_period": Range("tsrange", '["2024-05-01 10:00:00.5","2024-05-03 09:30:00"]')}),
    ]),
    ("a payment moved to another partition (its partition key changes)", [
        Statement(
            "update payment set payment_date = timestamp '2024-06-01 00:00:00' where payment_id = 95002",
            "payment",
            [Change("d", {"payment_id": 95002}),
             Change("c", {"payment_id": 95002}, {"payment_date": Timestamp("2024-06-01 00:00:00"),
                                                 "amount": Numeric("1.00")})],
            kind="partition_move",
            note="the row moves from partition payment_p2007_02 to payment_p2007_07_max: PostgreSQL logs a "
                 "delete and an insert, published under the root (publish_via_partition_root)",
        ),
    ]),
    ("big values, stored out of line (TOAST)", [
        update("film", {"film_id": ID}, {"description": BIG_TEXT, "special_features": BIG_ARRAY}),
        update("staff", {"staff_id": ID}, {"picture": BIG_BYTES}),
    ]),
    ("updates that leave the big values unchanged (Debezium sends the unavailable-value placeholder)", [
        update("film", {"film_id": ID}, {"rental_rate": Numeric("1.99")}),
        update("staff", {"staff_id": ID}, {"email": "fixture@example.org"}),
    ]),
    ("columns added while capturing (timestamptz and tstzrange, which Pagila lacks)", [
        add_columns("rental", {"checked_at": "timestamptz", "return_window": "tstzrange"}),
    ]),
    ("the new columns", [
        update("rental", {"rental_id": ID}, {
            "checked_at": TimestampTz("2024-05-02 03:04:05.123456+02:00"),
            "return_window": Range("tstzrange", '["2024-05-01 00:00:00+00","2024-05-08 00:00:00+00")'),
        }),
        _pg_insert("rental", {
            "rental_id": 95002, "inventory_id": ID, "customer_id": 1, "staff_id": 1,
            "rental_period": Range("tsrange", '["2024-06-01 08:00:00","2024-06-02 08:00:00"]'),
            "checked_at": TimestampTz("2024-06-01 08:00:00+00:00"),
            "return_window": Range("tstzrange", '["2024-06-01 08:00:00+00",)'),
        }),
        update("rental", {"rental_id": 95002}, {"return_window": Range("tstzrange", "empty")}),
    ]),
    ("deletes of wide rows (one with TOASTed values), and a deleted key inserted again", [
        delete("payment", {"payment_id": 95001}),
        delete("rental", {"rental_id": 95002}),
        delete("film", {"film_id": ID}),
        _pg_insert("actor", {"actor_id": 95003, "first_name": "GRACE", "last_name": "MURRAY"}),
    ]),
]

# --- MariaDB (movies_db.movies) ------------------------------------------------------------------
MOVIE_KEY = ("movie_id",)


def _movie_insert(*rows: dict[str, Any]) -> Statement:
    return insert("movies", MOVIE_KEY, *rows)


MARIADB: list[tuple[str, list[Statement]]] = [
    ("inserts: one statement, three rows (one binlog event, rows 0..2)", [
        _movie_insert(
            {"movie_id": 95001, "title": "The Binlog Position", "release_year": 2024},
            {"movie_id": 95002, "title": "Row Images", "release_year": 2025},
            {"movie_id": 95003, "title": "Schema Drift", "release_year": 2023},
        ),
    ]),
    ("several updates in one transaction, a NULL", [
        update("movies", {"movie_id": 95001}, {"title": "The Binlog Position (remastered)"}),
        update("movies", {"movie_id": 95001}, {"release_year": 2026}),
        update("movies", {"movie_id": 95002}, {"release_year": None}),
    ]),
    ("a primary-key change", [
        change_key("movies", {"movie_id": 95003}, {"movie_id": 95004}),
    ]),
    ("a delete", [
        delete("movies", {"movie_id": 95002}),
    ]),
    ("a column added while capturing", [
        add_columns("movies", {"country": "varchar(60)"}),
    ]),
    ("the new column", [
        update("movies", {"movie_id": 95001}, {"country": "NZ"}),
        _movie_insert({"movie_id": 95005, "title": "Ça tourne", "release_year": 2026, "country": "FR"}),
    ]),
    ("one statement updating two rows (one binlog event, rows 0 and 1, in primary-key order)", [
        Statement(
            "update movies set country = 'IS' where movie_id in (95001, 95005)", "movies",
            [Change("u", {"movie_id": 95001}, {"country": "IS"}),
             Change("u", {"movie_id": 95005}, {"country": "IS"})],
        ),
    ]),
]


def transactions_json(transactions: list[tuple[str, list[Statement]]]) -> list[dict[str, Any]]:
    return [{"label": label, "statements": [s.to_json() for s in statements]} for label, statements in transactions]


def postgres_scripts() -> list[str]:
    """One psql script per transaction."""
    return [
        "set client_encoding to 'UTF8';\nbegin;\n" + "".join(s.sql + ";\n" for s in statements) + "commit;\n"
        for _, statements in POSTGRES
    ]


def mariadb_scripts() -> list[str]:
    """One mariadb client script per transaction (a DDL statement commits on its own)."""
    return [
        "set names utf8mb4;\nstart transaction;\n" + "".join(s.sql + ";\n" for s in statements) + "commit;\n"
        for _, statements in MARIADB
    ]
