"""One canonical text per value, computed inside each engine (Spark SQL, PostgreSQL,
MariaDB), so that equal values give equal text and equal hashes on both sides.

The silver column's declared `data_type` decides the form; the source column's own
type only says how to read it (a `timestamptz` is taken in UTC, a range gives the
struct's fields, a `char(n)` keeps its padding as Debezium sends it):

| declared | canonical text |
| --- | --- |
| tinyint, smallint, int, bigint | decimal digits |
| boolean | `true` / `false` |
| string | the text as is (padding kept) |
| decimal(p,s) | plain decimal with exactly s fraction digits |
| date | `YYYY-MM-DD` |
| timestamp | `YYYY-MM-DD HH:MM:SS.ffffff` (UTC wall clock) |
| binary | lower-case hex |
| array<T> | `[` + the elements' length-prefixed texts joined by `,` + `]` |
| struct<...> | the fields' length-prefixed texts, in declared order |

A row's text is its columns' length-prefixed texts (`<characters>:<text>`, `-` for
NULL) one after the other, so no two different rows share a text. Types outside this
table (double, float, maps, ...) are not compared: their text forms differ between
engines, and the report names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

INTEGER_KINDS = {"tinyint", "smallint", "int", "integer", "bigint"}
NULL_TEXT = "-"


@dataclass(frozen=True)
class SqlType:
    """A declared silver type, parsed."""

    kind: str  # integer, boolean, string, decimal, date, timestamp, binary, array, struct, unsupported
    text: str
    scale: int = 0
    element: SqlType | None = None
    fields: tuple[tuple[str, SqlType], ...] = field(default_factory=tuple)

    @property
    def supported(self) -> bool:
        if self.kind == "unsupported":
            return False
        if self.element is not None and not self.element.supported:
            return False
        return all(t.supported for _, t in self.fields)


def _split_top(text: str) -> list[str]:
    """`a:int,b:struct<c:int,d:int>` -> ['a:int', 'b:struct<c:int,d:int>'] (commas outside <> and ())."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse_type(declared: str | None) -> SqlType:
    text = (declared or "").strip().lower()
    if text in INTEGER_KINDS:
        return SqlType("integer", text)
    if text in ("boolean", "string", "date", "timestamp", "binary"):
        return SqlType(text, text)
    decimal = re.fullmatch(r"decimal\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)", text)
    if decimal:
        return SqlType("decimal", text, scale=int(decimal.group(2) or 0))
    if text.startswith("array<") and text.endswith(">"):
        return SqlType("array", text, element=parse_type(text[6:-1]))
    if text.startswith("struct<") and text.endswith(">"):
        fields = []
        for part in _split_top(text[7:-1]):
            name, _, inner = part.partition(":")
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", name.strip()):
                return SqlType("unsupported", text)
            fields.append((name.strip(), parse_type(inner)))
        return SqlType("struct", text, fields=tuple(fields))
    return SqlType("unsupported", text)


@dataclass(frozen=True)
class SourceType:
    """What the source says about a column: its type name, and for a range its bound type."""

    name: str  # e.g. integer, character, timestamp with time zone, tstzrange, text[]
    is_range: bool = False
    range_subtype: str | None = None

    @property
    def with_time_zone(self) -> bool:
        return self.name in ("timestamp with time zone", "timestamptz")


# --- the three dialects --------------------------------------------------------------------
class Dialect:
    """SQL for canonical texts and hashes in one engine."""

    name = "abstract"

    def quote(self, identifier: str) -> str:
        raise NotImplementedError

    def length_prefixed(self, text_sql: str) -> str:
        """`<characters>:<text>`, or `-` for NULL: never NULL itself."""
        raise NotImplementedError

    def concat(self, parts: list[str]) -> str:
        return "concat(" + ", ".join(parts) + ")" if len(parts) > 1 else parts[0]

    def hash60(self, text_sql: str) -> str:
        """The first 60 bits of md5(text) as a non-negative integer."""
        raise NotImplementedError

    def hash32(self, text_sql: str) -> str:
        """The first 32 bits of md5(text) as a non-negative integer (a key's position)."""
        raise NotImplementedError

    def null_text(self) -> str:
        """A NULL of the engine's text type (a column the table does not have yet)."""
        raise NotImplementedError

    def value(self, sql: str, declared: SqlType, source: SourceType | None = None, depth: int = 0) -> str:
        """The canonical text of `sql` (NULL for NULL)."""
        raise NotImplementedError

    def row_text(self, parts: list[str]) -> str:
        return self.concat([self.length_prefixed(p) for p in parts])


class SparkDialect(Dialect):
    name = "spark"

    def quote(self, identifier: str) -> str:
        return "`" + identifier.replace("`", "``") + "`"

    def length_prefixed(self, text_sql: str) -> str:
        return f"coalesce(concat(cast(char_length({text_sql}) as string), ':', {text_sql}), '{NULL_TEXT}')"

    def hash60(self, text_sql: str) -> str:
        return f"cast(conv(substr(md5({text_sql}), 1, 15), 16, 10) as decimal(20, 0))"

    def hash32(self, text_sql: str) -> str:
        return f"cast(conv(substr(md5({text_sql}), 1, 8), 16, 10) as bigint)"

    def null_text(self) -> str:
        return "cast(null as string)"

    def value(self, sql: str, declared: SqlType, source: SourceType | None = None, depth: int = 0) -> str:
        kind = declared.kind
        if kind == "integer":
            return f"cast({sql} as string)"
        if kind == "boolean":
            return f"case when {sql} then 'true' when not {sql} then 'false' end"
        if kind == "string":
            return f"cast({sql} as string)"
        if kind == "decimal":
            # through a string of the unscaled digits: Java's BigDecimal.toString, which a
            # plain cast uses, writes small values with an exponent (1E-7)
            return (f"case when {sql} is not null then format_number(cast({sql} as decimal(38, {declared.scale})), "
                    f"'0{'.' + '0' * declared.scale if declared.scale else ''}') end")
        if kind == "date":
            return f"date_format({sql}, 'yyyy-MM-dd')"
        if kind == "timestamp":
            return f"date_format({sql}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')"
        if kind == "binary":
            return f"lower(hex({sql}))"
        if kind == "array" and declared.element is not None:
            element = f"e{depth}"
            inner = self.length_prefixed(self.value(element, declared.element, None, depth + 1))
            joined = f"array_join(transform({sql}, {element} -> {inner}), ',')"
            return f"case when {sql} is not null then concat('[', {joined}, ']') end"
        if kind == "struct":
            parts = [self.length_prefixed(self.value(f"{sql}.{self.quote(name)}", t, None, depth + 1))
                     for name, t in declared.fields]
            return f"case when {sql} is not null then {self.concat(parts)} end"
        raise ValueError(f"type {declared.text!r} has no canonical text")


class PostgresDialect(Dialect):
    name = "postgresql"

    def quote(self, identifier: str) -> str:
        return '"' + identifier.replace('"', '""') + '"'

    def length_prefixed(self, text_sql: str) -> str:
        return f"coalesce(char_length({text_sql})::text || ':' || {text_sql}, '{NULL_TEXT}')"

    def hash60(self, text_sql: str) -> str:
        return f"('x' || substr(md5({text_sql}), 1, 15))::bit(60)::bigint"

    def hash32(self, text_sql: str) -> str:
        return f"('x' || substr(md5({text_sql}), 1, 8))::bit(32)::bigint"

    def null_text(self) -> str:
        return "null::text"

    def value(self, sql: str, declared: SqlType, source: SourceType | None = None, depth: int = 0) -> str:
        kind = declared.kind
        if source is not None and source.is_range and kind == "struct":
            return self._range(sql, declared, source, depth)
        if kind == "integer":
            return f"({sql})::text"
        if kind == "boolean":
            return f"case when {sql} then 'true' when not {sql} then 'false' end"
        if kind == "string":
            # concat() writes the type's own output (a char(n) keeps its padding, as Debezium sends it)
            return f"case when {sql} is not null then concat({sql}) end"
        if kind == "decimal":
            return f"round(({sql})::numeric, {declared.scale})::text"
        if kind == "date":
            return f"to_char(({sql})::date, 'YYYY-MM-DD')"
        if kind == "timestamp":
            zoned = source is not None and source.with_time_zone
            moment = f"({sql}) at time zone 'UTC'" if zoned else f"({sql})::timestamp"
            return f"to_char({moment}, 'YYYY-MM-DD HH24:MI:SS.US')"
        if kind == "binary":
            return f"encode({sql}, 'hex')"
        if kind == "array" and declared.element is not None:
            element = f"e{depth}"
            element_type = SourceType(source.name[:-2]) if source is not None and source.name.endswith("[]") else None
            inner = self.length_prefixed(self.value(f"{element}.v", declared.element, element_type, depth + 1))
            joined = (f"(select string_agg({inner}, ',' order by {element}.o) "
                      f"from unnest({sql}) with ordinality as {element}(v, o))")
            return f"case when {sql} is not null then '[' || coalesce({joined}, '') || ']' end"
        raise ValueError(f"type {declared.text!r} has no canonical text in PostgreSQL")

    def _range(self, sql: str, declared: SqlType, source: SourceType, depth: int) -> str:
        """A range as silver's struct<lower, upper, lower_inclusive, upper_inclusive, is_empty>:
        an unbounded or infinite bound is NULL."""
        bound_source = SourceType(source.range_subtype or "")
        finite = source.range_subtype in ("date", "timestamp without time zone", "timestamp with time zone")
        parts = []
        for name, t in declared.fields:
            if name in ("lower", "upper"):
                bound = f"{name}({sql})"
                if finite:
                    bound = f"case when isfinite({bound}) then {bound} end"
                parts.append(self.length_prefixed(self.value(bound, t, bound_source, depth + 1)))
            elif name in ("lower_inclusive", "upper_inclusive", "is_empty"):
                function = {"lower_inclusive": "lower_inc", "upper_inclusive": "upper_inc", "is_empty": "isempty"}[name]
                parts.append(self.length_prefixed(self.value(f"{function}({sql})", t, None, depth + 1)))
            else:
                raise ValueError(f"field {name!r} of {declared.text!r} is not a range part")
        return f"case when {sql} is not null then {self.concat(parts)} end"


class MariaDBDialect(Dialect):
    name = "mariadb"

    def quote(self, identifier: str) -> str:
        return "`" + identifier.replace("`", "``") + "`"

    def length_prefixed(self, text_sql: str) -> str:
        return f"coalesce(concat(char_length({text_sql}), ':', {text_sql}), '{NULL_TEXT}')"

    def hash60(self, text_sql: str) -> str:
        return f"cast(conv(substr(md5({text_sql}), 1, 15), 16, 10) as unsigned)"

    def hash32(self, text_sql: str) -> str:
        return f"cast(conv(substr(md5({text_sql}), 1, 8), 16, 10) as unsigned)"

    def null_text(self) -> str:
        return "cast(null as char)"

    def value(self, sql: str, declared: SqlType, source: SourceType | None = None, depth: int = 0) -> str:
        kind = declared.kind
        if kind == "integer":
            return f"cast({sql} as char)"
        if kind == "boolean":
            return f"case when {sql} <> 0 then 'true' when {sql} = 0 then 'false' end"
        if kind == "string":
            return f"convert(cast({sql} as char) using utf8mb4)"
        if kind == "decimal":
            return f"cast(cast({sql} as decimal(65, {declared.scale})) as char)"
        if kind == "date":
            return f"date_format({sql}, '%Y-%m-%d')"
        if kind == "timestamp":
            return f"date_format({sql}, '%Y-%m-%d %H:%i:%s.%f')"
        if kind == "binary":
            return f"lower(hex({sql}))"
        raise ValueError(f"type {declared.text!r} has no canonical text in MariaDB")


def can_compare(dialect: Dialect, declared: SqlType, source: SourceType | None) -> bool:
    """Whether the dialect gives this column a canonical text (else it is not compared)."""
    if not declared.supported:
        return False
    if declared.kind == "struct":
        return isinstance(dialect, SparkDialect) or (
            isinstance(dialect, PostgresDialect) and source is not None and source.is_range
            and {n for n, _ in declared.fields} <= {"lower", "upper", "lower_inclusive", "upper_inclusive", "is_empty"})
    if declared.kind == "array":
        element = declared.element
        nested = element is None or element.kind in ("array", "struct")
        return not isinstance(dialect, MariaDBDialect) and not nested
    return True
