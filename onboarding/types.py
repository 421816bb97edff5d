"""Transform: a Debezium table's upstream schema -> the silver columns its model declares.

Pure functions. Kafka Connect schemas come in the JsonConverter's JSON form (`{"type":
"struct", "fields": [...], "name": ..., "parameters": ...}`); Avro schemas (the registry's,
an Avro container file's, parquet-avro's footer) are first turned back into that form
(`connect_from_avro`, the inverse of Confluent's AvroData), so one mapping serves every
input. Records without a schema give their columns from row images (`infer_columns`).

The mapping is the Types table of docs/concepts/bronze-silver-gold.md, restricted to the
`data_type`s the silver macros decode (macros/debezium/columns.sql): a type they cannot
hold is declared `string` (the value's JSON text) and marked not inferred.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
# Spark's widest decimal.
MAX_PRECISION = 38
INT32_RANGE = (-(2**31), 2**31 - 1)
# A schema name from the data reaches a YAML description, which dbt renders with Jinja:
# only plain Java-style names are quoted there.
SCHEMA_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$.]*$")

PRIMITIVES = {
    "int8": "int", "int16": "int", "int32": "int", "int64": "bigint",
    "float32": "float", "float64": "double", "boolean": "boolean", "string": "string", "bytes": "binary",
}
# Connect / Debezium semantic type name -> (data_type, meta.debezium_encoding, what the value is).
SEMANTIC: dict[str, tuple[str, str | None, str]] = {
    "io.debezium.time.Date": ("date", None, "days since 1970-01-01"),
    "org.apache.kafka.connect.data.Date": ("date", None, "days since 1970-01-01"),
    "io.debezium.time.MicroTimestamp": ("timestamp", None, "microseconds since the epoch"),
    "io.debezium.time.Timestamp": ("timestamp", "millis", "milliseconds since the epoch"),
    "org.apache.kafka.connect.data.Timestamp": ("timestamp", "millis", "milliseconds since the epoch"),
    "io.debezium.time.NanoTimestamp": ("timestamp", "nanos", "nanoseconds since the epoch"),
    "io.debezium.time.ZonedTimestamp": ("timestamp", None, "ISO-8601 text in UTC"),
    "io.debezium.time.Year": ("int", None, "a year"),
    "io.debezium.time.MicroDuration": ("bigint", None, "a duration in microseconds"),
    "io.debezium.time.Interval": ("string", None, "an ISO-8601 duration"),
    "io.debezium.data.Enum": ("string", None, "an enum label"),
    "io.debezium.data.EnumSet": ("string", None, "comma-separated set labels"),
    "io.debezium.data.Json": ("string", None, "JSON text"),
    "io.debezium.data.Uuid": ("string", None, "a UUID"),
    "io.debezium.data.Xml": ("string", None, "XML text"),
    "io.debezium.data.Ltree": ("string", None, "an ltree path"),
    "io.debezium.data.Tsvector": ("string", None, "a tsvector's text form"),
    "io.debezium.data.Bits": ("binary", None, "a bit string's bytes (base64)"),
}
# Times of day: Spark has no such type, so the number (or text) is kept as sent.
TIME_OF_DAY = {
    "io.debezium.time.Time": "milliseconds since midnight",
    "org.apache.kafka.connect.data.Time": "milliseconds since midnight",
    "io.debezium.time.MicroTime": "microseconds since midnight",
    "io.debezium.time.NanoTime": "nanoseconds since midnight",
    "io.debezium.time.ZonedTime": "ISO-8601 time with offset",
}
# Avro primitive -> Connect primitive.
AVRO_PRIMITIVES = {"int": "int32", "long": "int64", "float": "float32", "double": "float64",
                   "boolean": "boolean", "string": "string", "bytes": "bytes", "null": "null"}
# Avro logical types written by other producers than AvroData, as the Connect names they mean.
AVRO_LOGICAL = {"date": "org.apache.kafka.connect.data.Date",
                "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
                "timestamp-micros": "io.debezium.time.MicroTimestamp",
                "time-millis": "org.apache.kafka.connect.data.Time",
                "time-micros": "io.debezium.time.MicroTime",
                "uuid": "io.debezium.data.Uuid"}


@dataclass(frozen=True)
class Column:
    """A silver column as the model's YAML declares it, and what upstream says of it."""

    name: str
    data_type: str
    upstream: str  # what the upstream schema (or the landed values) says, for humans
    optional: bool = True
    encoding: str | None = None  # meta.debezium_encoding: millis or nanos
    note: str | None = None  # why the declaration is what it is, when not obvious
    inferred: bool = True  # False: a placeholder declaration someone must check


def schema_name(connect: Mapping[str, Any]) -> str | None:
    """The Connect schema's name when it is a plain Java-style name, else None."""
    name = connect.get("name")
    return name if isinstance(name, str) and SCHEMA_NAME.match(name) else None


def _upstream(connect: Mapping[str, Any]) -> str:
    kind = str(connect.get("type"))
    name = schema_name(connect)
    if kind == "array":
        return f"array of {_upstream(connect.get('items') or {})}"
    return f"{kind} {name}" if name else kind


def _decimal(connect: Mapping[str, Any], upstream: str, optional: bool, name: str) -> Column:
    parameters = connect.get("parameters") or {}
    scale, precision = str(parameters.get("scale", "")), str(parameters.get("connect.decimal.precision", ""))
    if not scale.isdigit():
        return Column(name, "string", upstream, optional, note="a Decimal without a scale in its schema: kept as "
                      "its base64 bytes; declare decimal(p,s) yourself", inferred=False)
    if not precision.isdigit():
        return Column(name, f"decimal({MAX_PRECISION},{int(scale)})", f"{upstream}(?,{int(scale)})", optional,
                      note=f"the schema gives no precision: {MAX_PRECISION} assumed")
    p, s = int(precision), int(scale)
    upstream = f"{upstream}({p},{s})"
    if p > MAX_PRECISION or s > p:
        return Column(name, "string", upstream, optional, note=f"decimal({p},{s}) does not fit Spark's decimals "
                      f"(precision at most {MAX_PRECISION}): kept as its base64 bytes", inferred=False)
    return Column(name, f"decimal({p},{s})", upstream, optional, note="precise mode: base64 unscaled value")


def connect_column(name: str, connect: Mapping[str, Any]) -> Column:
    """The silver column of a row field whose Connect schema is `connect`."""
    kind = connect.get("type")
    semantic = schema_name(connect)
    optional = bool(connect.get("optional", True))
    upstream = _upstream(connect)
    if semantic == CONNECT_DECIMAL:
        return _decimal(connect, upstream, optional, name)
    if semantic == VARIABLE_SCALE_DECIMAL:
        return Column(name, "string", upstream, optional, note="a numeric of variable scale, sent as a struct of "
                      "scale and base64 value: kept as its JSON text; set decimal.handling.mode=string or double "
                      "upstream, or declare it yourself", inferred=False)
    if semantic in SEMANTIC:
        data_type, encoding, what = SEMANTIC[semantic]
        return Column(name, data_type, upstream, optional, encoding, note=what)
    if semantic in TIME_OF_DAY and kind in PRIMITIVES:
        return Column(name, PRIMITIVES[kind], upstream, optional,
                      note=f"a time of day ({TIME_OF_DAY[semantic]}): Spark has no time type, kept as sent")
    if kind == "array":
        return _array(name, connect, upstream, optional)
    if kind in PRIMITIVES:
        if semantic is not None:
            return Column(name, PRIMITIVES[kind], upstream, optional, note=f"semantic type {semantic} is not one "
                          f"this project knows: declared as its {kind}", inferred=False)
        return Column(name, PRIMITIVES[kind], upstream, optional)
    return Column(name, "string", upstream, optional,
                  note=f"a {kind} value: silver keeps it as its JSON text", inferred=False)


def _array(name: str, connect: Mapping[str, Any], upstream: str, optional: bool) -> Column:
    items = connect.get("items") or {}
    element = connect_column("element", items)
    if element.data_type in ("int", "bigint") and element.inferred and element.encoding is None and \
            schema_name(items) is None:
        return Column(name, f"array<{element.data_type}>", upstream, optional)
    if element.data_type == "string" and element.inferred:
        return Column(name, "array<string>", upstream, optional)
    return Column(name, "array<string>", upstream, optional,
                  note="elements kept as their JSON text (silver decodes arrays of strings, int and bigint)",
                  inferred=False)


def row_schema(value: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The row's struct in a record value's Connect schema: the envelope's `after` (or
    `before`), or the flattened row's own fields less the `__` ones; None if neither."""
    if value.get("type") != "struct":
        return None
    fields = {f.get("field"): f for f in value.get("fields") or []}
    if "op" in fields and ("after" in fields or "before" in fields):
        for side in ("after", "before"):
            if (fields.get(side) or {}).get("type") == "struct":
                return fields[side]
        return None
    return {**value, "fields": [f for f in value.get("fields") or [] if not str(f.get("field")).startswith("__")]}


def columns_of(value: Mapping[str, Any]) -> list[Column]:
    """The silver columns of a record value's Connect schema (envelope or flattened)."""
    row = row_schema(value)
    if row is None:
        return []
    return [connect_column(str(f.get("field")), f) for f in row.get("fields") or []]


def key_fields(key: Mapping[str, Any]) -> list[str]:
    """The field names of a record key's Connect schema (a struct), [] for any other key."""
    if key.get("type") != "struct":
        return []
    return [str(f.get("field")) for f in key.get("fields") or []]


def merged(schemas: list[list[Column]]) -> list[Column]:
    """Columns of several schemas of one topic, oldest first: the newest schema's columns
    in its order, then the columns only older schemas have (dropped upstream, or seen
    only in older records), noted."""
    if not schemas:
        return []
    result = list(schemas[-1])
    seen = {c.name for c in result}
    for older in reversed(schemas[:-1]):
        for column in older:
            if column.name not in seen:
                seen.add(column.name)
                result.append(replace(column, note=_joined(column.note, "not in the newest schema read")))
    return result


def _joined(*parts: str | None) -> str:
    return "; ".join(p for p in parts if p)


# --- Avro -> Connect -------------------------------------------------------------------

def connect_from_avro(schema: Any, names: dict[str, Any] | None = None, namespace: str = "") -> dict[str, Any]:
    """The Connect schema (JsonConverter's JSON form) AvroData reads from the Avro schema
    `schema`: optional unions, `connect.type` int8/int16, `connect.name` /
    `connect.parameters`, decimals' precision and scale, named types referred to by name."""
    names = {} if names is None else names
    if isinstance(schema, str):
        if schema in AVRO_PRIMITIVES:
            return {"type": AVRO_PRIMITIVES[schema], "optional": False}
        found = names.get(schema) or names.get(f"{namespace}.{schema}")
        if found is None:
            return {"type": f"unknown Avro type {schema}" if SCHEMA_NAME.match(schema) else "unknown", "optional": False}
        return dict(found)
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) == 1:
            return {**connect_from_avro(branches[0], names, namespace), "optional": len(branches) < len(schema)}
        return {"type": "union", "optional": len(branches) < len(schema)}
    if not isinstance(schema, dict):
        return {"type": "unknown", "optional": False}
    kind = schema.get("type")
    if isinstance(kind, (list, dict)):
        return connect_from_avro(kind, names, namespace)
    if kind == "record":
        space = schema.get("namespace", namespace) or ""
        full = f"{space}.{schema['name']}" if space and "." not in str(schema.get("name")) else str(schema.get("name"))
        connect: dict[str, Any] = {"type": "struct", "optional": False, "fields": []}
        if schema.get("connect.name") or full:
            connect["name"] = schema.get("connect.name") or full
        names[full] = names[str(schema.get("name"))] = connect  # before its fields: records may nest themselves
        child_space = full.rpartition(".")[0]
        for field in schema.get("fields") or []:
            connect["fields"].append({**connect_from_avro(field.get("type"), names, child_space),
                                      "field": field.get("name")})
        return connect
    if kind == "array":
        return {"type": "array", "optional": False, "items": connect_from_avro(schema.get("items"), names, namespace)}
    if kind == "map":
        return {"type": "map", "optional": False, "values": connect_from_avro(schema.get("values"), names, namespace)}
    if kind == "enum":
        return {"type": "string", "optional": False, "name": "io.debezium.data.Enum"}
    if kind == "fixed":
        kind = "bytes"
    connect = {"type": schema.get("connect.type") or AVRO_PRIMITIVES.get(str(kind), f"unknown Avro type {kind}"),
               "optional": False}
    name = schema.get("connect.name") or AVRO_LOGICAL.get(str(schema.get("logicalType")))
    parameters = dict(schema.get("connect.parameters") or {})
    if schema.get("logicalType") == "decimal" or name == CONNECT_DECIMAL:
        name = CONNECT_DECIMAL
        if "scale" in schema:
            parameters.setdefault("scale", str(schema["scale"]))
        if "precision" in schema:
            parameters.setdefault("connect.decimal.precision", str(schema["precision"]))
    if name:
        connect["name"] = name
    if parameters:
        connect["parameters"] = parameters
    return connect


# --- records without a schema -----------------------------------------------------------

def infer_columns(images: Iterable[Mapping[str, Any]], values_are_text: bool = False) -> list[Column]:
    """Columns of row images (JSON objects as dicts) that carry no schema, in the order
    their names first appear; types from the JSON values where they tell it (booleans,
    integers, doubles, arrays of those), else `string` marked not inferred.
    `values_are_text`: every value arrived as text (bronze keeps a flattened row's
    values as JSON strings), so no type is inferred."""
    seen: dict[str, list[Any]] = {}
    for image in images:
        for name, value in image.items():
            if not name.startswith("__"):
                seen.setdefault(name, []).append(value)
    return [_inferred(name, values, values_are_text) for name, values in seen.items()]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int" if INT32_RANGE[0] <= value <= INT32_RANGE[1] else "bigint"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        kinds = {_kind(v) for v in value if v is not None}
        if kinds <= {"int"}:
            return "array<int>"
        if kinds <= {"int", "bigint"}:
            return "array<bigint>"
        return "array<string>" if kinds <= {"string"} else "array"
    return "object"


def _inferred(name: str, values: list[Any], values_are_text: bool) -> Column:
    present = [v for v in values if v is not None]
    if values_are_text:
        return Column(name, "string", "text (no schema; bronze keeps a flattened row's values as text)",
                      note="type not inferred: the records carry no schema", inferred=False)
    if not present:
        return Column(name, "string", "only nulls seen (no schema)",
                      note="type not inferred: every value seen is null", inferred=False)
    kinds = {_kind(v) for v in present}
    if kinds == {"int", "bigint"}:
        kinds = {"bigint"}
    if kinds <= {"int", "bigint", "double"} and "double" in kinds:
        kinds = {"double"}
    if kinds == {"array<int>", "array<bigint>"}:
        kinds = {"array<bigint>"}
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    if kind == "int":
        return Column(name, kind, "JSON integers (no schema)", note="inferred from the values: a Debezium date "
                      "sent as days would look the same; declare date if it is one")
    if kind == "bigint":
        return Column(name, kind, "JSON integers past int (no schema)", note="a bigint, or a Debezium timestamp "
                      "in ms, µs or ns since the epoch: declare timestamp (and its encoding) if it is one",
                      inferred=False)
    if kind in ("boolean", "double", "array<int>", "array<bigint>", "array<string>"):
        return Column(name, kind, f"JSON {kind} values (no schema)", note="inferred from the values")
    what = {"string": "JSON strings", "mixed": "JSON values of several types", "array": "JSON arrays",
            "object": "JSON objects"}[kind]
    return Column(name, "string", f"{what} (no schema)",
                  note="type not inferred: text may hold a decimal, date, timestamp, bytes or range; declare it",
                  inferred=False)
