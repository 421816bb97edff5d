"""Load: render a table's source entry, model file and model YAML entry, and add the
missing ones to the project without touching anything that exists.

The YAML files are edited as text: each new entry is rendered in the files' own layout
(two-space indents, indented sequences) and inserted after the last item of its list,
so comments, anchors, quoting and blank lines stay as the user wrote them. The edited
text is parsed again and must equal the old document plus the new entries, or nothing
is written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.identifiers import TableNameError, validate_identifier
from ingestion.naming import table_for_topic
from ingestion.sources import BRONZE_SOURCE, COLUMN_NAME
from onboarding.errors import OnboardingError, UnsafeNameError
from onboarding.types import Column

SILVER = Path("models") / "silver"
SOURCES_FILE = SILVER / "_silver__sources.yml"
MODELS_FILE = SILVER / "_silver__models.yml"
# The op codes `_cdc_op` may hold, as seeds/debezium_operations.csv lists them.
OP_CODES = ["c", "u", "d", "r", "t"]
METADATA_COLUMNS = [
    ("_cdc_op", "Last Debezium operation applied to the row (c, u or r)."),
    ("_cdc_order", "{{ doc('cdc_order') }}"),
    ("_cdc_source_ts", "{{ doc('cdc_source_ts') }}"),
    ("_cdc_commit_time", "{{ doc('cdc_commit_time') }}"),
]
# models/silver/actor.sql with its source's name as the one blank.
MODEL_SQL = """with

current_state as (
    {{{{ cdc_current_state(source('bronze', '{source}')) }}}}
),

final as (
    select * from current_state
)

select * from final
"""
NOT_INFERRED_COMMENT = "not inferred from the records: check it"
SOURCE_REF = re.compile(r"""source\(\s*['"]bronze['"]\s*,\s*['"]([A-Za-z0-9_]+)['"]\s*\)""")


@dataclass(frozen=True)
class TablePlan:
    """What onboarding one topic writes: its names, key and columns, all validated."""

    topic: str
    source_name: str  # the bronze table: the topic with every char outside [a-z0-9_] as `_`
    model: str  # the source table's own name: the topic's last dot-part
    key: list[str]
    columns: list[Column]


def plan(topic: str, key: list[str], columns: list[Column]) -> TablePlan:
    """The validated plan of a topic; UnsafeNameError names what cannot reach SQL or YAML."""
    try:
        source_name = table_for_topic(topic)
        model = validate_identifier(topic.rsplit(".", 1)[-1].lower(), "model name (the topic's last dot-part)")
    except TableNameError as exc:
        raise UnsafeNameError(f"topic {topic!r}: {exc}") from None
    names = [c.name for c in columns]
    for name in names + key:
        if not COLUMN_NAME.fullmatch(name) or name.lower().startswith("_cdc_"):
            raise UnsafeNameError(
                f"topic {topic!r}: column {name!r} is not a plain column name ([A-Za-z_][A-Za-z0-9_]*, not "
                "starting with _cdc_, which silver's own columns use): rename it upstream (e.g. with a "
                "Debezium column-renaming SMT) or declare the model by hand")
    lowered = [n.lower() for n in names]
    clashing = sorted({n for n in lowered if lowered.count(n) > 1})
    if clashing:
        raise UnsafeNameError(f"topic {topic!r}: columns {clashing} differ only in case, which Spark does not tell apart")
    if not key:
        raise OnboardingError(f"topic {topic!r}: no primary key: the records carry no key to read it from (record "
                              "keys files of the S3 sink with store.kafka.keys=true, the Kafka record key, or the "
                              "registry's <topic>-key subject); add the source entry by hand with meta.primary_key")
    missing = [k for k in key if k not in names]
    if missing and columns:
        raise OnboardingError(f"topic {topic!r}: key field(s) {missing} are not columns of its rows {names}")
    return TablePlan(topic, source_name, model, list(key), list(columns))


# --- rendering (pure) ----------------------------------------------------------------

class Block(list):
    """A list rendered in block style (one `- item` a line), as `data_tests` are."""


@dataclass(frozen=True)
class Commented:
    """A scalar rendered with a trailing YAML comment."""

    value: Any
    comment: str


def source_entry(p: TablePlan) -> dict[str, Any]:
    return {
        "name": p.source_name,
        "description": f"Change log of the Debezium topic {p.topic} (scaffolded by python -m onboarding).",
        "meta": {"topic": p.topic, "primary_key": list(p.key)},
    }


def model_sql(p: TablePlan) -> str:
    return MODEL_SQL.format(source=p.source_name)


def describe(column: Column, key: list[str]) -> str:
    """A column's description: what upstream sends, how it is declared, and its key role."""
    text = f"{column.name}: {column.upstream}{'' if column.optional else ', not null'} upstream"
    if column.note:
        text += f"; {column.note}"
    if not column.inferred:
        text += f"; declared {column.data_type}, not inferred: check it"
    if column.name in key:
        text += "; the primary key" if len(key) == 1 else "; part of the primary key"
    return text + "."


def model_entry(p: TablePlan) -> dict[str, Any]:
    """The model's YAML entry: its description, tests, typed columns and silver's own
    columns, as the hand-written models have them."""
    tests: list[Any] = []
    if len(p.key) > 1:
        tests.append({"unique_combination": {"arguments": {"columns": list(p.key)}}})
    tests.append("cdc_no_rejected_events")
    columns: list[dict[str, Any]] = []
    for column in p.columns:
        entry: dict[str, Any] = {
            "name": column.name,
            "description": describe(column, p.key),
            "data_type": column.data_type if column.inferred else Commented(column.data_type, NOT_INFERRED_COMMENT),
        }
        if column.encoding:
            entry["meta"] = {"debezium_encoding": column.encoding}
        if column.name in p.key:
            entry["data_tests"] = Block(["not_null", "unique"] if len(p.key) == 1 else ["not_null"])
        columns.append(entry)
    for name, description in METADATA_COLUMNS:
        entry = {"name": name, "description": description}
        if name == "_cdc_op":
            entry["data_tests"] = Block([{"accepted_values": {"arguments": {"values": list(OP_CODES)}}}])
        columns.append(entry)
    return {
        "name": p.model,
        "description": f"Current state of the table of Debezium topic {p.topic}, one row per primary key, "
                       "deletes applied (scaffolded by python -m onboarding).",
        "data_tests": Block(tests),
        "columns": columns,
    }


def _scalar(value: Any) -> str:
    if isinstance(value, Commented):
        return f"{_scalar(value.value)}  # {value.comment}"
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    text = yaml.safe_dump(value, default_flow_style=True, width=2**31 - 1, allow_unicode=True)
    text = text.removesuffix("\n...\n").rstrip("\n")
    if isinstance(value, str) and text != value:
        # Quoted as the project's YAML quotes: double quotes (a JSON string is one).
        return json.dumps(value, ensure_ascii=False)
    return text


def _mapping_lines(mapping: dict[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    lines = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            lines.append(f"{pad}{key}:")
            lines += _mapping_lines(value, indent + 2)
        elif isinstance(value, Block) or (isinstance(value, list) and any(isinstance(v, dict) for v in value)):
            lines.append(f"{pad}{key}:")
            for item in value:
                lines += item_lines(item, indent + 2)
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    return lines


def item_lines(item: Any, dash: int) -> list[str]:
    """A sequence item as YAML lines, its dash at column `dash`, its content two further."""
    if not isinstance(item, dict):
        return [" " * dash + "- " + _scalar(item)]
    lines = _mapping_lines(item, dash + 2)
    lines[0] = " " * dash + "- " + lines[0][dash + 2:]
    return lines


# --- inserting into YAML text ------------------------------------------------------------

def _value(node: yaml.Node, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def _block_end(lines: list[str], start: int, dash: int) -> int:
    """The index of the line after the last content line of the block sequence item that
    starts at line `start` with its dash at column `dash`: the item goes on while lines
    are blank or indented past the dash."""
    end = start + 1
    for i in range(start + 1, len(lines)):
        stripped = lines[i].lstrip(" ")
        if not stripped.strip():
            continue
        if len(lines[i]) - len(stripped) <= dash:
            break
        end = i + 1
    return end


def append_to_sequence(text: str, sequence: yaml.Node, items: list[dict[str, Any]], what: str) -> str:
    """`text` with `items` after the last item of the block sequence `sequence` (a node
    composed from `text`), in that item's indentation."""
    if not isinstance(sequence, yaml.SequenceNode) or sequence.flow_style or not sequence.value:
        raise OnboardingError(f"{what} is not a block list with an item (`- name: ...` lines): add the entries "
                              "by hand, or turn it into one")
    lines = text.splitlines(keepends=True)
    last = sequence.value[-1]
    line, column = last.start_mark.line, last.start_mark.column
    before = lines[line][:column].rstrip()
    if not before.endswith("-"):
        raise OnboardingError(f"{what}: its last item at line {line + 1} is not a `- ` item on a line of its own")
    dash = len(before) - 1
    end = _block_end([ln.rstrip("\r\n") for ln in lines], line, dash)
    if end and not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    added = [f"{ln}\n" for item in items for ln in item_lines(item, dash)]
    return "".join(lines[:end] + added + lines[end:])


def add_sources(text: str | None, entries: list[dict[str, Any]], path: Path) -> str:
    """The sources YAML `text` (None: no file yet) with `entries` added to source `bronze`."""
    if not entries:
        return text or ""
    if text is None or not text.strip():
        source = {"name": BRONZE_SOURCE, "description": "Change logs landed by the ingestion (python -m ingestion).",
                  "schema": "{{ var('cdc_bronze_schema') }}", "tables": entries}
        return "version: 2\n\nsources:\n" + "".join(f"{ln}\n" for ln in item_lines(source, 2))
    root = yaml.compose(text)
    sources = _value(root, "sources")
    bronze = None
    for item in getattr(sources, "value", []) if isinstance(sources, yaml.SequenceNode) else []:
        name = _value(item, "name")
        if isinstance(name, yaml.ScalarNode) and name.value == BRONZE_SOURCE:
            bronze = item
    if bronze is None:
        source = {"name": BRONZE_SOURCE, "schema": "{{ var('cdc_bronze_schema') }}", "tables": entries}
        new = append_to_sequence(text, sources, [source], f"{path}: `sources:`")
    else:
        new = append_to_sequence(text, _value(bronze, "tables"), entries, f"{path}: source bronze's `tables:`")
    expected = yaml.safe_load(text)
    if bronze is None:
        expected["sources"].append(source)
    else:
        next(s for s in expected["sources"] if s.get("name") == BRONZE_SOURCE)["tables"].extend(entries)
    _check(new, expected, path)
    return new


def add_models(text: str | None, entries: list[dict[str, Any]], path: Path) -> str:
    """The models YAML `text` (None: no file yet) with `entries` added to `models:`."""
    if not entries:
        return text or ""
    if text is None or not text.strip():
        return "version: 2\n\nmodels:\n" + "".join(f"{ln}\n" for entry in entries for ln in item_lines(entry, 2))
    root = yaml.compose(text)
    new = append_to_sequence(text, _value(root, "models"), entries, f"{path}: `models:`")
    expected = yaml.safe_load(text)
    expected["models"].extend(entries)
    _check(new, expected, path)
    return new


def _plain(value: Any) -> Any:
    """`value` with the rendering wrappers taken off, as YAML reads it back."""
    if isinstance(value, Commented):
        return _plain(value.value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _check(new: str, expected: Any, path: Path) -> None:
    try:
        parsed = yaml.safe_load(new)
    except yaml.YAMLError as exc:
        raise OnboardingError(f"{path}: adding the entries would break the file ({exc}); nothing written") from exc
    if parsed != _plain(expected):
        raise OnboardingError(f"{path}: adding the entries as text would change what the file says; nothing "
                              "written: add them by hand (python -m onboarding --dry-run prints them)")


# --- the project as it is ----------------------------------------------------------------

@dataclass
class Project:
    """What a dbt project declares already: bronze sources, models' files and YAML entries."""

    root: Path
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)  # bronze table name -> entry
    source_topics: dict[str, str] = field(default_factory=dict)  # meta.topic -> bronze table name
    model_files: dict[str, Path] = field(default_factory=dict)  # model name -> .sql file
    model_entries: dict[str, tuple[Path, dict[str, Any]]] = field(default_factory=dict)  # name -> (yml, entry)

    @classmethod
    def read(cls, root: Path) -> "Project":
        project = cls(root)
        models = root / "models"
        for path in sorted(models.rglob("*.sql")) if models.is_dir() else []:
            project.model_files.setdefault(path.stem, path)
        for path in sorted([*models.rglob("*.yml"), *models.rglob("*.yaml")]) if models.is_dir() else []:
            try:
                document = yaml.safe_load(path.read_text()) or {}
            except yaml.YAMLError as exc:
                raise OnboardingError(f"{path} is not valid YAML: {exc}") from exc
            if not isinstance(document, dict):
                continue
            for entry in document.get("models") or []:
                if isinstance(entry, dict) and entry.get("name"):
                    project.model_entries.setdefault(str(entry["name"]), (path, entry))
            for source in document.get("sources") or []:
                if not isinstance(source, dict) or source.get("name") != BRONZE_SOURCE:
                    continue
                for table in source.get("tables") or []:
                    if isinstance(table, dict) and table.get("name"):
                        project.sources[str(table["name"])] = table
                        topic = (table.get("meta") or {}).get("topic")
                        if topic:
                            project.source_topics[str(topic)] = str(table["name"])
        return project

    def model_source(self, model: str) -> str | None:
        """The bronze source a model's SQL reads, None if it reads none (or has no file)."""
        path = self.model_files.get(model)
        found = SOURCE_REF.search(path.read_text()) if path else None
        return found.group(1) if found else None


@dataclass
class Written:
    """What adding one table did (or, in a dry run, would do) to each of its three parts."""

    plan: TablePlan
    source: str  # "added" or why it was kept
    model_file: str
    model_entry: str
    texts: dict[str, str] = field(default_factory=dict)  # part -> rendered text added


def scaffold(project: Project, plans: list[TablePlan], dry_run: bool) -> list[Written]:
    """Add each plan's missing parts to the project (nothing when `dry_run`); an existing
    source entry, model file or model YAML entry is kept as it is."""
    root = project.root
    results: list[Written] = []
    new_sources: list[dict[str, Any]] = []
    new_entries: list[dict[str, Any]] = []
    new_files: dict[Path, str] = {}
    for p in plans:
        written = Written(p, "added", "added", "added")
        if p.source_name in project.sources or p.topic in project.source_topics:
            name = project.source_topics.get(p.topic, p.source_name)
            written.source = f"kept: bronze source {name} exists"
        else:
            new_sources.append(source_entry(p))
            written.texts["source"] = "".join(f"{ln}\n" for ln in item_lines(new_sources[-1], 6))
        if p.model in project.model_files:
            written.model_file = f"kept: {project.model_files[p.model].relative_to(root)} exists"
        else:
            path = root / SILVER / f"{p.model}.sql"
            new_files[path] = model_sql(p)
            written.texts["model"] = new_files[path]
        if p.model in project.model_entries:
            written.model_entry = f"kept: {project.model_entries[p.model][0].relative_to(root)} declares {p.model}"
        else:
            new_entries.append(model_entry(p))
            written.texts["yaml"] = "".join(f"{ln}\n" for ln in item_lines(new_entries[-1], 2))
        results.append(written)
    sources_path, models_path = root / SOURCES_FILE, root / MODELS_FILE
    sources_text = add_sources(_read(sources_path), new_sources, sources_path) if new_sources else None
    models_text = add_models(_read(models_path), new_entries, models_path) if new_entries else None
    if not dry_run:
        for path, text in new_files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("x") as out:  # never over a file that appeared meanwhile
                out.write(text)
        if sources_text is not None:
            sources_path.write_text(sources_text)
        if models_text is not None:
            models_path.write_text(models_text)
    return results


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None
