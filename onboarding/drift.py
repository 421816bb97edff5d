"""Drift: how a model's declared columns differ from what its topic's upstream schema maps to.

Pure functions over the model's YAML entry (as dbt reads it) and the upstream columns.
Silver's own `_cdc_*` columns and derived columns (`meta.cdc_derived`, computed by the
model, never sent) are not compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onboarding.types import Column

# Declarations that hold an upstream integer as well as `int` does: the project declares
# Connect int8/int16 as int, or as their own range-checked types (docs/concepts, "Types").
NARROW_INTEGERS = {"int8": {"tinyint", "smallint"}, "int16": {"smallint"}}
RANGE_STRUCT_PREFIX = "struct<lower:"


def normalized(data_type: str) -> str:
    """A declared type as the silver macros read it: lower case, no spaces, integer = int."""
    return str(data_type or "").lower().replace(" ", "").replace("integer", "int")


def _accepts(column: Column, declared: str) -> bool:
    if declared == column.data_type:
        return True
    primitive = column.upstream.split(" ", 1)[0]
    if column.data_type == "int" and declared in NARROW_INTEGERS.get(primitive, set()):
        return True
    # A PostgreSQL range arrives as plain text; its struct declaration is how silver decodes it.
    return column.upstream == "string" and declared.startswith(RANGE_STRUCT_PREFIX)


def differences(entry: Mapping[str, Any], upstream: list[Column]) -> list[str]:
    """Column by column, how the model's YAML `entry` differs from the `upstream` columns:
    a column missing in the YAML, a column missing upstream, a type or encoding that
    differs. Types marked not inferred (no schema upstream) are compared by name only."""
    declared = {}
    derived = set()
    for column in entry.get("columns") or []:
        if not isinstance(column, Mapping) or str(column.get("name", "")).startswith("_cdc_"):
            continue
        name = str(column.get("name"))
        declared[name] = column
        if (column.get("meta") or {}).get("cdc_derived") is True:
            derived.add(name)
    found = []
    by_name = {c.name: c for c in upstream}
    for column in upstream:
        if column.name not in declared:
            found.append(f"column missing in YAML: {column.name} (upstream maps to {column.data_type})")
    for name, column in declared.items():
        if name in derived:
            continue
        if name not in by_name:
            found.append(f"column missing upstream: {name} (declared {column.get('data_type')})")
            continue
        mapped = by_name[name]
        data_type = normalized(column.get("data_type"))
        if not mapped.inferred:
            continue
        if not _accepts(mapped, data_type):
            found.append(f"type differs: {name} declared {column.get('data_type')}, upstream maps to "
                         f"{mapped.data_type} ({mapped.upstream})")
        elif data_type == "timestamp":
            encoding = (column.get("meta") or {}).get("debezium_encoding")
            if (encoding or None) != mapped.encoding:
                found.append(f"encoding differs: {name} declared meta.debezium_encoding {encoding or '(micros)'}, "
                             f"upstream sends {mapped.encoding or 'micros'} ({mapped.upstream})")
    return found
