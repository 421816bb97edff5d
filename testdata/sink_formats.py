"""Sink files in the S3 sink's formats from records recorded with JsonConverter.

A recorded value holds its Connect schema (JsonConverter with schemas on). Its Avro
schema follows Confluent AvroData's rules: structs are records named by their Connect
name (namespace before the last dot), optional fields a union with null first and a
null default, int8/int16 an Avro int with `connect.type`, a named Connect type carries
`connect.name`/`connect.version`/`connect.parameters`, Connect Decimal is bytes with
`logicalType: decimal` (precision from `connect.decimal.precision`, else 64), Connect
Date/Time/Timestamp are int/int/long with `date`/`time-millis`/`timestamp-millis`, a
record name seen before is referred to by name. Avro files are written with fastavro
(one block per `block_records` records); Parquet files with parquet-avro's
AvroParquetWriter (the class the sink's ParquetFormat writes with) from those Avro files.
"""

from __future__ import annotations

import base64
import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import fastavro

PRIMITIVES = {"int8": "int", "int16": "int", "int32": "int", "int64": "long", "float32": "float",
              "float64": "double", "boolean": "boolean", "string": "string", "bytes": "bytes"}
DECIMAL = "org.apache.kafka.connect.data.Decimal"
LOGICAL = {"org.apache.kafka.connect.data.Date": "date", "org.apache.kafka.connect.data.Time": "time-millis",
           "org.apache.kafka.connect.data.Timestamp": "timestamp-millis"}
EPOCH = date(1970, 1, 1)


def avro_schema(connect: dict, seen: set[str] | None = None) -> Any:
    """The Avro schema AvroData derives from the Connect schema `connect` (JsonConverter's JSON form)."""
    seen = set() if seen is None else seen
    kind = connect["type"]
    name = connect.get("name")
    if kind == "struct":
        full = name or "io.confluent.connect.avro.ConnectDefault"
        if full in seen:
            avro: Any = full
        else:
            seen.add(full)
            namespace, _, short = full.rpartition(".")
            avro = {"type": "record", "name": short, "fields": [_field(f, seen) for f in connect["fields"]]}
            if namespace:
                avro["namespace"] = namespace
            if connect.get("version") is not None:
                avro["connect.version"] = connect["version"]
            if connect.get("parameters"):
                avro["connect.parameters"] = connect["parameters"]
    elif kind == "array":
        avro = {"type": "array", "items": _optional(connect["items"], seen)}
    elif kind == "map":
        avro = {"type": "map", "values": _optional(connect["values"], seen)}
    else:
        avro = {"type": PRIMITIVES[kind]}
        if kind in ("int8", "int16"):
            avro["connect.type"] = kind
        if name:
            if connect.get("version") is not None:
                avro["connect.version"] = connect["version"]
            if connect.get("parameters"):
                avro["connect.parameters"] = connect["parameters"]
            avro["connect.name"] = name
            if name == DECIMAL:
                avro["scale"] = int(connect["parameters"]["scale"])
                avro["precision"] = int(connect["parameters"].get("connect.decimal.precision", 64))
                avro["logicalType"] = "decimal"
            elif name in LOGICAL:
                avro["logicalType"] = LOGICAL[name]
        if len(avro) == 1:
            avro = avro["type"]
    return avro


def _optional(connect: dict, seen: set[str]) -> Any:
    inner = avro_schema(connect, seen)
    return ["null", inner] if connect.get("optional") else inner


def _field(connect: dict, seen: set[str]) -> dict:
    field = {"name": connect["field"], "type": _optional(connect, seen)}
    if connect.get("optional"):
        field["default"] = None
    return field


def avro_value(value: Any, connect: dict) -> Any:
    """A JsonConverter payload value as the Python value fastavro writes for `connect`."""
    if value is None:
        return None
    kind = connect["type"]
    name = connect.get("name")
    if kind == "struct":
        return {f["field"]: avro_value(value.get(f["field"]), f) for f in connect["fields"]}
    if kind == "array":
        return [avro_value(v, connect["items"]) for v in value]
    if kind == "map":
        return {k: avro_value(v, connect["values"]) for k, v in value.items()}
    if name == DECIMAL:
        # The unscaled value's BigInteger.toByteArray, which AvroData writes and JsonConverter
        # sends base64 (fastavro would write a Decimal object in bytes of its own choosing).
        return base64.b64decode(value)
    if name == "org.apache.kafka.connect.data.Date":
        return EPOCH + timedelta(days=value)
    if kind == "bytes":
        return base64.b64decode(value)
    return value


def recorded_values(path: Path) -> list[tuple[int, dict | None]]:
    """(offset, JsonConverter value with schema and payload, None for a tombstone) of a
    recorded fixture file."""
    found = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        found.append((record["offset"], None if record["value"] is None else json.loads(record["value"])))
    return found


def write_recorded_json(fixture: Path, root: Path, records_per_file: int) -> list[Path]:
    """A recorded fixture file's records as the S3 sink's JSON files under `root`
    (`<topic>/partition=<n>/<topic>+<n>+<first offset>.json`, `records_per_file` records
    a file in offset order, `null` for a tombstone); returns the files written."""
    by_partition: dict[int, list[dict]] = {}
    for line in fixture.read_text().splitlines():
        record = json.loads(line)
        by_partition.setdefault(record["partition"], []).append(record)
    written = []
    for partition, records in by_partition.items():
        records.sort(key=lambda r: r["offset"])
        for i in range(0, len(records), records_per_file):
            chunk = records[i:i + records_per_file]
            topic = chunk[0]["topic"]
            path = root / topic / f"partition={partition}" / f"{topic}+{partition}+{chunk[0]['offset']}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(("null" if r["value"] is None else r["value"]) + "\n" for r in chunk))
            written.append(path)
    return written


def write_avro(path: Path, values: list[dict], block_records: int = 1000, codec: str = "null") -> None:
    """An Avro container file of `values` (JsonConverter values of one Connect schema)."""
    schema = fastavro.parse_schema(avro_schema(values[0]["schema"]))
    records = [avro_value(v["payload"], v["schema"]) for v in values]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        writer = fastavro.write.Writer(out, schema, codec=codec)
        for i, record in enumerate(records, 1):
            writer.write(record)
            if i % block_records == 0:
                writer.flush()
        writer.flush()


def write_parquet(spark: Any, avro_file: Path, path: Path, codec: str = "SNAPPY", old_lists: bool = True) -> None:
    """A Parquet file of the records of `avro_file`, written with parquet-avro's
    AvroParquetWriter (the Hudi bundle carries it) and the Avro file's schema. Arrays in
    parquet-avro's default two-level list structure, which cannot hold a null element,
    or with `old_lists` false in the three-level one."""
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
    conf.setBoolean("parquet.avro.write-old-list-structure", old_lists)
    reader = jvm.org.apache.avro.file.DataFileReader(
        jvm.java.io.File(str(avro_file)), jvm.org.apache.avro.generic.GenericDatumReader())
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = (
        jvm.org.apache.parquet.avro.AvroParquetWriter.builder(jvm.org.apache.hadoop.fs.Path("file:" + str(path)))
        .withSchema(reader.getSchema())
        .withCompressionCodec(jvm.org.apache.parquet.hadoop.metadata.CompressionCodecName.valueOf(codec))
        .withConf(conf)
        .build()
    )
    try:
        while reader.hasNext():
            writer.write(reader.next())
    finally:
        writer.close()
        reader.close()
    crc = path.parent / f".{path.name}.crc"
    crc.unlink(missing_ok=True)


def _long(value: int) -> bytes:
    """Avro's zig-zag varint of `value`."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag & ~0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def write_avro_bodies(path: Path, schema: str, bodies: list[bytes]) -> None:
    """An uncompressed Avro container file of records already in Avro's binary encoding
    under `schema` (a recorded writer schema): the bytes the sink's AvroFormat writes for
    the records a registry's Avro converter produced, one block."""
    def text(value: str) -> bytes:
        data = value.encode("utf-8")
        return _long(len(data)) + data

    sync = bytes(range(16))
    header = b"Obj\x01" + _long(2) + text("avro.schema") + text(schema) + text("avro.codec") + text("null") + _long(0)
    block = b"".join(bodies)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + sync + _long(len(bodies)) + _long(len(block)) + block + sync)


def recorded_avro(path: Path) -> list[tuple[int, dict | None]]:
    """(offset, record) of a recorded Avro fixture (tests/fixtures/debezium-avro): the
    record's `schema_id`, Avro `body` (after the wire format's 5-byte header) and the JSON
    connector's `json_value` of the same event; None for a tombstone."""
    found = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["value"] is None:
            found.append((record["offset"], None))
            continue
        value = base64.b64decode(record["value"])
        found.append((record["offset"], {"schema_id": int.from_bytes(value[1:5], "big"), "body": value[5:],
                                          "json_value": record["json_value"]}))
    return found
