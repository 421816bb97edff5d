"""Compare a silver table with the source table it mirrors, row by row and column by column.

Values from the database driver (psycopg / PyMySQL) and from Spark are brought to one
plain-Python form first; nothing else is adjusted, so a wrong type or value shows up."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable

from pyspark.sql import Row

MAX_EXAMPLES = 5


def normalize(value: Any) -> Any:
    """One comparable form for a value from either side."""
    if isinstance(value, Row):  # before tuple: a Row is one
        value = value.asDict()
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc).replace(tzinfo=None)
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if type(value).__name__ == "Range":  # psycopg.types.range.Range
        if value.isempty:
            return {"lower": None, "upper": None, "lower_inclusive": False, "upper_inclusive": False, "is_empty": True}
        return {
            "lower": normalize(value.lower),
            "upper": normalize(value.upper),
            "lower_inclusive": bool(value.lower_inc) if value.lower is not None else False,
            "upper_inclusive": bool(value.upper_inc) if value.upper is not None else False,
            "is_empty": False,
        }
    return value


def keyed(rows: Iterable[dict], key: list[str]) -> dict[tuple, dict]:
    result: dict[tuple, dict] = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        assert k not in result, f"duplicate key {dict(zip(key, k))}"
        result[k] = {c: normalize(v) for c, v in row.items()}
    return result


def diff(name: str, expected: list[dict], actual: list[dict], key: list[str]) -> list[str]:
    """Human-readable differences (empty when equal): missing/extra keys, differing values."""
    want, got = keyed(expected, key), keyed(actual, key)
    problems: list[str] = []
    missing = sorted(set(want) - set(got), key=repr)
    extra = sorted(set(got) - set(want), key=repr)
    if missing:
        problems.append(f"{name}: {len(missing)} row(s) missing from silver, e.g. keys {missing[:MAX_EXAMPLES]}")
    if extra:
        problems.append(f"{name}: {len(extra)} row(s) in silver but not in the source, e.g. keys {extra[:MAX_EXAMPLES]}")
    changed = []
    for k in sorted(set(want) & set(got), key=repr):
        columns = [c for c in want[k] if want[k][c] != got[k].get(c)]
        if columns:
            changed.append((k, {c: (want[k][c], got[k].get(c)) for c in columns}))
    if changed:
        examples = "; ".join(f"key {k}: {cols}" for k, cols in changed[:MAX_EXAMPLES])
        problems.append(f"{name}: {len(changed)} row(s) differ (source, silver): {examples}")
    return problems
