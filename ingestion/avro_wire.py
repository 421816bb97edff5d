"""Kafka records in the Confluent wire format, rendered as the JSON JsonConverter writes.

A record serialized through a schema registry (Confluent's or Apicurio's AvroConverter
with ``as-confluent``) is byte 0, the schema id as 4 big-endian bytes, then the Avro
binary body. Each id's records are decoded with `from_avro` and that id's writer schema
stripped of every ``logicalType`` (decimals stay bytes, dates int days, timestamps
longs, Debezium's semantic types untouched), then written with ``to_json`` keeping null
fields. That is the text Kafka Connect's JsonConverter (schemas off) writes for the same
Connect record, so the JSON path (`ingestion.transform`) parses it unchanged and the same
event gives the same bronze row whichever converter wrote it.

Apicurio's converter can instead put the id in the record's headers
(``apicurio.registry.headers.enabled=true``): header ``apicurio.<side>.contentId`` (with
``use-id=contentId``) or ``apicurio.<side>.globalId`` (its default) holds the id as an
8-byte big-endian long, and the body is the bare Avro binary.
`from_apicurio_headers` turns a record carrying a content id in its headers into the
wire format (the Confluent-compatible API's ids are content ids), so everything after
reads one format; a global id, or a content id beyond 4 bytes, is refused with a reason.

Pure DataFrame -> DataFrame / Column functions; the schemas come from the caller
(`ingestion.registry`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from ingestion.avro import JSON_OPTIONS, without_logical_types

HEADER_BYTES = 5  # magic byte 0 + 4-byte schema id
# A body that does not decode with its schema gives null instead of failing the batch.
AVRO_OPTIONS = {"mode": "PERMISSIVE"}
SHOWN_BYTES = 8  # bytes of a refused record shown (in hex) in its reason


# Apicurio 2.x serde header names (io.apicurio.registry.serde.SerdeHeaders), per side.
CONTENT_ID_HEADER = "apicurio.{side}.contentId"
GLOBAL_ID_HEADER = "apicurio.{side}.globalId"
HEADER_ERROR = "_header_error"


def _header(headers: Column, name: str) -> Column:
    """The bytes of the last header called `name`, else null."""
    matching = F.filter(headers, lambda header: header["key"] == F.lit(name))
    return F.when(F.size(matching) > 0, F.element_at(matching, -1)["value"])


def from_apicurio_headers(records: DataFrame) -> DataFrame:
    """Records read with their `headers` (Kafka source option includeHeaders) -> the same
    records without `headers`, each value and key whose schema id is in Apicurio's
    headers rewritten to the wire format (byte 0, the id in 4 bytes, the body), and
    `_header_error`: why a record's header id cannot be read (a global id, which the
    Confluent-compatible API does not resolve; a content id that is not 8 bytes or needs
    more than 4), else null. Records without such headers are left as they are."""
    headers = F.coalesce(F.col("headers"), F.array())
    topic, partition, offset = F.col("_topic"), F.col("_partition"), F.col("_offset")
    out = records
    errors = []
    for side in ("value", "key"):
        content_id = _header(headers, CONTENT_ID_HEADER.format(side=side))
        global_id = _header(headers, GLOBAL_ID_HEADER.format(side=side))
        fits = (F.octet_length(content_id) == 8) & (F.hex(F.substring(content_id, 1, 4)) == "00000000")
        data = F.col(side)
        out = out.withColumn(side, F.when(data.isNotNull() & content_id.isNotNull() & fits, F.concat(
            F.unhex(F.lit("00")), F.substring(content_id, 5, 4), data)).otherwise(data))
        errors.append(F.when(data.isNull(), None).when(content_id.isNotNull() & ~fits, F.format_string(
            f"record {side} at topic %s partition %d offset %d: header {CONTENT_ID_HEADER.format(side=side)} "
            "holds 0x%s, not a content id of 8 bytes below 2^32", topic, partition, offset, F.hex(content_id)))
            .when(content_id.isNull() & global_id.isNotNull(), F.format_string(
                f"record {side} at topic %s partition %d offset %d names its schema by global id (header "
                f"{GLOBAL_ID_HEADER.format(side=side)}), which the registry's Confluent-compatible API does not "
                "resolve: set the converter's apicurio.registry.use-id=contentId", topic, partition, offset)))
    return out.withColumn(HEADER_ERROR, F.coalesce(*errors)).drop("headers")


def _is_record(schema: str) -> bool:
    parsed = json.loads(schema)
    return isinstance(parsed, dict) and parsed.get("type") == "record"


def _required_fields(schema: str) -> list[str]:
    """The top-level fields of a record schema that cannot be null (no "null" branch)."""
    parsed = json.loads(schema)
    return [f["name"] for f in parsed.get("fields", [])
            if not (f["type"] == "null" or (isinstance(f["type"], list) and "null" in f["type"]))]


def is_wire_format(data: Column) -> Column:
    """True for bytes that start with the magic byte 0 and hold a schema id."""
    return (F.octet_length(data) >= HEADER_BYTES) & (F.hex(F.substring(data, 1, 1)) == "00")


def schema_id(data: Column) -> Column:
    """The schema id (bytes 1-4, big-endian, as bigint) of wire-format bytes, else null."""
    return F.when(is_wire_format(data), F.conv(F.hex(F.substring(data, 2, 4)), 16, 10).cast("bigint"))


def body(data: Column) -> Column:
    """The Avro body after the 5-byte header."""
    return F.substring(data, HEADER_BYTES + 1, 2**31 - 1)


def not_wire_format_reason(data: Column, side: str, topic: Column, partition: Column, offset: Column) -> Column:
    """Why a non-null record `side` (value or key) is refused when Avro is expected, naming
    where it is and what was found; null for wire-format bytes and for null."""
    return F.when(data.isNotNull() & ~is_wire_format(data), F.format_string(
        f"record {side} at topic %s partition %d offset %d is not in the schema registry wire format "
        "(byte 0 = 0, a 4-byte schema id, then Avro) that --value-format avro reads: %d bytes starting 0x%s",
        topic, partition, offset, F.octet_length(data), F.hex(F.substring(data, 1, SHOWN_BYTES))))


def render_json(avro_body: Column, writer_schema: str) -> Column:
    """The Avro binary `avro_body` written with `writer_schema`, as JsonConverter's JSON text
    (schemas off, null fields kept); null when the body does not decode."""
    decoded = from_avro(avro_body, without_logical_types(writer_schema), AVRO_OPTIONS)
    if _is_record(writer_schema):
        # PERMISSIVE gives a body that does not decode as a record of nulls: a null
        # where the schema allows none marks it.
        required = _required_fields(writer_schema)
        failed = F.lit(False)
        for name in required:
            failed = failed | decoded.getField(name).isNull()
        return F.when(decoded.isNotNull() & ~failed, F.to_json(decoded, JSON_OPTIONS))
    # to_json takes structs, arrays and maps only: a bare value goes through a one-element array.
    return F.when(decoded.isNotNull(), F.regexp_extract(F.to_json(F.array(decoded)), r"^\[(.*)\]$", 1))


def render_by_id(data: Column, schemas: Mapping[int, str]) -> Column:
    """Wire-format `data` rendered with the schema its id names (one `from_avro` per id,
    each evaluated only for its own records); null for ids not in `schemas`."""
    ids = schema_id(data)
    rendered: Column | None = None
    for sid, schema in sorted(schemas.items()):
        branch = render_json(body(data), schema)
        rendered = F.when(ids == sid, branch) if rendered is None else rendered.when(ids == sid, branch)
    return rendered if rendered is not None else F.lit(None).cast("string")


def schema_positions(records: DataFrame, column: str) -> DataFrame:
    """`schema_id`, `topic`, `partition`, `offset`: each id of `column`'s wire-format
    records with its first record (to name it when its schema cannot be had)."""
    first = F.min(F.struct("_topic", "_partition", "_offset"))
    return (
        records.where(schema_id(F.col(column)).isNotNull())
        .groupBy(schema_id(F.col(column)).alias("schema_id"))
        .agg(first.alias("_first"))
        .select("schema_id", F.col("_first._topic").alias("topic"), F.col("_first._partition").alias("partition"),
                F.col("_first._offset").alias("offset"))
    )


def decode_records(records: DataFrame, schemas: Mapping[int, str]) -> DataFrame:
    """Raw Kafka records (`_topic`, `_partition`, `_offset`, binary `value` and `key`) ->
    the same columns with `value` and `key` as JSON text, plus `_wire_error`: why the
    record is refused (a value not in the wire format, or a value or key body that does
    not decode with its schema), null for a good record. A null value (tombstone) stays
    null. A key not in the wire format is kept as its text (a converter of its own, e.g.
    JSON, is fine for keys). `schemas` must hold every id the records name
    (`schema_positions`)."""
    topic, partition, offset = F.col("_topic"), F.col("_partition"), F.col("_offset")
    value, key = F.col("value"), F.col("key")
    with_json = records.withColumn("_value_json", render_by_id(value, schemas)).withColumn(
        "_key_json", render_by_id(key, schemas))

    def undecodable(side: str, data: Column, rendered: Column) -> Column:
        return F.when(is_wire_format(data) & rendered.isNull(), F.format_string(
            f"record {side} at topic %s partition %d offset %d does not decode as Avro with schema id %d",
            topic, partition, offset, schema_id(data)))

    header_error = F.col(HEADER_ERROR) if HEADER_ERROR in records.columns else F.lit(None).cast("string")
    error = F.coalesce(
        header_error,
        not_wire_format_reason(value, "value", topic, partition, offset),
        undecodable("value", value, F.col("_value_json")),
        undecodable("key", key, F.col("_key_json")),
    )
    return with_json.select(
        "_topic", "_partition", "_offset",
        # A refused record keeps its bytes as text, as the JSON path would hold them.
        F.coalesce(F.col("_value_json"), value.cast("string")).alias("value"),
        F.coalesce(F.col("_key_json"), key.cast("string")).alias("key"),
        error.alias("_wire_error"),
        *[c for c in records.columns if c not in ("_topic", "_partition", "_offset", "value", "key", HEADER_ERROR)],
    )
