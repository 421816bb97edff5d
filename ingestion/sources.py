"""Primary keys per topic, read from the dbt sources YAML (source `bronze`).

The silver models and the ingestion must agree on the keys, so the YAML that dbt
reads is the single place they are declared:

    sources:
      - name: bronze
        tables:
          - name: pagila_public_actor
            meta: {topic: pagila.public.actor, primary_key: [actor_id]}
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ingestion.errors import SourcesFileError

log = logging.getLogger(__name__)

BRONZE_SOURCE = "bronze"


@dataclass(frozen=True)
class PrimaryKeys:
    by_topic: dict[str, list[str]] = field(default_factory=dict)
    by_table: dict[str, list[str]] = field(default_factory=dict)

    def lookup(self, topic: str, table: str | None) -> list[str] | None:
        """Key columns of a topic (by `meta.topic`, else by table name), None if undeclared."""
        if topic in self.by_topic:
            return self.by_topic[topic]
        return self.by_table.get(table) if table else None


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
    return keys
