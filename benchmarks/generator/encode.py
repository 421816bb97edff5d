"""Events as the JSON lines Debezium's PostgreSQL connector (pgoutput, REPLICA IDENTITY
DEFAULT, decimal.handling.mode=precise, time.precision.mode=adaptive) writes through
the JsonConverter, in both shapes.

Built by string formatting, not json.dumps of nested dicts: at 10M events that is the
difference between minutes and a quarter of an hour. tests/unit/test_bench_generator.py
checks every shape against testdata.debezium's dict builders.
"""

from __future__ import annotations

import base64
import json

from testdata import debezium

from .stream import COLUMNS, DATABASE, NOT_NULL, PG_SCHEMA, PRIMARY_KEY, SERVER, TABLE, TOPIC, Event, row_values

ENVELOPE = debezium.ENVELOPE
FLATTENED = debezium.FLATTENED
SHAPES = (ENVELOPE, FLATTENED)
TOMBSTONE = "null"

TABLE_INFO = {"columns": COLUMNS, "not_null": NOT_NULL, "defaults": {}, "primary_key": PRIMARY_KEY}


def _renamed(schema: dict) -> dict:
    """tools.sample_data names Connect schemas after its own server; name them after ours."""
    text = json.dumps(schema, separators=(",", ":"))
    return json.loads(text.replace(f'"{debezium.topic_for(TABLE)}.', f'"{TOPIC}.'))


def schema_json(shape: str) -> str:
    """The JsonConverter `schema` of the topic (schemas.enable=true), as compact JSON."""
    build = debezium.envelope_schema if shape == ENVELOPE else debezium.flattened_schema
    return json.dumps(_renamed(build(TABLE, TABLE_INFO, {})), separators=(",", ":"))


def _cents_base64(cents: int) -> str:
    """Kafka Connect Decimal (scale 2): the unscaled value's minimal big-endian two's complement, base64."""
    length = cents.bit_length() // 8 + 1
    return base64.b64encode(cents.to_bytes(length, "big", signed=True)).decode("ascii")


def _row(key: int, version: int, row_bytes: int) -> str:
    order_id, customer_id, status, cents, order_date, updated_at, note = row_values(key, version, row_bytes)
    return (f'{{"order_id":{order_id},"customer_id":{customer_id},"status":"{status}",'
            f'"amount":"{_cents_base64(cents)}","order_date":{order_date},'
            f'"updated_at":{updated_at},"note":"{note}"')


# A delete under REPLICA IDENTITY DEFAULT: the key; NOT NULL columns their type's zero, others null.
_ZERO_AMOUNT = _cents_base64(0)


def _key_only_row(key: int) -> str:
    return (f'{{"order_id":{key},"customer_id":0,"status":"","amount":"{_ZERO_AMOUNT}",'
            f'"order_date":0,"updated_at":0,"note":null')


def _source(ev: Event) -> str:
    return (f'{{"version":"{debezium.CONNECTOR_VERSION}","connector":"postgresql","name":"{SERVER}",'
            f'"ts_ms":{ev.commit_us // 1000},"snapshot":"{"true" if ev.op == "r" else "false"}","db":"{DATABASE}",'
            f'"sequence":"[\\"{ev.last_commit_lsn}\\",\\"{ev.lsn}\\"]","ts_us":{ev.commit_us},'
            f'"ts_ns":{ev.commit_us * 1000},"schema":"{PG_SCHEMA}","table":"{TABLE}",'
            f'"txId":{ev.tx_id},"lsn":{ev.lsn},"xmin":null}}')


def envelope(ev: Event, row_bytes: int) -> str:
    """The change-event envelope: updates carry before=null (REPLICA IDENTITY DEFAULT)."""
    before = _key_only_row(ev.key) + "}" if ev.op == "d" else "null"
    after = "null" if ev.op == "d" else _row(ev.key, ev.version, row_bytes) + "}"
    return (f'{{"before":{before},"after":{after},"source":{_source(ev)},"transaction":null,'
            f'"op":"{ev.op}","ts_ms":{ev.emitted_us // 1000},"ts_us":{ev.emitted_us},'
            f'"ts_ns":{ev.emitted_us * 1000}}}')


def flattened(ev: Event, row_bytes: int) -> str:
    """After ExtractNewRecordState (delete.handling.mode=rewrite,
    add.fields=op,db,table,schema,lsn,source.ts_ms)."""
    deleted = ev.op == "d"
    row = _key_only_row(ev.key) if deleted else _row(ev.key, ev.version, row_bytes)
    return (f'{row},"__op":"{ev.op}","__db":"{DATABASE}","__table":"{TABLE}","__schema":"{PG_SCHEMA}",'
            f'"__lsn":{ev.lsn},"__source_ts_ms":{ev.commit_us // 1000},'
            f'"__deleted":"{"true" if deleted else "false"}"}}')


def record_lines(ev: Event, shape: str, wrapped_schema: str | None, row_bytes: int) -> list[str]:
    """The Kafka record values the event becomes: the record, then for an envelope
    delete the tombstone Debezium sends after it (tombstones.on.delete=true)."""
    payload = envelope(ev, row_bytes) if shape == ENVELOPE else flattened(ev, row_bytes)
    line = payload if wrapped_schema is None else f'{{"schema":{wrapped_schema},"payload":{payload}}}'
    if shape == ENVELOPE and ev.op == "d":
        return [line, TOMBSTONE]
    return [line]


def key_json(key: int) -> str:
    """The record key (JsonConverter, schemas disabled): what Kafka partitions by."""
    return f'{{"order_id":{key}}}'
