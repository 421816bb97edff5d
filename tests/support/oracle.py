"""Test oracle: the expected current state of a table, computed from the raw
Debezium change files in plain Python, independently of the project's SQL.

Rules:
- files are read per Kafka topic-partition in offset order (file name
  `<topic>+<partition>+<startOffset>.json`; line i has offset startOffset+i);
- `null` lines (tombstones) are skipped; a JsonConverter wrapper
  {"schema": ..., "payload": ...} is unwrapped;
- both shapes are understood: the Debezium envelope (op/before/after/source) and the
  ExtractNewRecordState value (`__op`, `__lsn`, `__deleted`, ...);
- each primary key's events are ordered by (source LSN, partition, offset), never by
  ts_ms; the last one wins; a delete removes the key;
- values are decoded from the PostgreSQL column type to the Python type Spark shows.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

# From pagila-schema.sql, columns in table order. film.revenue_projection is a
# GENERATED column: not in the COPY data and not published by pgoutput, so left out.
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
                    "special_features": "text[]", "fulltext": "tsvector"},
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
}

_EPOCH = datetime(1970, 1, 1)
_FILE_RE = re.compile(r"^(?P<topic>.+)\+(?P<partition>\d+)\+(?P<offset>\d+)\.json$")


def decode(pg_type: str, value):
    """One Debezium JSON value -> the Python value of the silver column."""
    if value is None:
        return None
    t = pg_type
    if t in ("integer", "smallint", "bigint", "public.year"):
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


def to_event(value: dict) -> tuple[int, dict, bool]:
    """(lsn, raw row, deleted) of one unwrapped record value, either shape."""
    if "op" in value and "source" in value:  # Debezium envelope
        deleted = value["op"] == "d"
        row = value["before"] if deleted else value["after"]
        return int(value["source"]["lsn"]), row, deleted
    if "__op" in value or "__deleted" in value:  # ExtractNewRecordState
        deleted = value.get("__deleted") in ("true", True) or value.get("__op") == "d"
        row = {k: v for k, v in value.items() if not k.startswith("__")}
        return int(value["__lsn"]), row, deleted
    raise ValueError(f"unknown record shape: {sorted(value)[:8]}")


def expected_current_state(files, table: str) -> list[dict]:
    """Latest non-deleted row per primary key, sorted by key, columns in table order."""
    spec = TABLES[table]
    cols, pk = spec["columns"], spec["primary_key"]
    latest: dict[tuple, tuple] = {}
    for rec in read_records(files):
        if rec["topic"] != spec["topic"]:
            continue
        lsn, row, deleted = to_event(rec["value"])
        key = tuple(decode(cols[c], row[c]) for c in pk)
        order = (lsn, rec["partition"], rec["offset"])
        if key not in latest or order > latest[key][0]:
            latest[key] = (order, row, deleted)
    result = []
    for key in sorted(latest):
        _, row, deleted = latest[key]
        if not deleted:
            result.append({c: decode(t, row.get(c)) for c, t in cols.items()})
    return result


def files_in(batch_dirs, table: str | None = None) -> list[Path]:
    """The sink files under the given batch folders (optionally only one table's topic)."""
    pattern = f"{TABLES[table]['topic']}+*.json" if table else "*+*+*.json"
    files: list[Path] = []
    for d in batch_dirs:
        files.extend(sorted(Path(d).rglob(pattern)))
    return files


def expected_current_state_from_batches(batch_dirs, table: str) -> list[dict]:
    """Same as expected_current_state over every file of `table` under the batch dirs."""
    return expected_current_state(files_in(batch_dirs, table), table)
