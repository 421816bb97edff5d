"""Read the Pagila dataset: column types from pagila-schema.sql, rows from the
COPY blocks of pagila-data.sql (PostgreSQL text format)."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from pathlib import Path

# The nine captured tables, in the order the snapshot reads them.
TABLES = [
    "actor", "country", "city", "address", "category", "language",
    "film", "film_actor", "film_category",
]

# Generated columns: pg_dump leaves them out of COPY and pgoutput (PostgreSQL < 18)
# does not publish them, so they are not part of the change stream.
GENERATED = {"film": {"revenue_projection"}}

_CREATE_RE = re.compile(r"^CREATE TABLE public\.(\w+) \(\n(.*?)\n\);", re.S | re.M)
_PK_RE = re.compile(
    r"ALTER TABLE ONLY public\.(\w+)\s+ADD CONSTRAINT \w+ PRIMARY KEY \(([^)]*)\)", re.S)
_TYPE_END_RE = re.compile(r"\s+(DEFAULT|NOT NULL|GENERATED|COLLATE)\b")


def parse_schema(schema_sql: str, tables=TABLES) -> dict[str, dict]:
    """{table: {"columns": {col: pg_type}, "primary_key": [...], "not_null": [...],
    "defaults": {col: literal}}}, columns in table order (literal defaults only)."""
    out: dict[str, dict] = {}
    for m in _CREATE_RE.finditer(schema_sql):
        name = m.group(1)
        if name not in tables:
            continue
        cols: dict[str, str] = {}
        not_null: list[str] = []
        defaults: dict[str, str] = {}
        for line in m.group(2).split("\n"):
            line = line.strip().rstrip(",")
            if not line or line.startswith("CONSTRAINT"):
                continue
            col, rest = line.split(" ", 1)
            if col in GENERATED.get(name, ()):
                continue
            cut = _TYPE_END_RE.search(rest)
            cols[col] = (rest[: cut.start()] if cut else rest).strip()
            if "NOT NULL" in rest:
                not_null.append(col)
            d = re.search(r"DEFAULT ('[^']*'|[0-9.]+)", rest)
            if d:
                defaults[col] = d.group(1).strip("'")
        out[name] = {"columns": cols, "primary_key": [], "not_null": not_null,
                     "defaults": defaults}
    for m in _PK_RE.finditer(schema_sql):
        if m.group(1) in out:
            out[m.group(1)]["primary_key"] = [c.strip() for c in m.group(2).split(",")]
    return out


def enum_labels(schema_sql: str, type_name: str) -> list[str]:
    m = re.search(rf"CREATE TYPE public\.{type_name} AS ENUM \((.*?)\);", schema_sql, re.S)
    return re.findall(r"'([^']*)'", m.group(1)) if m else []


# --- COPY text format ----------------------------------------------------------
_ESC = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


def unescape_copy(field: str) -> str:
    if "\\" not in field:
        return field
    out, i, n = [], 0, len(field)
    while i < n:
        c = field[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        d = field[i + 1]
        if d in _ESC:
            out.append(_ESC[d])
            i += 2
        elif d in "01234567":
            j = i + 1
            while j < n and j < i + 4 and field[j] in "01234567":
                j += 1
            out.append(chr(int(field[i + 1:j], 8)))
            i = j
        elif d == "x" and i + 2 < n and field[i + 2] in "0123456789abcdefABCDEF":
            j = i + 2
            while j < n and j < i + 4 and field[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(chr(int(field[i + 2:j], 16)))
            i = j
        else:  # any other escaped character stands for itself
            out.append(d)
            i += 2
    return "".join(out)


def parse_pg_array(text: str) -> list:
    """One-dimensional PostgreSQL array literal -> list of str/None."""
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not an array literal: {text!r}")
    body, items, i = text[1:-1], [], 0
    if body == "":
        return []
    while i <= len(body):
        if i < len(body) and body[i] == '"':
            i += 1
            buf = []
            while body[i] != '"':
                if body[i] == "\\":
                    i += 1
                buf.append(body[i])
                i += 1
            items.append("".join(buf))
            i += 1  # closing quote
        else:
            j = body.find(",", i)
            j = len(body) if j < 0 else j
            tok = body[i:j].strip()
            items.append(None if tok.upper() == "NULL" else tok)
            i = j
        i += 1  # skip the comma
    return items


def _numeric_scale(pg_type: str) -> int | None:
    m = re.match(r"numeric\((\d+),\s*(\d+)\)", pg_type)
    return int(m.group(2)) if m else None


def typed_value(pg_type: str, text: str | None):
    """COPY text (already unescaped) -> Python value the generator works with."""
    if text is None:
        return None
    t = pg_type
    if t in ("integer", "smallint", "bigint", "public.year"):
        return int(text)
    if t.startswith("numeric"):
        scale = _numeric_scale(t)
        d = Decimal(text)
        return d.quantize(Decimal(1).scaleb(-scale)) if scale is not None else d
    if t.startswith("timestamp without time zone"):
        return datetime.fromisoformat(text)
    if t.endswith("[]"):
        return parse_pg_array(text)
    if t == "boolean":
        return text == "t"
    return text  # text, varchar, bpchar (padding kept), enum, tsvector


def read_copy_rows(data_sql: str | Path, table: str, columns: dict[str, str]) -> list[dict]:
    """Rows of `COPY public.<table>` as dicts {col: typed value} in column order."""
    text = Path(data_sql).read_text(encoding="utf-8") if isinstance(data_sql, Path) else data_sql
    m = re.search(rf"^COPY public\.{table} \(([^)]*)\) FROM stdin;\n(.*?)^\\\.$", text, re.S | re.M)
    if not m:
        raise ValueError(f"no COPY block for {table}")
    copy_cols = [c.strip() for c in m.group(1).split(",")]
    rows = []
    for line in m.group(2).split("\n"):
        if line == "":
            continue
        fields = line.split("\t")
        if len(fields) != len(copy_cols):
            raise ValueError(f"{table}: {len(fields)} fields, expected {len(copy_cols)}: {line!r}")
        raw = {c: (None if f == r"\N" else unescape_copy(f)) for c, f in zip(copy_cols, fields)}
        rows.append({c: typed_value(t, raw.get(c)) for c, t in columns.items()})
    return rows


def load(pagila_dir: str | Path) -> tuple[dict[str, dict], dict[str, list[dict]], str]:
    """(schema info, rows per table, schema_sql) for the nine tables."""
    d = Path(pagila_dir)
    schema_sql = (d / "pagila-schema.sql").read_text(encoding="utf-8")
    data_sql = (d / "pagila-data.sql").read_text(encoding="utf-8")
    schema = parse_schema(schema_sql)
    missing = [t for t in TABLES if t not in schema]
    if missing:
        raise ValueError(f"tables missing from schema: {missing}")
    rows = {t: read_copy_rows(data_sql, t, schema[t]["columns"]) for t in TABLES}
    return schema, rows, schema_sql
