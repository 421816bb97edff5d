"""What the models' YAML promises, checked without Spark: `_cdc_op`'s tests need no
table, and every model, source, seed and column they list has a description (what
`dbt docs generate` shows; docs pages point to the YAML rather than restate it)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import yaml

from tests.support.paths import ROOT

MODEL_YAMLS = sorted((ROOT / "models").rglob("_*__models.yml"))
DOC_REF = re.compile(r"""\{\{\s*doc\(\s*['"](\w+)['"]\s*\)\s*\}\}""")


def models() -> list[tuple[Path, dict]]:
    return [(path, model) for path in MODEL_YAMLS for model in yaml.safe_load(path.read_text())["models"]]


def test_op_codes_tested_are_debezium_op_codes():
    """`_cdc_op`'s accepted values are a list in the YAML (a selection that leaves the
    seed out still runs the test); they must be codes the seed lists."""
    with (ROOT / "seeds" / "debezium_operations.csv").open() as seed:
        known = {row["op"] for row in csv.DictReader(seed)}
    checked = []
    for path, model in models():
        for column in model.get("columns", []):
            if column["name"] != "_cdc_op":
                continue
            for data_test in column.get("data_tests", []):
                assert "relationships" not in data_test, f"{path.name}: {model['name']}._cdc_op reads a table"
                if "accepted_values" in data_test:
                    values = set(data_test["accepted_values"]["arguments"]["values"])
                    assert values <= known, f"{model['name']}: {sorted(values - known)} not in the seed"
                    checked.append(model["name"])
    assert "actor" in checked and len(checked) >= 15, checked


def doc_blocks() -> dict[str, str]:
    """The `{% docs name %}` blocks under models/, by name."""
    blocks = {}
    for path in (ROOT / "models").rglob("*.md"):
        for name, body in re.findall(r"\{%-?\s*docs\s+(\w+)\s*-?%\}(.*?)\{%-?\s*enddocs\s*-?%\}", path.read_text(), re.S):
            blocks[name] = body
    return blocks


def undescribed(what: str, node: dict, blocks: dict[str, str]) -> list[str]:
    """`what` if `node` has no description, or one that is only a doc() of a missing
    or empty block."""
    text = str(node.get("description") or "")
    for name in DOC_REF.findall(text):
        if not blocks.get(name, "").strip():
            return [f"{what}: doc('{name}') has no block under models/"]
    return [] if DOC_REF.sub("x", text).strip() else [what]


def test_every_model_and_column_has_a_description():
    blocks = doc_blocks()
    missing, described = [], set()
    for path, model in models():
        described.add(model["name"])
        missing += undescribed(f"{path.name}: {model['name']}", model, blocks)
        for column in model.get("columns", []):
            missing += undescribed(f"{path.name}: {model['name']}.{column['name']}", column, blocks)
    sql_models = {path.stem for path in (ROOT / "models").rglob("*.sql")}
    missing += [f"{name}: in no _*__models.yml" for name in sorted(sql_models - described)]
    assert not missing, "no description:\n" + "\n".join(missing)
    assert {"actor", "orders", "actor_history"} <= described


def test_every_source_and_seed_has_a_description():
    blocks = doc_blocks()
    missing = []
    for path in sorted((ROOT / "models").rglob("_*__sources.yml")):
        for source in yaml.safe_load(path.read_text())["sources"]:
            missing += undescribed(f"{path.name}: {source['name']}", source, blocks)
            for table in source.get("tables", []):
                missing += undescribed(f"{path.name}: {source['name']}.{table['name']}", table, blocks)
                for column in table.get("columns", []):
                    missing += undescribed(f"{path.name}: {table['name']}.{column['name']}", column, blocks)
    for path in sorted((ROOT / "seeds").glob("_*.yml")):
        for seed in yaml.safe_load(path.read_text())["seeds"]:
            missing += undescribed(f"{path.name}: {seed['name']}", seed, blocks)
            with (ROOT / "seeds" / f"{seed['name']}.csv").open() as csv_file:
                header = next(csv.reader(csv_file))
            listed = {column["name"]: column for column in seed.get("columns", [])}
            for name in header:
                missing += undescribed(f"{path.name}: {seed['name']}.{name}", listed.get(name, {}), blocks)
    assert not missing, "no description:\n" + "\n".join(missing)
