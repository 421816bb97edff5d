"""Test oracle: the expected current state of a table, computed from the raw
Debezium change files in plain Python, independently of the project's SQL.

Rules:
- files are read per Kafka topic-partition in offset order (file name
  `<topic>+<partition>+<startOffset>.json`; line i has offset startOffset+i);
- `null` lines (tombstones) are skipped; a JsonConverter wrapper
  {"schema": ..., "payload": ...} is unwrapped;
- both shapes are understood: the Debezium envelope (op/before/after/source) and the
  ExtractNewRecordState value (`__op`, `__lsn`, `__deleted`, ...);
- each primary key's events are ordered by (source position, partition, offset), never
  by ts_ms; the source position is the LSN (PostgreSQL) or the binlog (file, position,
  row) (MariaDB); the last one wins; a delete removes the key;
- an unchanged TOASTed value (Debezium's placeholder `__debezium_unavailable_value`: as
  text, as the one element of an array, or as base64 of its bytes) is not a value: the
  key keeps its latest earlier value;
- a delete's row image only names the key (REPLICA IDENTITY DEFAULT fills the other
  columns with defaults or zeros);
- a truncate (op `t`) removes every event ordered before it;
- a complete snapshot (the newest one whose last record Debezium marks with source
  snapshot `last` or `last_in_data_collection`; its records share one source position)
  removes every event that is both older in the source log and earlier in its Kafka
  partition than the snapshot's last record there (rows gone from a re-snapshot);
- a field missing from an event (a column added later to the source) is null;
- derived columns (a generated column PostgreSQL does not stream) are computed from the
  row as the source computes them;
- values are decoded from the source column type to the Python type Spark shows (a
  range as {lower, upper, lower_inclusive, upper_inclusive, is_empty}).
"""

from __future__ import annotations

import base64
import json
import re
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

# From pagila-schema.sql, columns in table order. film.revenue_projection and
# customer.active are GENERATED columns, not published by pgoutput: silver derives them
# (see "derived").
TS = "timestamp without time zone"
TABLES: dict[str, dict] = {
    "actor": {
        "topic": "pagila.public.actor",
        "primary_key": ["actor_id"],
        "columns": {"actor_id": "integer", "first_name": "character varying(45)",
                    "last_name": "character varying(45)", "last_update": TS},
    },
    "film": {
        "topic": "pagila.public.film",
        "primary_key": ["film_id"],
        "columns": {"film_id": "integer", "title": "character varying(255)",
                    "description": "text", "release_year": "public.year",
                    "language_id": "smallint", "original_language_id": "smallint",
                    "rental_duration": "smallint", "rental_rate": "numeric(4,2)",
                    "length": "smallint", "replacement_cost": "numeric(5,2)",
                    "rating": "public.mpaa_rating", "last_update": TS,
                    "special_features": "text[]", "fulltext": "tsvector",
                    "revenue_projection": "numeric(5,2)"},
        # GENERATED ALWAYS AS ((rental_duration)::numeric * rental_rate) STORED
        "derived": {"revenue_projection": lambda row: None
                    if row["rental_duration"] is None or row["rental_rate"] is None
                    else (row["rental_duration"] * row["rental_rate"]).quantize(Decimal("0.01"))},
    },
    "film_actor": {
        "topic": "pagila.public.film_actor",
        "primary_key": ["actor_id", "film_id"],
        "columns": {"actor_id": "smallint", "film_id": "smallint", "last_update": TS},
    },
    "category": {
        "topic": "pagila.public.category",
        "primary_key": ["category_id"],
        "columns": {"category_id": "integer", "name": "character varying(25)",
                    "last_update": TS},
    },
    "film_category": {
        "topic": "pagila.public.film_category",
        "primary_key": ["film_id", "category_id"],
        "columns": {"film_id": "smallint", "category_id": "smallint", "last_update": TS},
    },
    "language": {
        "topic": "pagila.public.language",
        "primary_key": ["language_id"],
        "columns": {"language_id": "integer", "name": "character(20)", "last_update": TS},
    },
    "address": {
        "topic": "pagila.public.address",
        "primary_key": ["address_id"],
        "columns": {"address_id": "integer", "address": "character varying(50)",
                    "address2": "character varying(50)", "district": "character varying(20)",
                    "city_id": "smallint", "postal_code": "character varying(10)",
                    "phone": "character varying(20)", "last_update": TS},
    },
    "city": {
        "topic": "pagila.public.city",
        "primary_key": ["city_id"],
        "columns": {"city_id": "integer", "city": "character varying(50)",
                    "country_id": "smallint", "last_update": TS},
    },
    "country": {
        "topic": "pagila.public.country",
        "primary_key": ["country_id"],
        "columns": {"country_id": "integer", "country": "character varying(50)",
                    "last_update": TS},
    },
    "staff": {
        "topic": "pagila.public.staff",
        "primary_key": ["staff_id"],
        "columns": {"staff_id": "integer", "first_name": "character varying(45)",
                    "last_name": "character varying(45)", "address_id": "smallint",
                    "email": "character varying(50)", "store_id": "smallint",
                    "active": "boolean", "username": "character varying(16)",
                    "password": "character varying(40)", "last_update": TS,
                    "picture": "bytea"},
    },
    "customer": {
        "topic": "pagila.public.customer",
        "primary_key": ["customer_id"],
        "columns": {"customer_id": "integer", "store_id": "smallint",
                    "first_name": "character varying(45)", "last_name": "character varying(45)",
                    "email": "character varying(50)", "address_id": "smallint",
                    "activebool": "boolean", "create_date": "date", "last_update": TS,
                    "active": "smallint"},
        # GENERATED ALWAYS AS (CASE WHEN (activebool IS TRUE) THEN 1 ELSE 0 END) STORED
        "derived": {"active": lambda row: 1 if row["activebool"] is True else 0},
    },
    "inventory": {
        "topic": "pagila.public.inventory",
        "primary_key": ["inventory_id"],
        "columns": {"inventory_id": "integer", "film_id": "smallint", "store_id": "smallint",
                    "last_update": TS},
    },
    "rental": {
        "topic": "pagila.public.rental",
        "primary_key": ["rental_id"],
        "columns": {"rental_id": "integer", "inventory_id": "integer", "customer_id": "smallint",
                    "staff_id": "smallint", "last_update": TS, "rental_period": "tsrange",
                    "checked_at": "timestamp with time zone", "return_window": "tstzrange"},
        # not in Pagila: added by ALTER TABLE while capturing (older events lack them)
        "added_later": ["checked_at", "return_window"],
    },
    "payment": {
        "topic": "pagila.public.payment",
        # the partitioned root has no primary key; the connector is given payment_id
        "primary_key": ["payment_id"],
        "columns": {"payment_id": "integer", "customer_id": "smallint", "staff_id": "smallint",
                    "rental_id": "integer", "amount": "numeric(5,2)", "payment_date": TS},
    },
    # MariaDB movies_db.movies; `country` was added later (ALTER TABLE)
    "movies": {
        "topic": "mariadb.movies_db.movies",
        "primary_key": ["movie_id"],
        "columns": {"movie_id": "int(11)", "title": "varchar(200)", "release_year": "year(4)",
                    "country": "varchar(60)"},
    },
}

PAGILA_TABLES = [t for t, spec in TABLES.items() if spec["topic"].startswith("pagila.")]

UNAVAILABLE = "__debezium_unavailable_value"

_EPOCH = datetime(1970, 1, 1)
_FILE_RE = re.compile(r"^(?P<topic>.+)\+(?P<partition>\d+)\+(?P<offset>\d+)\.json$")


def is_unavailable(pg_type: str, value) -> bool:
    """Debezium's unchanged-TOAST placeholder, in the form it takes for this type."""
    if pg_type == "bytea":
        return isinstance(value, str) and base64.b64decode(value) == UNAVAILABLE.encode()
    if pg_type.endswith("[]"):
        return value == [UNAVAILABLE]
    return value == UNAVAILABLE


def _pg_timestamp(text: str, with_zone: bool) -> datetime:
    """PostgreSQL's timestamp text: `2005-05-24 22:53:30[.f...][+hh[:mm]]` -> naive
    (tstzrange: the UTC instant)."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.(\d{1,6}))?([+-]\d\d(?::?\d\d)?)?", text)
    if not m:
        raise ValueError(f"not a PostgreSQL timestamp: {text!r}")
    dt = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
    if m.group(2):
        dt = dt.replace(microsecond=int(m.group(2).ljust(6, "0")))
    if with_zone and m.group(3):
        sign = -1 if m.group(3)[0] == "-" else 1
        digits = m.group(3)[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        dt = dt - sign * offset
    return dt


def decode_range(pg_type: str, text: str) -> dict:
    """A range's text form -> {lower, upper, lower_inclusive, upper_inclusive, is_empty}
    (PostgreSQL's lower(), upper(), lower_inc(), upper_inc(), isempty()); an unbounded or
    infinite bound is None (PostgreSQL prints an unbounded side as exclusive)."""
    if text == "empty":
        return {"lower": None, "upper": None, "lower_inclusive": False, "upper_inclusive": False,
                "is_empty": True}
    opening, closing, body = text[0], text[-1], text[1:-1]
    assert opening in "[(" and closing in "])", text
    bounds, current, quoted = [], "", False
    for ch in body:  # split at the comma outside double quotes
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            bounds.append(current)
            current = ""
        else:
            current += ch
    bounds.append(current)
    assert len(bounds) == 2, text
    values = [None if b in ("", "infinity", "-infinity") else _pg_timestamp(b, pg_type == "tstzrange")
              for b in bounds]
    return {"lower": values[0], "upper": values[1],
            "lower_inclusive": opening == "[", "upper_inclusive": closing == "]",
            "is_empty": False}


def decode(pg_type: str, value):
    """One Debezium JSON value -> the Python value of the silver column."""
    if value is None:
        return None
    t = pg_type
    if t in ("integer", "smallint", "bigint", "public.year") or t.startswith(("int(", "year(")):
        return int(value)
    if t.startswith("numeric"):
        scale = int(re.search(r",\s*(\d+)\)", t).group(1))
        if isinstance(value, str):  # precise mode: base64 two's-complement unscaled int
            unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
            return Decimal(unscaled).scaleb(-scale)
        return Decimal(str(value)).quantize(Decimal(1).scaleb(-scale))  # double/string modes
    if t.startswith("timestamp without time zone"):
        if isinstance(value, int):  # MicroTimestamp (adaptive, precision 6)
            return _EPOCH + timedelta(microseconds=value)
        return datetime.fromisoformat(value.replace("Z", ""))
    if t.startswith("timestamp with time zone"):  # ZonedTimestamp
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return dt.astimezone(timezone.utc).replace(tzinfo=None)
    if t == "date":
        return date(1970, 1, 1) + timedelta(days=value)
    if t == "boolean":
        return bool(value)
    if t == "bytea":
        return base64.b64decode(value)
    if t.endswith("[]"):
        return [None if v is None else str(v) for v in value]
    if t in ("tsrange", "tstzrange"):
        return decode_range(t, value)
    return str(value)  # varchar, text, bpchar, enum, tsvector, domains over text


def _parse_name(path: Path) -> tuple[str, int, int]:
    m = _FILE_RE.match(path.name)
    if not m:
        raise ValueError(f"not a Kafka Connect S3 sink file name: {path}")
    return m.group("topic"), int(m.group("partition")), int(m.group("offset"))


def read_records(files) -> list[dict]:
    """All non-tombstone records as {topic, partition, offset, value}, in offset order
    per topic-partition."""
    out = []
    for f in sorted((Path(p) for p in files), key=_parse_name):
        topic, partition, start = _parse_name(f)
        with open(f, encoding="utf-8") as fh:
            for i, line in enumerate(fh.read().splitlines()):
                line = line.strip()
                if line == "" or line == "null":
                    continue
                value = json.loads(line)
                if value is None:
                    continue
                if isinstance(value, dict) and set(value) == {"schema", "payload"}:
                    value = value["payload"]
                    if value is None:
                        continue
                out.append({"topic": topic, "partition": partition, "offset": start + i,
                            "value": value})
    return out


def _position(fields: dict, prefix: str = "") -> tuple:
    """Source log position: (LSN,) for PostgreSQL, (binlog file, position, row) for MySQL/MariaDB."""
    if fields.get(prefix + "lsn") is not None:
        return (int(fields[prefix + "lsn"]),)
    return (fields[prefix + "file"], int(fields[prefix + "pos"]), int(fields.get(prefix + "row") or 0))


def to_event(value: dict) -> tuple[tuple, dict, bool]:
    """(source position, raw row, deleted) of one unwrapped record value, either shape."""
    if "op" in value and "source" in value:  # Debezium envelope
        deleted = value["op"] == "d"
        row = value["before"] if deleted else value["after"]
        return _position(value["source"]), row, deleted
    if "__op" in value or "__deleted" in value:  # ExtractNewRecordState
        deleted = value.get("__deleted") in ("true", True) or value.get("__op") == "d"
        row = {k: v for k, v in value.items() if not k.startswith("__")}
        return _position(value, "__"), row, deleted
    raise ValueError(f"unknown record shape: {sorted(value)[:8]}")


def _op_and_snapshot(value: dict) -> tuple[str | None, str | None]:
    if "op" in value and "source" in value:
        return value["op"], (value["source"] or {}).get("snapshot")
    return value.get("__op"), value.get("__snapshot")


def _log_position(position: tuple) -> tuple:
    """The part of a position a snapshot shares: LSN, or binlog file and position."""
    return position[:2] if len(position) == 3 else position


def superseded_by_resets(records: list[dict], truncates: bool = True):
    """A predicate on (position, partition, offset): is the event removed by the newest
    truncate (unless `truncates` is false) or by the newest complete snapshot among `records`?"""
    truncate_orders, snapshot_ends, snapshot_records = [], [], []
    for rec in records:
        op, snapshot = _op_and_snapshot(rec["value"])
        if op == "t":
            truncate_orders.append((_position(rec["value"]["source"]), rec["partition"], rec["offset"]))
        elif op == "r":
            position, _, _ = to_event(rec["value"])
            if snapshot in ("last", "last_in_data_collection"):
                snapshot_ends.append(_log_position(position))
            if snapshot not in (None, "false", "incremental"):
                snapshot_records.append((_log_position(position), rec["partition"], rec["offset"]))
    truncated_before = max(truncate_orders, default=None) if truncates else None
    snapshot_at = max(snapshot_ends, default=None)
    last_offsets: dict[int, int] = {}
    for position, partition, offset in snapshot_records:
        if position == snapshot_at:
            last_offsets[partition] = max(offset, last_offsets.get(partition, offset))

    def superseded(order: tuple) -> bool:
        position, partition, offset = order
        if truncated_before is not None and order < truncated_before:
            return True
        return (snapshot_at is not None and _log_position(position) < snapshot_at
                and partition in last_offsets and offset < last_offsets[partition])

    return superseded


def expected_current_state(files, table: str, deletes: str = "hard") -> list[dict]:
    """Latest non-deleted row per primary key, sorted by key, columns in table order.

    deletes="soft": every key, deleted ones too, with the values of its latest live
    event (null when it had none) and `_cdc_is_deleted`."""
    spec = TABLES[table]
    cols, pk = spec["columns"], spec["primary_key"]
    derived = spec.get("derived", {})
    events: dict[tuple, list] = {}
    records = [rec for rec in read_records(files) if rec["topic"] == spec["topic"]]
    superseded = superseded_by_resets(records)
    for rec in records:
        if _op_and_snapshot(rec["value"])[0] == "t":
            continue
        position, row, deleted = to_event(rec["value"])
        if superseded((position, rec["partition"], rec["offset"])):
            continue
        key = tuple(decode(cols[c], row[c]) for c in pk)
        events.setdefault(key, []).append(((position, rec["partition"], rec["offset"]), row, deleted))
    result = []
    for key in sorted(events):
        known: dict[str, object] = {}  # the key's latest real value per column
        live: dict[str, object] = {c: None for c in cols}  # values of the latest live event
        deleted = True
        for _, row, deleted in sorted(events[key], key=lambda e: e[0]):
            if deleted:  # a delete's row image holds the key; other columns are not values
                continue
            for c, t in cols.items():
                if c in derived:
                    continue
                raw = row.get(c)
                if is_unavailable(t, raw):
                    live[c] = known.get(c)
                else:
                    live[c] = known[c] = decode(t, raw)
        if deleted and deletes == "hard":
            continue
        live.update(zip(pk, key))
        for c, expression in derived.items():
            live[c] = expression(live)
        result.append({c: live[c] for c in cols} | ({"_cdc_is_deleted": deleted} if deletes == "soft" else {}))
    return result


def _source_ts_ms(value: dict) -> int | None:
    if "op" in value and "source" in value:
        return (value["source"] or {}).get("ts_ms")
    return value.get("__source_ts_ms")


def expected_history(files, table: str) -> list[dict]:
    """Every version of every key (SCD type 2), sorted by key and start, computed
    independently of the SQL: walk each key's events in source order; a live event whose
    values differ from the open version's (or with no open version) starts a version;
    a delete, a truncate or the next version ends it. Events a truncate supersedes stay
    (the truncate ends their versions); a complete snapshot's rule applies as in silver.

    Each version: the table's columns, `_cdc_start` / `_cdc_end` as (partition, offset)
    of the starting / ending record (end None while current), `_cdc_valid_from_ms` /
    `_cdc_valid_to_ms` (source ts_ms) and `_cdc_is_current`."""
    spec = TABLES[table]
    cols, pk = spec["columns"], spec["primary_key"]
    if spec.get("derived"):
        raise ValueError(f"{table}: history of derived columns is not modelled here")
    records = [rec for rec in read_records(files) if rec["topic"] == spec["topic"]]
    superseded = superseded_by_resets(records, truncates=False)
    truncates, events = [], {}
    for rec in records:
        value = rec["value"]
        op = _op_and_snapshot(value)[0]
        position = _position(value["source"]) if op == "t" else to_event(value)[0]
        order = (position, rec["partition"], rec["offset"])
        if superseded(order):
            continue
        if op == "t":
            truncates.append((order, None, True, _source_ts_ms(value)))
            continue
        _, row, deleted = to_event(value)
        key = tuple(decode(cols[c], row[c]) for c in pk)
        events.setdefault(key, []).append((order, row, deleted, _source_ts_ms(value)))
    result = []
    for key in sorted(events):
        known: dict[str, object] = {}
        versions: list[dict] = []
        current: dict | None = None
        for order, row, deleted, ts_ms in sorted(events[key] + truncates, key=lambda e: e[0]):
            where = (order[1], order[2])
            if deleted:
                if current is not None:
                    current.update(_cdc_end=where, _cdc_valid_to_ms=ts_ms, _cdc_is_current=False)
                current = None
                continue
            values = {}
            for c, t in cols.items():
                raw = row.get(c)
                if not is_unavailable(t, raw):
                    known[c] = decode(t, raw)
                values[c] = known.get(c)
            values.update(zip(pk, key))
            if current is not None and all(current[c] == values[c] for c in cols):
                continue  # same values: a replay or an unchanged re-snapshot
            if current is not None:
                current.update(_cdc_end=where, _cdc_valid_to_ms=ts_ms, _cdc_is_current=False)
            current = {**values, "_cdc_start": where, "_cdc_end": None, "_cdc_valid_from_ms": ts_ms,
                       "_cdc_valid_to_ms": None, "_cdc_is_current": True}
            versions.append(current)
        result.extend(versions)
    return result


def files_in(batch_dirs, table: str | None = None) -> list[Path]:
    """The sink files under the given batch folders (optionally only one table's topic)."""
    pattern = f"{TABLES[table]['topic']}+*.json" if table else "*+*+*.json"
    files: list[Path] = []
    for d in batch_dirs:
        files.extend(sorted(Path(d).rglob(pattern)))
    return files


def expected_current_state_from_batches(batch_dirs, table: str, deletes: str = "hard") -> list[dict]:
    """Same as expected_current_state over every file of `table` under the batch dirs."""
    return expected_current_state(files_in(batch_dirs, table), table, deletes)


def expected_address_locations(files) -> list[dict]:
    """gold.address_locations from the oracle's silver states: every address with its
    city and country when they exist, in address order."""
    cities = {r["city_id"]: r for r in expected_current_state(files, "city")}
    countries = {r["country_id"]: r for r in expected_current_state(files, "country")}
    rows = []
    for address in expected_current_state(files, "address"):
        city = cities.get(address["city_id"])
        country = countries.get(city["country_id"]) if city else None
        rows.append({
            **{c: address[c] for c in ("address_id", "address", "district", "postal_code")},
            "city_id": city["city_id"] if city else None, "city": city["city"] if city else None,
            "country_id": country["country_id"] if country else None,
            "country": country["country"] if country else None,
        })
    return rows
