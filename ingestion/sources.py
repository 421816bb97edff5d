"""Primary keys per topic, and which topics are query-based, read from the dbt sources
YAML (source `bronze`).

The silver models and the ingestion must agree on the keys, so the YAML that dbt
reads is the single place they are declared:

    sources:
      - name: bronze
        tables:
          - name: pagila_public_actor
            meta: {topic: pagila.public.actor, primary_key: [actor_id]}
          - name: shop_public_products
            meta: {topic: shop.public.products, primary_key: [product_id],
                   query_based: {updated_at: updated_at}}

`query_based` marks a topic filled by a polling (JDBC-style, timestamp mode) source:
its records are plain rows without an op, ordered by the `updated_at` column.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ingestion.errors import SourcesFileError

log = logging.getLogger(__name__)

BRONZE_SOURCE = "bronze"
# A column name from the YAML reaches Spark SQL expressions: plain identifiers only.
COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class PrimaryKeys:
    by_topic: dict[str, list[str]] = field(default_factory=dict)
    by_table: dict[str, list[str]] = field(default_factory=dict)

    def lookup(self, topic: str, table: str | None) -> list[str] | None:
        """Key columns of a topic (by `meta.topic`, else by table name), None if undeclared."""
        if topic in self.by_topic:
            return self.by_topic[topic]
        return self.by_table.get(table) if table else None

    # topic / table -> the updated-at column of a query-based source
    updated_at_by_topic: dict[str, str] = field(default_factory=dict)
    updated_at_by_table: dict[str, str] = field(default_factory=dict)

    def updated_at(self, topic: str, table: str | None) -> str | None:
        """The updated-at column of a query-based topic, None for a Debezium topic."""
        if topic in self.updated_at_by_topic:
            return self.updated_at_by_topic[topic]
        return self.updated_at_by_table.get(table) if table else None


def load_primary_keys(path: Path) -> PrimaryKeys:
    """Parse `path`; a missing file only warns (every topic is then landed unchecked)."""
    if not path.exists():
        log.warning("sources file %s not found: no primary-key checks in this run", path)
        return PrimaryKeys()
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise SourcesFileError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("sources", []), list):
        raise SourcesFileError(f"{path}: expected a mapping with a `sources:` list")
    keys = PrimaryKeys()
    for source in document.get("sources") or []:
        if not isinstance(source, dict) or source.get("name") != BRONZE_SOURCE:
            continue
        for entry in source.get("tables") or []:
            name = entry.get("name") if isinstance(entry, dict) else None
            meta = (entry.get("meta") or {}) if isinstance(entry, dict) else {}
            primary_key = meta.get("primary_key")
            if name is not None and primary_key is None and meta.get("query_based") is not None:
                raise SourcesFileError(f"{path}: table {name!r}: meta.query_based needs meta.primary_key")
            if name is None or primary_key is None:
                continue
            columns = [primary_key] if isinstance(primary_key, str) else primary_key
            if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
                raise SourcesFileError(
                    f"{path}: table {name!r}: meta.primary_key must be a column name or a non-empty list of names"
                )
            keys.by_table[str(name)] = list(columns)
            if meta.get("topic"):
                keys.by_topic[str(meta["topic"])] = list(columns)
            updated_at = _updated_at(path, str(name), meta.get("query_based"), columns)
            if updated_at is not None:
                keys.updated_at_by_table[str(name)] = updated_at
                if meta.get("topic"):
                    keys.updated_at_by_topic[str(meta["topic"])] = updated_at
    return keys


def _updated_at(path: Path, table: str, query_based: object, key: list[str]) -> str | None:
    """The validated `meta.query_based.updated_at` column of `table`, None when absent."""
    if query_based is None:
        return None
    column = query_based.get("updated_at") if isinstance(query_based, dict) else None
    if not isinstance(query_based, dict) or set(query_based) != {"updated_at"} or not isinstance(column, str):
        raise SourcesFileError(
            f"{path}: table {table!r}: meta.query_based must be a mapping with one entry, "
            f"updated_at: <column> (got {query_based!r})")
    if not COLUMN_NAME.fullmatch(column):
        raise SourcesFileError(
            f"{path}: table {table!r}: meta.query_based.updated_at {column!r} is not a plain column name "
            "([A-Za-z_][A-Za-z0-9_]*)")
    if column in key:
        raise SourcesFileError(
            f"{path}: table {table!r}: meta.query_based.updated_at {column!r} is a primary key column; "
            "it must be the column the source sets on every insert and update")
    return column


def default_sources_yml() -> Path:
    """The project's bronze sources YAML."""
    from core.spark import PROJECT_DIR

    return PROJECT_DIR / "models" / "silver" / "_silver__sources.yml"
