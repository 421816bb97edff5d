"""Schema registry wire format -> JsonConverter JSON (ingestion.avro_wire), on real records.

tests/fixtures/debezium-avro holds what Debezium wrote through Apicurio's AvroConverter
for the scripted workload (tools/record_fixtures/avro.py), each record beside the same
event as the JSON connector of the same source wrote it. That JSON, written by Kafka
Connect's JsonConverter, is the expectation: no value below is derived from the Avro side.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from ingestion import avro_wire, kafka_source, transform

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "debezium-avro"
SCHEMAS = {int(k): v for k, v in json.loads((FIXTURES / "schemas.json").read_text()).items()}
RAW = "_topic string, _partition int, _offset bigint, value binary, key binary"
# Differ between two connectors reading the same change: their name and when they saw it
# (for a snapshot read, `source` times are when each connector's own snapshot ran).
PER_CONNECTOR_SOURCE_FIELDS = {"name"}
PER_SNAPSHOT_SOURCE_FIELDS = {"ts_ms", "ts_us", "ts_ns"}
PER_CONNECTOR_TOP_FIELDS = {"ts_ms", "ts_us", "ts_ns"}
BRONZE_COMPARED = ["_shape", "_op", "_deleted", "_before", "_after", "_source_lsn", "_source_binlog_file",
                   "_source_binlog_pos", "_source_binlog_row", "_source_tx_id", "_source_snapshot", "_status",
                   "reason"]


def _records() -> list[dict[str, Any]]:
    records = []
    for path in sorted(FIXTURES.glob("*/*.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines()]
    return records


RECORDS = _records()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _payload(text: str | None) -> Any:
    """The JSON connector's record without JsonConverter's schema wrapper."""
    if text is None:
        return None
    document = json.loads(text)
    if isinstance(document, dict) and set(document) == {"schema", "payload"}:
        return document["payload"]
    return document


def _twin_topic(topic: str) -> str:
    return topic.replace("pagila_avro.", "pagila.", 1).replace("mariadb_avro.", "mariadb.", 1)


# Refused when Avro is expected, beside the real records (offsets the fixtures do not use).
REFUSED_TOPIC = "mariadb_avro.movies_db.movies"
_GOOD = next(r for r in RECORDS if r["value"] is not None and r["topic"] == REFUSED_TOPIC)
REFUSED = [
    (REFUSED_TOPIC, 0, 1007, b'{"op":"c"}', _bytes(_GOOD["key"])),  # JSON text
    (REFUSED_TOPIC, 0, 1008, _bytes(_GOOD["value"])[:6], _bytes(_GOOD["key"])),  # body cut short
    (REFUSED_TOPIC, 0, 1009, None, _bytes(_GOOD["key"])),  # a tombstone stays one
]
LINES = "_topic string, _partition int, _offset bigint, value string, key string"


@pytest.fixture(scope="module")
def rendered(spark) -> dict[tuple[str, int], dict[str, Any]]:
    raw = spark.createDataFrame(
        [(r["topic"], r["partition"], r["offset"], _bytes(r["value"]), _bytes(r["key"])) for r in RECORDS]
        + REFUSED, RAW)
    rows = avro_wire.decode_records(raw, SCHEMAS).collect()
    return {(row["_topic"], row["_offset"]): row.asDict() for row in rows}


def _bronze(spark, lines, topics: list[str]) -> dict[tuple[str, int], dict[str, Any]]:
    prepared = transform.prepare(kafka_source.to_lines(lines, kafka_source.topic_tables(sorted(set(topics)))), {})
    return {(row["_topic"].split(".", 1)[1], row["_offset"]): row.asDict() for row in prepared.collect()}


@pytest.fixture(scope="module")
def avro_bronze(spark, rendered) -> dict[tuple[str, int], dict[str, Any]]:
    """The rendered records (refused ones included) through the JSON path's transform."""
    lines = spark.createDataFrame(
        [(t, row["_partition"], o, row["value"], row["key"], row["_wire_error"]) for (t, o), row in rendered.items()],
        LINES + ", _wire_error string")
    return _bronze(spark, lines, [t for t, _ in rendered])


def test_fixtures_cover_the_workload():
    topics = {r["topic"] for r in RECORDS}
    assert "mariadb_avro.movies_db.movies" in topics and len(topics) >= 10, topics
    assert any(r["value"] is None for r in RECORDS), "no tombstone recorded"
    # a table's schema changed mid-stream (the workload adds columns): two value ids for one topic
    ids_by_topic: dict[str, set[int]] = {}
    for r in RECORDS:
        if r["value"] is not None:
            ids_by_topic.setdefault(r["topic"], set()).add(int.from_bytes(_bytes(r["value"])[1:5], "big"))
    assert any(len(ids) > 1 for ids in ids_by_topic.values()), ids_by_topic


def test_wire_format_split(spark):
    rows = [
        (b"\x00\x00\x00\x01\x02\x06abc",),  # id 258, body: the Avro string "abc"
        (b"\x00\xff\xff\xff\xff",),  # the largest id, empty body
        (b'{"op":"c"}',),  # JSON text
        (b"\x00\x00\x01",),  # too short for an id
        (None,),
    ]
    data = F.col("data")
    got = [tuple(r) for r in spark.createDataFrame(rows, "data binary").select(
        avro_wire.is_wire_format(data), avro_wire.schema_id(data),
        F.when(avro_wire.is_wire_format(data), avro_wire.body(data))).collect()]
    assert got == [
        (True, 258, bytearray(b"\x06abc")),
        (True, 4294967295, bytearray(b"")),
        (False, None, None),
        (False, None, None),
        (None, None, None),
    ]


def test_values_render_as_jsonconverter_writes_them(rendered):
    """Every Avro value and key, rendered, equals the JSON connector's payload for the
    same event: row images, op and source block, every type of the workload."""
    mismatches = []
    for r in RECORDS:
        row = rendered[(r["topic"], r["offset"])]
        assert row["_wire_error"] is None, row
        want, got = _payload(r["json_value"]), None if row["value"] is None else json.loads(row["value"])
        if want is not None:
            ignored = PER_CONNECTOR_SOURCE_FIELDS | (PER_SNAPSHOT_SOURCE_FIELDS if want["op"] == "r" else set())
            want = {k: v for k, v in want.items() if k not in PER_CONNECTOR_TOP_FIELDS}
            want["source"] = {k: v for k, v in want["source"].items() if k not in ignored}
            got = {k: v for k, v in got.items() if k not in PER_CONNECTOR_TOP_FIELDS}
            got["source"] = {k: v for k, v in got["source"].items() if k not in ignored}
        if got != want:
            mismatches.append((r["topic"], r["offset"], "value", got, want))
        if json.loads(row["key"]) != _payload(r["json_key"]):
            mismatches.append((r["topic"], r["offset"], "key", row["key"], r["json_key"]))
    assert not mismatches, mismatches[:3]


def test_same_bronze_row_from_avro_and_json(spark, avro_bronze):
    """Both records of one event through the whole transform give the same bronze fields."""
    json_lines = spark.createDataFrame(
        [(_twin_topic(r["topic"]), r["partition"], r["offset"], r["json_value"], r["json_key"]) for r in RECORDS],
        LINES)
    from_json = _bronze(spark, json_lines, [_twin_topic(r["topic"]) for r in RECORDS])
    refused = {("movies_db.movies", offset) for _, _, offset, _, _ in REFUSED}
    from_avro = {key: row for key, row in avro_bronze.items() if key not in refused}
    assert len(from_avro) == len(from_json) == len(RECORDS)
    assert {k: [r[c] for c in BRONZE_COMPARED] for k, r in from_avro.items()} == {
        k: [r[c] for c in BRONZE_COMPARED] for k, r in from_json.items()}
    assert {row["_status"] for row in from_avro.values()} == {"landed", "tombstone"}


def test_refused_bytes_are_quarantined_with_where_and_what(avro_bronze):
    """Avro expected: JSON text is quarantined naming topic, partition, offset and the
    bytes found; a wire-format body that does not decode names its id; a tombstone stays one."""
    rows = {offset: avro_bronze[("movies_db.movies", offset)] for offset in (1007, 1008, 1009)}
    assert rows[1007]["_status"] == "quarantined"
    assert rows[1007]["reason"] == (
        f"record value at topic {REFUSED_TOPIC} partition 0 offset 1007 is not in the schema registry "
        "wire format (byte 0 = 0, a 4-byte schema id, then Avro) that --value-format avro reads: "
        "10 bytes starting 0x7B226F70223A2263")
    schema_id = int.from_bytes(_bytes(_GOOD["value"])[1:5], "big")
    assert rows[1008]["_status"] == "quarantined"
    assert rows[1008]["reason"] == (f"record value at topic {REFUSED_TOPIC} partition 0 offset 1008 "
                                    f"does not decode as Avro with schema id {schema_id}")
    assert rows[1009]["_status"] == "tombstone" and rows[1009]["reason"] is None


HEADERED = ("_topic string, _partition int, _offset bigint, value binary, key binary, "
            "headers array<struct<key:string,value:binary>>")


def test_apicurio_header_ids_become_the_wire_format(spark):
    """Apicurio's header mode (apicurio.registry.headers.enabled=true): the body alone in
    the record, the id in header apicurio.<side>.contentId as 8 big-endian bytes (what
    DefaultHeadersHandler writes with use-id=contentId). The same recorded Debezium
    record, split that way, comes back byte for byte as the wire format; a global id and
    a malformed content id are refused naming the header; a record without such headers
    is left as it is."""
    record = next(r for r in RECORDS if r["value"] is not None and r["key"] is not None
                  and _bytes(r["key"])[:1] == b"\x00")
    value, key = _bytes(record["value"]), _bytes(record["key"])
    header_id = lambda wire: (0).to_bytes(4, "big") + wire[1:5]  # noqa: E731 - the 8-byte long
    rows = [
        ("t", 0, 0, value[5:], key[5:], [("apicurio.key.contentId", header_id(key)),
                                         ("apicurio.value.contentId", header_id(value))]),
        ("t", 0, 1, value[5:], key, [("apicurio.value.globalId", (7).to_bytes(8, "big"))]),
        ("t", 0, 2, value[5:], key, [("apicurio.value.contentId", value[1:5])]),  # 4 bytes, not 8
        ("t", 0, 3, value, key, None),  # the wire format, no headers
        ("t", 0, 4, None, key[5:], [("apicurio.key.contentId", header_id(key))]),  # tombstone
    ]
    got = [r.asDict() for r in avro_wire.from_apicurio_headers(spark.createDataFrame(rows, HEADERED)).orderBy(
        "_offset").collect()]
    assert [(bytes(r["value"]) if r["value"] is not None else None, bytes(r["key"])) for r in got] == [
        (value, key), (value[5:], key), (value[5:], key), (value, key), (None, key)]
    errors = [r["_header_error"] for r in got]
    assert errors[0] is None and errors[3] is None and errors[4] is None
    assert errors[1] == ("record value at topic t partition 0 offset 1 names its schema by global id (header "
                         "apicurio.value.globalId), which the registry's Confluent-compatible API does not "
                         "resolve: set the converter's apicurio.registry.use-id=contentId")
    assert errors[2] == (f"record value at topic t partition 0 offset 2: header apicurio.value.contentId holds "
                         f"0x{value[1:5].hex().upper()}, not a content id of 8 bytes below 2^32")
    assert "headers" not in got[0]
    # decoded like the wire format; the refusals become the records' reasons
    decoded = avro_wire.decode_records(avro_wire.from_apicurio_headers(spark.createDataFrame(rows, HEADERED)),
                                       SCHEMAS).orderBy("_offset").collect()
    assert decoded[0]["value"] == decoded[3]["value"] and decoded[0]["key"] == decoded[3]["key"]
    assert decoded[0]["_wire_error"] is None and json.loads(decoded[0]["value"])["after"] is not None
    assert [r["_wire_error"] for r in decoded[1:3]] == errors[1:3]
