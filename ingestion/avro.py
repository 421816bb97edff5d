"""Avro and Parquet records as Kafka Connect's JsonConverter writes them (schemas off).

The S3 sink's AvroFormat and ParquetFormat store the Avro form of a Connect record
(Confluent's AvroData). Rendering each record back to the JSON the sink's JsonFormat
would have written lets one parser (ingestion.transform) serve every format, so the
same event gives the same bronze row whichever format it came in.

Avro files are read with their writer schema stripped of every `logicalType`, so
Connect Decimal comes out as its bytes, dates as int days and timestamps as long
milliseconds, which is what JsonConverter writes. Parquet has no such switch: Spark
reads its annotated columns as decimals, dates and timestamps, and `jsonconverter_value`
turns them back into those encodings with Spark expressions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    DecimalType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ingestion.errors import SinkFileError

MAGIC = b"Obj\x01"
SYNC_BYTES = 16
# The codecs Spark's avro reader decodes (the S3 sink's `avro.codec` offers a subset).
CODECS = ("null", "deflate", "snappy", "bzip2", "xz", "zstandard")
# JsonConverter writes null fields too: a row image keeps every column.
JSON_OPTIONS = {"ignoreNullFields": "false"}
LONG_HEX_DIGITS = 16
TWO_64 = 2**64
TWO_63 = 2**63
# BigInteger.toByteArray keeps one sign byte: leading 00 (FF) bytes go while the next
# byte still has the sign bit clear (set).
REDUNDANT_SIGN_BYTES = r"^(?:00)+(?=[0-7])|^(?:FF)+(?=[89A-F])"


@dataclass(frozen=True)
class ContainerHeader:
    """What an Avro object container file's header holds."""

    schema: str  # the writer schema, JSON text
    codec: str
    sync: bytes  # the 16-byte marker after the header and after every block
    length: int  # bytes of the header


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the zig-zag varint at `pos`; IndexError past the end."""
    shift = 0
    result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    size, pos = _read_long(data, pos)
    if size < 0 or pos + size > len(data):
        raise IndexError("bytes run past the data")
    return data[pos:pos + size], pos + size


def container_header(head: bytes, name: str) -> ContainerHeader:
    """The header of the Avro container file whose first bytes are `head`; raises
    SinkFileError naming file `name` and what was found when it is not one. IndexError
    when `head` ends inside the header (read more, or the file was cut)."""
    if head[:4] != MAGIC:
        raise SinkFileError(f"{name}: not an Avro container file (the first bytes are {head[:4]!r}, "
                            f"expected {MAGIC!r})")
    meta: dict[str, bytes] = {}
    pos = 4
    try:
        while True:
            count, pos = _read_long(head, pos)
            if count == 0:
                break
            if count < 0:  # a block with its byte size after the count
                count = -count
                _, pos = _read_long(head, pos)
            for _ in range(count):
                key, pos = _read_bytes(head, pos)
                meta[key.decode("utf-8")], pos = _read_bytes(head, pos)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SinkFileError(f"{name}: the Avro header's metadata does not decode: {exc}") from exc
    if pos + SYNC_BYTES > len(head):
        raise IndexError("header ends past the data")
    sync = head[pos:pos + SYNC_BYTES]
    if "avro.schema" not in meta:
        raise SinkFileError(f"{name}: the Avro header holds no avro.schema")
    codec = meta.get("avro.codec", b"null").decode("utf-8", "replace")
    if codec not in CODECS:
        raise SinkFileError(f"{name}: Avro codec {codec!r} is not one Spark reads (accepted: {', '.join(CODECS)})")
    try:
        schema = meta["avro.schema"].decode("utf-8")
        json.loads(schema)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SinkFileError(f"{name}: the Avro header's schema is not JSON: {exc}") from exc
    return ContainerHeader(schema=schema, codec=codec, sync=sync, length=pos + SYNC_BYTES)


def _stripped(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_stripped(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: _stripped(value) for key, value in schema.items() if key != "logicalType"}


def without_logical_types(schema: str) -> str:
    """The Avro schema JSON `schema` with every `logicalType` attribute removed: read
    with it, values keep the physical encoding JsonConverter writes."""
    return json.dumps(_stripped(json.loads(schema)), separators=(",", ":"))


def _needs_rendering(kind: DataType) -> bool:
    if isinstance(kind, (DecimalType, DateType, TimestampType, TimestampNTZType)):
        return True
    if isinstance(kind, ArrayType):
        return _needs_rendering(kind.elementType)
    if isinstance(kind, MapType):
        return _needs_rendering(kind.valueType)
    if isinstance(kind, StructType):
        return any(_needs_rendering(f.dataType) for f in kind.fields)
    return False


def _long_hex(value: Column) -> Column:
    """A long as 16 hex digits of its two's complement."""
    return F.lpad(F.hex(value), LONG_HEX_DIGITS, "0")


def decimal_bytes(value: Column, kind: DecimalType) -> Column:
    """A decimal as Connect Decimal's bytes: its unscaled value in two's complement,
    big-endian, as few bytes as BigInteger.toByteArray gives (JsonConverter writes
    them base64)."""
    # Cast to text, a decimal has exactly `scale` digits after its point and no exponent.
    digits = F.regexp_replace(value.cast("string"), r"\.", "")
    if kind.precision <= 18:
        hex_digits = _long_hex(digits.cast("bigint"))
    else:
        # Two longs, high * 2^64 + low (Spark's hex() takes no wider number), from the
        # magnitude, whose steps cannot overflow decimal(38,0), then negated in two's complement.
        unscaled = digits.cast("decimal(38,0)")
        two_64 = F.lit(str(TWO_64)).cast("decimal(20,0)")
        magnitude = F.abs(unscaled)
        low_m = F.pmod(magnitude, two_64)
        high_m = ((magnitude - low_m) / two_64).cast("bigint")
        negative = unscaled < 0
        borrow = negative & (low_m > 0)
        high = F.when(borrow, -high_m - 1).when(negative, -high_m).otherwise(high_m)
        low = F.when(borrow, two_64 - low_m).otherwise(low_m)
        low_signed = F.when(low >= F.lit(str(TWO_63)).cast("decimal(20,0)"), low - two_64).otherwise(low).cast("bigint")
        hex_digits = F.concat(_long_hex(high), _long_hex(low_signed))
    return F.unhex(F.regexp_replace(hex_digits, REDUNDANT_SIGN_BYTES, ""))


def jsonconverter_value(value: Column, kind: DataType) -> Column:
    """`value` of Spark type `kind` in the encoding JsonConverter writes for the Connect
    type the sink stored it from: Decimal as bytes, Date as int days, Timestamp as long
    milliseconds; nested structs, arrays and maps converted inside; others as they are."""
    if not _needs_rendering(kind):
        return value
    if isinstance(kind, DecimalType):
        return decimal_bytes(value, kind)
    if isinstance(kind, DateType):
        return F.unix_date(value)
    if isinstance(kind, TimestampType):
        return F.unix_millis(value)
    if isinstance(kind, TimestampNTZType):
        return F.unix_millis(value.cast("timestamp"))
    if isinstance(kind, ArrayType):
        element = kind.elementType
        return F.transform(value, lambda v: jsonconverter_value(v, element))
    if isinstance(kind, MapType):
        inner = kind.valueType
        return F.transform_values(value, lambda _, v: jsonconverter_value(v, inner))
    assert isinstance(kind, StructType)
    fields = [jsonconverter_value(value[f.name], f.dataType).alias(f.name) for f in kind.fields]
    return F.when(value.isNotNull(), F.struct(*fields))


def jsonconverter_line(records: DataFrame) -> Column:
    """Each record (the frame's columns, one Connect record per row) as the JSON line
    the S3 sink's JsonFormat writes with JsonConverter, schemas off."""
    fields = [jsonconverter_value(F.col(_quoted(f.name)), f.dataType).alias(f.name) for f in records.schema.fields]
    return F.to_json(F.struct(*fields), JSON_OPTIONS)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
