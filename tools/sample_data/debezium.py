"""Debezium PostgreSQL connector (2.7.x, pgoutput) record builders.

Value encodings follow the connector defaults: decimal.handling.mode=precise,
time.precision.mode=adaptive. Shapes: the change-event envelope, or the value after
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

CONNECTOR_VERSION = "2.7.3.Final"
SERVER_NAME = "pagila"
DB_NAME = "pagila"
PG_SCHEMA = "public"

EPOCH = datetime(1970, 1, 1)

ENVELOPE = "envelope"
FLATTENED = "flattened"

SNAPSHOT_ALLOWED = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"


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
    value = value.astimezone(timezone.utc) if value.tzinfo else value
    base = value.strftime("%Y-%m-%dT%H:%M:%S")
    return base + (f".{value.microsecond:06d}" if value.microsecond else "") + "Z"


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
    return value  # int, str, bool


def encode_row(columns: dict[str, str], row: dict | None) -> dict | None:
    if row is None:
        return None
    return {c: encode_value(t, row.get(c)) for c, t in columns.items()}


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
    elif t.startswith("public.") and t[len("public."):] in enums:
        s.update(type="string", name="io.debezium.data.Enum", version=1,
                 parameters={"allowed": ",".join(enums[t[len("public."):]])})
    else:  # varchar, text, bpchar, tsvector
        s["type"] = "string"
    s["optional"] = optional
    if default is not None:
        if t.startswith("numeric"):
            s["default"] = decimal_bytes(Decimal(default), _numeric_ps(t)[1])
        elif s["type"] in ("int16", "int32", "int64"):
            s["default"] = int(default)
        else:
            s["default"] = default
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


def value_fields(info: dict, enums: dict[str, list[str]]) -> list[dict]:
    return [field_schema(c, t, c not in info["not_null"], info["defaults"].get(c), enums)
            for c, t in info["columns"].items()]


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


def envelope_schema(table: str, info: dict, enums) -> dict:
    topic = topic_for(table)
    fields = value_fields(info, enums)
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


def flattened_schema(table: str, info: dict, enums) -> dict:
    fields = value_fields(info, enums)
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
    cols = info["columns"]
    return {
        "before": encode_row(cols, ev["before"]),
        "after": encode_row(cols, ev["after"]),
        "source": source_block(ev["table"], ev),
        "transaction": None,
        "op": ev["op"],
        "ts_ms": ev["ts_us"] // 1000,
        "ts_us": ev["ts_us"],
        "ts_ns": ev["ts_us"] * 1000,
    }


def flattened_payload(info: dict, ev: dict) -> dict:
    deleted = ev["op"] == "d"
    row = encode_row(info["columns"], ev["before"] if deleted else ev["after"])
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
        schema = envelope_schema(ev["table"], info, enums) if wrapped else None
    else:
        payload = flattened_payload(info, ev)
        schema = flattened_schema(ev["table"], info, enums) if wrapped else None
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
