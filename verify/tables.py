"""Which silver tables can be compared with a source table, read from the dbt project.

A silver model is described by `models/silver/_silver__models.yml` (its columns and
their `data_type`, its `config`), its SQL names its bronze source
(`source('bronze', '<name>')`), and `models/silver/_silver__sources.yml` gives that
source's `meta.primary_key` and `meta.topic`. Only models holding the current state of a
log-captured table compare with the source as it is now: soft-delete models
(`cdc_deletes: soft`) and insert-only logs (`cdc_deletes: ignore`) keep rows the source
deleted on purpose, and a query-based source (`meta.query_based`) cannot see deletes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from verify.errors import IdentifierError, ProjectError, UsageError

# Names that reach SQL: plain identifiers only (quoted anyway by every dialect).
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_IDENTIFIER_LENGTH = 128
SOURCE_CALL = re.compile(r"source\(\s*['\"]bronze['\"]\s*,\s*['\"](\w+)['\"]\s*\)")
SQL_DELETES = re.compile(r"cdc_deletes\s*=\s*['\"](\w+)['\"]")
METADATA_PREFIX = "_cdc_"


def check_identifier(what: str, name: object) -> str:
    """`name` if it is a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 128 characters)."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name) or len(name) > MAX_IDENTIFIER_LENGTH:
        raise IdentifierError(f"{what} {name!r} is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)")
    return name


@dataclass(frozen=True)
class Column:
    name: str
    data_type: str | None  # as declared; None when the YAML declares none


@dataclass(frozen=True)
class TableSpec:
    """A silver model and the bronze source it reads."""

    model: str
    bronze: str
    topic: str | None
    key: tuple[str, ...]
    columns: tuple[Column, ...]
    deletes: str = "hard"
    query_based: bool = False

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    @property
    def unfit(self) -> str | None:
        """Why this model cannot equal its source table, None when it should."""
        if self.query_based:
            return "query-based capture (meta.query_based) cannot see deletes and has no source log position"
        if self.deletes != "hard":
            return f"cdc_deletes: {self.deletes} keeps rows the source deleted"
        return None


def _load_yaml(path: Path) -> dict:
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ProjectError(f"{path} not found") from None
    except yaml.YAMLError as exc:
        raise ProjectError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise ProjectError(f"{path}: expected a mapping")
    return document


def _bronze_sources(path: Path) -> dict[str, dict]:
    """bronze table name -> its `meta` mapping."""
    sources: dict[str, dict] = {}
    for source in _load_yaml(path).get("sources") or []:
        if not isinstance(source, dict) or source.get("name") != "bronze":
            continue
        for table in source.get("tables") or []:
            if isinstance(table, dict) and table.get("name"):
                sources[str(table["name"])] = table.get("meta") or {}
    return sources


def _key(meta: dict, source: str, path: Path) -> tuple[str, ...] | None:
    key = meta.get("primary_key")
    if key is None:
        return None
    columns = [key] if isinstance(key, str) else key
    if not isinstance(columns, list) or not columns:
        raise ProjectError(f"{path}: table {source!r}: meta.primary_key must be a column name or a list of names")
    return tuple(check_identifier(f"{path}: primary key column of {source}", c) for c in columns)


def load_tables(project_dir: Path) -> dict[str, TableSpec]:
    """Every silver model whose bronze source declares `meta.primary_key`, by model name."""
    silver = project_dir / "models" / "silver"
    sources_path = silver / "_silver__sources.yml"
    models_path = silver / "_silver__models.yml"
    sources = _bronze_sources(sources_path)
    tables: dict[str, TableSpec] = {}
    for model in _load_yaml(models_path).get("models") or []:
        if not isinstance(model, dict) or not model.get("name"):
            continue
        name = check_identifier(f"{models_path}: model", model["name"])
        sql_path = silver / f"{name}.sql"
        if not sql_path.exists():
            continue  # described in the YAML but not a model of this folder
        sql = sql_path.read_text()
        found = SOURCE_CALL.search(sql)
        if found is None or found.group(1) not in sources:
            continue
        bronze = check_identifier(f"{sql_path}: bronze source", found.group(1))
        meta = sources[bronze]
        key = _key(meta, bronze, sources_path)
        if key is None:
            continue
        columns = tuple(
            Column(check_identifier(f"{models_path}: column of {name}", c["name"]),
                   str(c["data_type"]).strip().lower() if c.get("data_type") else None)
            for c in model.get("columns") or []
            if isinstance(c, dict) and c.get("name") and not str(c["name"]).startswith(METADATA_PREFIX))
        missing = [k for k in key if k not in {c.name for c in columns}]
        if missing:
            raise ProjectError(f"{models_path}: model {name} does not declare its key column(s) {missing}")
        config = model.get("config") or {}
        sql_deletes = SQL_DELETES.search(sql)
        deletes = str(config.get("cdc_deletes") or (sql_deletes.group(1) if sql_deletes else "hard"))
        tables[name] = TableSpec(
            model=name, bronze=bronze, topic=meta.get("topic"), key=key, columns=columns,
            deletes=deletes, query_based=meta.get("query_based") is not None)
    return tables


def select_tables(tables: dict[str, TableSpec], wanted: list[str]) -> tuple[list[TableSpec], dict[str, str]]:
    """The tables to compare and those left out with the reason. Without `wanted`, every
    table that should equal its source; a named table that cannot is a usage error."""
    if not wanted:
        chosen = [t for t in tables.values() if t.unfit is None]
        skipped = {t.model: t.unfit for t in tables.values() if t.unfit is not None}
        return sorted(chosen, key=lambda t: t.model), skipped
    unknown = [w for w in wanted if w not in tables]
    if unknown:
        raise UsageError(f"no silver model with a keyed bronze source named {unknown}; known: {sorted(tables)}")
    unfit = {w: tables[w].unfit for w in wanted if tables[w].unfit is not None}
    if unfit:
        raise UsageError("cannot compare with the source: " + "; ".join(f"{k}: {v}" for k, v in unfit.items()))
    return [tables[w] for w in dict.fromkeys(wanted)], {}
