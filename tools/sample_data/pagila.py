"""Read the Pagila dataset: column types from pagila-schema.sql, rows from the
COPY blocks of pagila-data.sql (PostgreSQL text format)."""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

# The fourteen captured tables, in the order the snapshot reads them.
TABLES = [
    "actor", "country", "city", "address", "category", "language",
    "film", "film_actor", "film_category",
    "staff", "customer", "inventory", "rental", "payment",
]

# Generated columns are left out of COPY by pg_dump, and pgoutput (PostgreSQL < 18) does
# not publish them. Those listed here are left out of the sample altogether...
NOT_CAPTURED: dict[str, set[str]] = {}
# ...and these are modelled: the generator computes them as PostgreSQL does, and only
# the initial snapshot (SELECT *) carries them; streamed events do not.
GENERATED = {
    # GENERATED ALWAYS AS (CASE WHEN (activebool IS TRUE) THEN 1 ELSE 0 END) STORED
    "customer": {"active": lambda row: 1 if row["activebool"] is True else 0},
    # GENERATED ALWAYS AS ((rental_duration)::numeric * rental_rate) STORED, numeric(5,2)
    "film": {"revenue_projection": lambda row: None if row["rental_duration"] is None or row["rental_rate"] is None
             else (Decimal(row["rental_duration"]) * row["rental_rate"]).quantize(Decimal("0.01"))},
}

# The partitioned `payment` root has no primary key (each partition has one on
# payment_id); the connector is given one (message.key.columns=public.payment:payment_id).
KEY_OVERRIDE = {"payment": ["payment_id"]}
# Partitioned tables: the data of `payment` is in the COPY blocks of its partitions.
PARTITIONS = {"payment": r"payment_p\w+"}
# Columns Pagila lacks that the capture workload (tools/record_fixtures) adds with
# ALTER TABLE while Debezium runs, for the types Pagila has none of; the sample adds
# them in batch 3 (older events do not carry them).
ADDED_LATER = {"rental": {"checked_at": "timestamp with time zone", "return_window": "tstzrange"}}

_CREATE_RE = re.compile(r"^CREATE TABLE public\.(\w+) \(\n(.*?)\n\);", re.S | re.M)
_PK_RE = re.compile(
    r"ALTER TABLE ONLY public\.(\w+)\s+ADD CONSTRAINT \w+ PRIMARY KEY \(([^)]*)\)", re.S)
_TYPE_END_RE = re.compile(r"\s+(DEFAULT|NOT NULL|GENERATED|COLLATE)\b")


def parse_schema(schema_sql: str, tables=TABLES) -> dict[str, dict]:
    """{table: {"columns": {col: pg_type}, "primary_key": [...], "not_null": [...],
    "defaults": {col: literal}, "generated": [col, ...], "added_later": {col: type}}},
    columns in table order (literal defaults only; `added_later` are not in `columns`)."""
    out: dict[str, dict] = {}
    for m in _CREATE_RE.finditer(schema_sql):
        name = m.group(1)
        if name not in tables:
            continue
        cols: dict[str, str] = {}
        not_null: list[str] = []
        defaults: dict[str, str] = {}
        for line in _column_definitions(m.group(2)):
            if line.startswith("CONSTRAINT"):
                continue
            col, rest = line.split(" ", 1)
            if col in NOT_CAPTURED.get(name, ()):
                continue
            cut = _TYPE_END_RE.search(rest)
            cols[col] = (rest[: cut.start()] if cut else rest).strip()
            if "NOT NULL" in rest:
                not_null.append(col)
            d = re.search(r"DEFAULT ('[^']*'|[0-9.]+|(?:true|false)\b)", rest)
            if d:
                defaults[col] = d.group(1).strip("'")
        out[name] = {"columns": cols, "primary_key": list(KEY_OVERRIDE.get(name, [])),
                     "not_null": not_null, "defaults": defaults,
                     "generated": sorted(GENERATED.get(name, {})),
                     "added_later": dict(ADDED_LATER.get(name, {}))}
    for m in _PK_RE.finditer(schema_sql):
        if m.group(1) in out:
            out[m.group(1)]["primary_key"] = [c.strip() for c in m.group(2).split(",")]
    return out


def _column_definitions(body: str) -> list[str]:
    """The comma-separated items of a CREATE TABLE body (a GENERATED expression may span
    lines and hold commas inside parentheses or quotes), whitespace collapsed."""
    items, depth, quoted, buf = [], 0, False, []
    for ch in body:
        if ch == "," and depth == 0 and not quoted:
            items.append("".join(buf))
            buf = []
            continue
        if ch == "'":
            quoted = not quoted
        elif not quoted:
            depth += (ch == "(") - (ch == ")")
        buf.append(ch)
    items.append("".join(buf))
    return [" ".join(item.split()) for item in items if item.strip()]


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
    if t == "date":
        return date.fromisoformat(text)
    if t.endswith("[]"):
        return parse_pg_array(text)
    if t == "boolean":
        return text == "t"
    if t == "bytea":  # hex output format: \x0123...
        if not text.startswith("\\x"):
            raise ValueError(f"bytea not in hex format: {text[:20]!r}")
        return bytes.fromhex(text[2:])
    if t in ("tsrange", "tstzrange"):
        return parse_pg_range(text)
    return text  # text, varchar, bpchar (padding kept), enum, tsvector


def parse_pg_range(text: str) -> dict:
    """tsrange text form -> {lower, upper, lower_inclusive, upper_inclusive, is_empty}
    (what silver holds): unbounded sides are None and exclusive."""
    if text == "empty":
        return {"lower": None, "upper": None, "lower_inclusive": False,
                "upper_inclusive": False, "is_empty": True}
    m = re.fullmatch(r'([\[(])("[^"]*"|[^",]*),("[^"]*"|[^",]*)([\])])', text)
    if not m:
        raise ValueError(f"not a range literal: {text!r}")

    def bound(tok: str):
        tok = tok.strip('"')
        return datetime.fromisoformat(tok) if tok else None

    return {"lower": bound(m.group(2)), "upper": bound(m.group(3)),
            "lower_inclusive": m.group(1) == "[", "upper_inclusive": m.group(4) == "]",
            "is_empty": False}


def read_copy_rows(data_sql: str | Path, table: str, columns: dict[str, str]) -> list[dict]:
    """Rows of `COPY public.<table>` (or of its partitions' COPY blocks) as dicts
    {col: typed value} in column order; generated columns are computed."""
    text = Path(data_sql).read_text(encoding="utf-8") if isinstance(data_sql, Path) else data_sql
    name = PARTITIONS.get(table, re.escape(table))
    blocks = re.findall(rf"^COPY public\.{name} \(([^)]*)\) FROM stdin;\n(.*?)^\\\.$", text, re.S | re.M)
    if not blocks:
        raise ValueError(f"no COPY block for {table}")
    generated = GENERATED.get(table, {})
    rows = []
    for copy_columns, body in blocks:
        copy_cols = [c.strip() for c in copy_columns.split(",")]
        for line in body.split("\n"):
            if line == "":
                continue
            fields = line.split("\t")
            if len(fields) != len(copy_cols):
                raise ValueError(f"{table}: {len(fields)} fields, expected {len(copy_cols)}: {line!r}")
            raw = {c: (None if f == r"\N" else unescape_copy(f)) for c, f in zip(copy_cols, fields)}
            row = {c: typed_value(t, raw.get(c)) for c, t in columns.items()}
            for c, expression in generated.items():
                row[c] = expression(row)
            rows.append(row)
    return rows


SCHEMA_FILE = "pagila-schema.sql"
DATA_FILE = "pagila-data.sql"


class PagilaNotFound(FileNotFoundError):
    """The folder given as the Pagila dataset lacks its SQL files."""


def load(pagila_dir: str | Path) -> tuple[dict[str, dict], dict[str, list[dict]], str]:
    """(schema info, rows per table, schema_sql) for the captured tables."""
    d = Path(pagila_dir)
    missing = [name for name in (SCHEMA_FILE, DATA_FILE) if not (d / name).is_file()]
    if missing:
        raise PagilaNotFound(f"the Pagila sample is not in {d}: {' and '.join(missing)} not found there; "
                             "point PAGILA_DIR at the folder that holds them (make demo PAGILA_DIR=/path/to/pagila)")
    schema_sql = (d / SCHEMA_FILE).read_text(encoding="utf-8")
    data_sql = (d / DATA_FILE).read_text(encoding="utf-8")
    schema = parse_schema(schema_sql)
    missing = [t for t in TABLES if t not in schema]
    if missing:
        raise ValueError(f"tables missing from schema: {missing}")
    rows = {t: read_copy_rows(data_sql, t, schema[t]["columns"]) for t in TABLES}
    return schema, rows, schema_sql
