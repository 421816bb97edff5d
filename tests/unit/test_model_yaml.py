"""What the models' YAML promises, checked without Spark."""

from __future__ import annotations

import csv
from pathlib import Path

import yaml

from tests.support.paths import ROOT

MODEL_YAMLS = sorted((ROOT / "models").rglob("_*__models.yml"))


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
