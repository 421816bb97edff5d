"""`python -m onboarding` against the real stack: the JSON connectors' Kafka topics (one
Spark Kafka batch query, the record keys from Kafka) and the Avro connectors' schemas in
the schema registry. Each scaffolded model declares the hand-written model's types,
except the columns tests/unit/test_onboarding.py lists as not determinable from the
schema; columns the workload adds later are there once the newest records carry them.
Generated columns are there too: the snapshot's records carry them, so the schema has them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from onboarding import cli
from tests.support import oracle
from tests.unit.test_onboarding import NOT_FROM_THE_SCHEMA, declared, hand_written_keys

pytestmark = [pytest.mark.e2e]

KAFKA_TOPICS = r"pagila\.public\.(actor|customer|film|payment|rental|staff)|mariadb\.movies_db\.movies"
# The Avro connector captures tests/e2e/conftest.AVRO_PAGILA_TABLES of Pagila.
REGISTRY_TOPICS = r"pagila_avro\.public\.(actor|customer|film|staff)|mariadb_avro\.movies_db\.movies"
# Schema-less text columns of movies (movies-envelope: JsonConverter without schemas).
MOVIES_TEXT = {"title", "country"}
# Added by the workload's ALTER TABLE, like the oracle's added_later columns of rental.
ADDED_LATER = {"movies": {"country"}}


def scaffolded(project: Path) -> tuple[dict[str, dict], dict[str, list[str]]]:
    silver = project / "models" / "silver"
    models = {m["name"]: m for m in yaml.safe_load((silver / "_silver__models.yml").read_text())["models"]}
    tables = yaml.safe_load((silver / "_silver__sources.yml").read_text())["sources"][0]["tables"]
    return models, {t["meta"]["topic"]: t["meta"]["primary_key"] for t in tables}


def assert_declares_hand_written_types(model: str, entry: dict) -> None:
    got = {c["name"]: (c["data_type"], (c.get("meta") or {}).get("debezium_encoding"))
           for c in entry["columns"] if not c["name"].startswith("_cdc_")}
    spec = oracle.TABLES[model]
    may_lack = set(spec.get("derived", {})) | set(spec.get("added_later", [])) | ADDED_LATER.get(model, set())
    expected = {name: (data_type, encoding) for name, data_type, encoding in declared(model)}
    assert set(got) <= set(expected) and set(expected) - set(got) <= may_lack, (model, sorted(got))
    for name, declaration in got.items():
        if name in spec.get("derived", {}):
            # Pagila's initial snapshot (the recorded fixtures have none) carries the generated
            # columns, so the schema has them: declared as the source's type, not derived.
            assert declaration == expected[name], (model, name)
        elif (model, name) in NOT_FROM_THE_SCHEMA:
            assert declaration[0] == NOT_FROM_THE_SCHEMA[(model, name)][0], (model, name)
        else:
            assert declaration == expected[name], (model, name)


@pytest.fixture(scope="module")
def caught_up(cdc_stack):
    """The stack with every change of both connectors' topics published (one wait: the
    module runs after the other end-to-end tests have caught up, or first)."""
    import stack

    stack.wait_caught_up(f"{KAFKA_TOPICS}|{REGISTRY_TOPICS}", quiet_seconds=2)
    return cdc_stack


def test_kafka_topics(spark, caught_up, tmp_path: Path, capsys):
    (tmp_path / "dbt_project.yml").write_text("name: onboarded\n")
    assert cli.main(["--kafka-bootstrap-servers", caught_up.kafka_bootstrap, "--topic-pattern", KAFKA_TOPICS,
                     "--project-dir", str(tmp_path)], spark=spark) == 0, capsys.readouterr()
    models, keys = scaffolded(tmp_path)
    assert sorted(models) == ["actor", "customer", "film", "movies", "payment", "rental", "staff"]
    for model, entry in models.items():
        assert_declares_hand_written_types(model, entry)
    assert keys == {topic: key for topic, key in hand_written_keys().items() if topic in keys} and len(keys) == 7
    not_inferred = {c["name"] for c in models["movies"]["columns"] if "not inferred" in c["description"]}
    assert not_inferred == MOVIES_TEXT & {c["name"] for c in models["movies"]["columns"]}


def test_registry_subjects(caught_up, tmp_path: Path, capsys):
    (tmp_path / "dbt_project.yml").write_text("name: onboarded\n")
    assert cli.main(["--schema-registry-url", caught_up.registry_url, "--topic-pattern", REGISTRY_TOPICS,
                     "--project-dir", str(tmp_path)]) == 0, capsys.readouterr()
    models, keys = scaffolded(tmp_path)
    assert sorted(models) == ["actor", "customer", "film", "movies", "staff"]
    for model, entry in models.items():
        assert_declares_hand_written_types(model, entry)
    expected_keys = hand_written_keys()
    assert keys == {topic: expected_keys[topic.replace("_avro.", ".", 1)] for topic in keys} and len(keys) == 5
