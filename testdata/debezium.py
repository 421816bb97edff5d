"""Debezium PostgreSQL connector (3.5.x, pgoutput) record builders.

Value encodings follow the connector defaults: decimal.handling.mode=precise,
time.precision.mode=adaptive, binary.handling.mode=bytes (base64 in JSON), range types
as PostgreSQL's text form, unchanged TOASTed values as the placeholder
`__debezium_unavailable_value` (text), an array holding it (arrays) or its bytes
(bytea). Generated columns appear only in snapshot records (pgoutput before
PostgreSQL 18 does not publish them). Deletes follow REPLICA IDENTITY DEFAULT as
recorded from Debezium 3.5 (tests/fixtures/debezium/README.md): `before` holds the real
key; other columns hold their constant default, else the type's zero when NOT NULL,
else null. Shapes: the change-event envelope, or the value after
the ExtractNewRecordState SMT (delete.handling.mode=rewrite,
add.fields=op,db,table,schema,lsn,source.ts_ms); either optionally wrapped by
JsonConverter (schemas.enable=true) as {"schema": ..., "payload": ...}.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import date, datetime, timezone
from decimal import Decimal

CONNECTOR_VERSION = "3.5.0.Final"
SERVER_NAME = "pagila"
DB_NAME = "pagila"
PG_SCHEMA = "public"

EPOCH = datetime(1970, 1, 1)

ENVELOPE = "envelope"
FLATTENED = "flattened"

SNAPSHOT_ALLOWED = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"

UNAVAILABLE = "__debezium_unavailable_value"


def topic_for(table: str) -> str:
    return f"{SERVER_NAME}.{PG_SCHEMA}.{table}"


# --- values ----------------------------------------------------------------------
def decimal_bytes(value: Decimal, scale: int) -> str:
    """Kafka Connect Decimal: base64 of the unscaled value's two's-complement bytes,
    minimal length, big-endian (java.math.BigInteger#toByteArray)."""
    unscaled = int(value.scaleb(scale).to_integral_exact())
    magnitude = unscaled if unscaled >= 0 else -unscaled - 1
    length = magnitude.bit_length() // 8 + 1
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode("ascii")


def micro_timestamp(value: datetime) -> int:
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def zoned_timestamp(value: datetime) -> str:
    """io.debezium.time.ZonedTimestamp: ISO-8601 in UTC, always 6 fraction digits."""
    value = value.astimezone(timezone.utc) if value.tzinfo else value
    return value.strftime("%Y-%m-%dT%H:%M:%S") + f".{value.microsecond:06d}Z"


def pg_timestamp_text(value: datetime) -> str:
    """PostgreSQL's text output of a timestamp (DateStyle ISO): fraction without trailing zeros."""
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "")


def range_text(value: dict, with_zone: bool = False) -> str:
    """A tsrange as PostgreSQL prints it: `["2005-05-24 22:53:30","2005-05-26 22:04:30")`,
    `empty`, an unbounded side left empty (bounds with a space are double-quoted). A
    tstzrange (bounds in UTC) as a server in time zone UTC prints it: `...+00`."""
    if value["is_empty"]:
        return "empty"

    zone = "+00" if with_zone else ""

    def bound(b):
        return "" if b is None else '"' + pg_timestamp_text(b) + zone + '"'

    return (("[" if value["lower_inclusive"] else "(") + bound(value["lower"]) + ","
            + bound(value["upper"]) + ("]" if value["upper_inclusive"] else ")"))


def unavailable_value(pg_type: str):
    """What Debezium sends for an unchanged TOASTed value of this type."""
    if pg_type == "bytea":
        return base64.b64encode(UNAVAILABLE.encode("ascii")).decode("ascii")
    if pg_type.endswith("[]"):
        return [UNAVAILABLE]
    return UNAVAILABLE


def _numeric_ps(pg_type: str) -> tuple[int, int]:
    m = re.match(r"numeric\((\d+),\s*(\d+)\)", pg_type)
    return int(m.group(1)), int(m.group(2))


def encode_value(pg_type: str, value):
    if value is None:
        return None
    if pg_type.startswith("numeric"):
        return decimal_bytes(value, _numeric_ps(pg_type)[1])
    if pg_type.startswith("timestamp without time zone"):
        return micro_timestamp(value)
    if pg_type.startswith("timestamp with time zone"):
        return zoned_timestamp(value)
    if pg_type == "date":
        return (value - date(1970, 1, 1)).days
    if pg_type == "bytea":
        return base64.b64encode(value).decode("ascii")
    if pg_type.endswith("[]"):
        return list(value)
    if pg_type in ("tsrange", "tstzrange"):
        return range_text(value, with_zone=pg_type == "tstzrange")
    return value  # int, str, bool


def zero_value(pg_type: str):
    """The JSON value Debezium gives a NOT NULL column it has no value for."""
    if pg_type in ("integer", "smallint", "bigint", "public.year") or pg_type.startswith("timestamp without") \
            or pg_type == "date":
        return 0
    if pg_type.startswith("numeric"):
        return decimal_bytes(Decimal(0), _numeric_ps(pg_type)[1])
    if pg_type == "boolean":
        return False
    if pg_type.endswith("[]"):
        return []
    return ""  # text, varchar, bpchar, enum, tsvector, ranges, bytea (no bytes), timestamptz


def default_value(pg_type: str, default: str):
    """A column's constant default as the connector's schema states it."""
    if pg_type.startswith("numeric"):
        return decimal_bytes(Decimal(default), _numeric_ps(pg_type)[1])
    if pg_type in ("integer", "smallint", "bigint", "public.year"):
        return int(default)
    if pg_type == "boolean":
        return default == "true"
    return default


def encode_row(columns: dict[str, str], row: dict | None, unavailable=(), old_key_of: dict | None = None) -> dict | None:
    """A row image; `unavailable` columns get the unchanged-TOAST placeholder. With
    `old_key_of` (the table info; a delete under REPLICA IDENTITY DEFAULT) only the key
    is real: other columns get their constant default, else their type's zero when NOT
    NULL, else null."""
    if row is None:
        return None
    out = {}
    for c, t in columns.items():
        if c in unavailable:
            out[c] = unavailable_value(t)
        elif old_key_of is not None and c not in old_key_of["primary_key"]:
            if c in old_key_of["defaults"]:
                out[c] = default_value(t, old_key_of["defaults"][c])
            elif c in old_key_of["not_null"]:
                out[c] = zero_value(t)
            else:
                out[c] = None
        else:
            out[c] = encode_value(t, row.get(c))
    return out


def event_columns(info: dict, ev: dict) -> dict[str, str]:
    """The columns an event carries: generated columns only in snapshot reads; columns
    added by ALTER TABLE only in events after it."""
    columns = info["columns"]
    if ev["snapshot"] == "false" and info.get("generated"):
        columns = {c: t for c, t in columns.items() if c not in info["generated"]}
    if ev.get("altered"):
        columns = {**columns, **info["added_later"]}
    return columns


# --- Connect schemas ---------------------------------------------------------------
def field_schema(name: str, pg_type: str, optional: bool, default: str | None,
                 enums: dict[str, list[str]]) -> dict:
    s: dict = {}
    t = pg_type
    if t in ("integer", "public.year"):
        s["type"] = "int32"
    elif t == "smallint":
        s["type"] = "int16"
    elif t == "bigint":
        s["type"] = "int64"
    elif t == "boolean":
        s["type"] = "boolean"
    elif t.startswith("numeric"):
        p, sc = _numeric_ps(t)
        s.update(type="bytes", name="org.apache.kafka.connect.data.Decimal", version=1,
                 parameters={"scale": str(sc), "connect.decimal.precision": str(p)})
    elif t.startswith("timestamp without time zone"):
        s.update(type="int64", name="io.debezium.time.MicroTimestamp", version=1)
    elif t.startswith("timestamp with time zone"):
        s.update(type="string", name="io.debezium.time.ZonedTimestamp", version=1)
    elif t == "date":
        s.update(type="int32", name="io.debezium.time.Date", version=1)
    elif t == "bytea":
        s["type"] = "bytes"
    elif t.endswith("[]"):
        s.update(type="array", items={"type": "string", "optional": True})
    elif t == "tsvector":
        s.update(type="string", name="io.debezium.data.Tsvector", version=1)
    elif t.startswith("public.") and t[len("public."):] in enums:
        s.update(type="string", name="io.debezium.data.Enum", version=1,
                 parameters={"allowed": ",".join(enums[t[len("public."):]])})
    else:  # varchar, text, bpchar, tsvector
        s["type"] = "string"
    s["optional"] = optional
    if default is not None:
        s["default"] = default_value(t, default)
    # JsonConverter order: type, optional, name, version, parameters, default, field
    ordered = {"type": s["type"]}
    if "items" in s:
        ordered["items"] = s["items"]
    ordered["optional"] = s["optional"]
    for k in ("name", "version", "parameters", "default"):
        if k in s:
            ordered[k] = s[k]
    ordered["field"] = name
    return ordered


def value_fields(info: dict, enums: dict[str, list[str]], columns: dict[str, str] | None = None) -> list[dict]:
    columns = info["columns"] if columns is None else columns
    return [field_schema(c, t, c not in info["not_null"] or c in info.get("generated", ()),
                         info["defaults"].get(c), enums)
            for c, t in columns.items()]


def source_schema() -> dict:
    def f(fname, typ, optional=False, **extra):
        d = {"type": typ, "optional": optional}
        d.update(extra)
        d["field"] = fname
        return d
    return {
        "type": "struct",
        "fields": [
            f("version", "string"), f("connector", "string"), f("name", "string"),
            f("ts_ms", "int64"),
            f("snapshot", "string", True, name="io.debezium.data.Enum", version=1,
              parameters={"allowed": SNAPSHOT_ALLOWED}, default="false"),
            f("db", "string"), f("sequence", "string", True),
            f("ts_us", "int64", True), f("ts_ns", "int64", True),
            f("schema", "string"), f("table", "string"),
            f("txId", "int64", True), f("lsn", "int64", True), f("xmin", "int64", True),
        ],
        "optional": False,
        "name": "io.debezium.connector.postgresql.Source",
        "field": "source",
    }


def envelope_schema(table: str, info: dict, enums, columns: dict[str, str] | None = None) -> dict:
    topic = topic_for(table)
    fields = value_fields(info, enums, columns)
    value = {"type": "struct", "fields": fields, "optional": True, "name": f"{topic}.Value"}
    return {
        "type": "struct",
        "fields": [
            dict(value, field="before"),
            dict(value, field="after"),
            source_schema(),
            {"type": "struct", "fields": [
                {"type": "string", "optional": False, "field": "id"},
                {"type": "int64", "optional": False, "field": "total_order"},
                {"type": "int64", "optional": False, "field": "data_collection_order"},
            ], "optional": True, "name": "event.block", "version": 1, "field": "transaction"},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            {"type": "int64", "optional": True, "field": "ts_us"},
            {"type": "int64", "optional": True, "field": "ts_ns"},
        ],
        "optional": False,
        "name": f"{topic}.Envelope",
        "version": 2,
    }


FLATTENED_EXTRA = [("__op", "string"), ("__db", "string"), ("__table", "string"),
                   ("__schema", "string"), ("__lsn", "int64"), ("__source_ts_ms", "int64"),
                   ("__deleted", "string")]


def flattened_schema(table: str, info: dict, enums, columns: dict[str, str] | None = None) -> dict:
    fields = value_fields(info, enums, columns)
    fields += [{"type": t, "optional": True, "field": n} for n, t in FLATTENED_EXTRA]
    return {"type": "struct", "fields": fields, "optional": False,
            "name": f"{topic_for(table)}.Value"}


# --- records -------------------------------------------------------------------------
def source_block(table: str, ev: dict) -> dict:
    us = ev["source_ts_us"]
    return {
        "version": CONNECTOR_VERSION,
        "connector": "postgresql",
        "name": SERVER_NAME,
        "ts_ms": us // 1000,
        "snapshot": ev["snapshot"],
        "db": DB_NAME,
        "sequence": json.dumps([str(ev["last_commit_lsn"]), str(ev["lsn"])],
                               separators=(",", ":")),
        "ts_us": us,
        "ts_ns": us * 1000,
        "schema": PG_SCHEMA,
        "table": table,
        "txId": ev["txId"],
        "lsn": ev["lsn"],
        "xmin": None,
    }


def envelope_payload(info: dict, ev: dict) -> dict:
    cols = event_columns(info, ev)
    return {
        "before": encode_row(cols, ev["before"], old_key_of=info),
        "after": encode_row(cols, ev["after"], ev.get("unavailable", ())),
        "source": source_block(ev["table"], ev),
        "transaction": None,
        "op": ev["op"],
        "ts_ms": ev["ts_us"] // 1000,
        "ts_us": ev["ts_us"],
        "ts_ns": ev["ts_us"] * 1000,
    }


def flattened_payload(info: dict, ev: dict) -> dict:
    deleted = ev["op"] == "d"
    cols = event_columns(info, ev)
    if deleted:
        row = encode_row(cols, ev["before"], old_key_of=info)
    else:
        row = encode_row(cols, ev["after"], ev.get("unavailable", ()))
    row.update({
        "__op": ev["op"],
        "__db": DB_NAME,
        "__table": ev["table"],
        "__schema": PG_SCHEMA,
        "__lsn": ev["lsn"],
        "__source_ts_ms": ev["source_ts_us"] // 1000,
        "__deleted": "true" if deleted else "false",
    })
    return row


def record_value(shape: str, wrapped: bool, info: dict, enums, ev: dict) -> dict:
    if shape == ENVELOPE:
        payload = envelope_payload(info, ev)
        schema = envelope_schema(ev["table"], info, enums, event_columns(info, ev)) if wrapped else None
    else:
        payload = flattened_payload(info, ev)
        schema = flattened_schema(ev["table"], info, enums, event_columns(info, ev)) if wrapped else None
    return {"schema": schema, "payload": payload} if wrapped else payload


def dumps(value) -> str:
    return "null" if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- partitioning ----------------------------------------------------------------------
def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils#murmur2), as unsigned 32 bits."""
    mask = 0xFFFFFFFF
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail, rem = length & ~3, length % 4
    if rem == 3:
        h ^= data[tail + 2] << 16
    if rem >= 2:
        h ^= data[tail + 1] << 8
    if rem >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def key_partition(key: dict, partitions: int) -> int:
    """Kafka's default partitioner on the JSON-serialized record key (schemas disabled)."""
    if partitions == 1:
        return 0
    data = json.dumps(key, separators=(",", ":")).encode("utf-8")
    return (murmur2(data) & 0x7FFFFFFF) % partitions
