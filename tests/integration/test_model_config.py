"""A silver model whose `hudi_options` would break what its correctness rests on stops
before anything is written, with an error naming the option and how to fix it: a
record key / ordering field other than the ones cdc_incremental derives, or
merge-on-read for a history or soft-delete table (they take deletes in MERGE INTO,
which merge-on-read with event-time ordering may skip: apache/hudi#19978). And a
model's own data tests need nothing the selection does not build (no seed first)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ingestion.pipeline import IngestConfig, run as ingest
from tests.support import oracle
from tests.support.lakehouse import dbt_invoke, project_copy
from tests.support.paths import ROOT
from testdata.sink_formats import write_recorded_json

pytestmark = pytest.mark.integration


def project_with_model_options(tmp_path: Path, model: str, options: dict[str, str]) -> Path:
    """A copy of the project whose silver model `model` has `options` as its hudi_options."""
    project = project_copy(tmp_path)
    folder = project / "models" / "silver"
    for models_yml in (folder / "_silver__models.yml", folder / "history" / "_history__models.yml"):
        spec = yaml.safe_load(models_yml.read_text())
        for node in spec["models"]:
            if node["name"] == model:
                node.setdefault("config", {})["hudi_options"] = options
                models_yml.write_text(yaml.safe_dump(spec, sort_keys=False))
                return project
    raise AssertionError(f"no model {model}")


@pytest.mark.parametrize(("model", "options", "expected"), [
    ("actor", {"type": "mergeless"}, "hudi_options sets type = 'mergeless', which is not a Hudi table type"),
    ("actor_history", {"hoodie.datasource.write.table.type": "MERGE_ON_READ"},
     "hudi_options sets hoodie.datasource.write.table.type = 'MERGE_ON_READ', but history tables"),
    ("movies_including_deleted", {"type": "mor"}, "hudi_options sets type = 'mor', but history tables and tables "
                                                  "with cdc_deletes='soft' are copy-on-write"),
    ("actor", {"preCombineField": "last_update"}, "hudi_options sets preCombineField, which cdc_incremental derives"),
    ("actor", {"primaryKey": "first_name"}, "hudi_options sets primaryKey, which cdc_incremental derives itself"),
    ("actor", {"hoodie.payload.delete.marker": "x"},
     "hudi_options sets hoodie.payload.delete.marker, which cdc_incremental sets"),
])
def test_options_silver_correctness_rests_on_are_refused(spark, tmp_path: Path, model, options, expected):
    before = {t.name for t in spark.catalog.listTables("silver")} if spark.catalog.databaseExists("silver") else set()
    project = project_with_model_options(tmp_path, model, options)
    result = dbt_invoke("run", "--select", model, "--target-path", str(project / "target"), project=project)
    assert not result.success
    messages = " ".join(str(r.message) for r in result.result.results)
    assert expected in messages and "Remove " in messages, messages
    after = {t.name for t in spark.catalog.listTables("silver")} if spark.catalog.databaseExists("silver") else set()
    assert after == before  # stopped before writing anything


ACTOR_EVENTS = ROOT / "tests" / "fixtures" / "debezium" / "pagila-envelope" / "pagila.public.actor.jsonl"


@pytest.mark.usefixtures("empty_project_schemas")
@pytest.mark.parametrize(("model_sql", "expected"), [
    ("select * from {{ source('bronze', 'pagila_public_actor') }}",
     "its SQL must call cdc_current_state(source(...))"),
    ("with current_state as ({{ cdc_current_state(source('bronze', 'pagila_public_actor')) }})\n"
     "select * from current_state where actor_id < 0",
     "but not filter, join or aggregate its rows"),
])
def test_a_model_that_breaks_the_contract_is_told_how_to_write_it(spark, tmp_path: Path, model_sql, expected):
    """A silver model that does not select cdc_current_state, or filters its rows (which
    would drop the deletes and resets a build applies), stops with how to write it."""
    topics = tmp_path / "topics"
    write_recorded_json(ACTOR_EVENTS, topics, records_per_file=100)
    ingest(spark, IngestConfig(input_uri=str(topics)))
    project = project_copy(tmp_path)
    (project / "models" / "silver" / "actor.sql").write_text(model_sql + "\n")
    result = dbt_invoke("run", "--select", "actor", "--target-path", str(project / "target"), project=project)
    assert not result.success
    messages = " ".join(str(r.message) for r in result.result.results)
    assert expected in messages, messages
    assert not spark.catalog.tableExists("silver.actor")


@pytest.mark.usefixtures("empty_project_schemas")
def test_one_model_builds_with_its_tests_before_any_seed(spark, tmp_path: Path):
    """`dbt build --select actor` on a lakehouse where `dbt seed` never ran: actor's
    `_cdc_op` test must not read a seed table the selection does not build."""
    topics = tmp_path / "topics"
    write_recorded_json(ACTOR_EVENTS, topics, records_per_file=1)
    ingest(spark, IngestConfig(input_uri=str(topics)))
    assert not spark.catalog.databaseExists("seeds")

    result = dbt_invoke("build", "--select", "actor")
    statuses = {r.node.name: str(r.status) for r in result.result.results}
    assert result.success, statuses
    op_tests = [name for name in statuses if "_cdc_op" in name]
    assert op_tests and all(statuses[name] == "pass" for name in op_tests), statuses
    assert spark.table("silver.actor").count() > 0
    # the model's SQL run on its own (`dbt show`) is what the table holds, row by row
    shown = dbt_invoke("show", "--select", "actor", "--limit", "-1").result.results[0].agate_table
    columns = ["actor_id", "first_name", "last_name", "_cdc_op", "_cdc_order", "_cdc_commit_time"]
    as_shown = sorted(tuple(str(row[c]) for c in columns) for row in shown.rows)
    stored = sorted(tuple(str(row[c]) for c in columns) for row in spark.table("silver.actor").collect())
    assert as_shown == stored and len(stored) > 0
    # ... and both are the current state of the recorded Debezium events, computed apart
    names = ["actor_id", "first_name", "last_name"]
    expected = sorted(tuple(str(row[c]) for c in names)
                      for row in oracle.expected_current_state(oracle.files_in([topics], "actor"), "actor"))
    assert sorted(row[:3] for row in as_shown) == expected


def test_dbt_unit_tests_of_silver_stages_and_gold_joins_pass(spark):
    """The `unit_tests:` of the silver stages and the gold joins
    (models/*/_*__unit_tests.yml) run in dbt itself against hand-written expectations:
    every one declared in the YAML runs, and each must pass."""
    declared = {test["name"] for path in (ROOT / "models").glob("*/_*__unit_tests.yml")
                for test in yaml.safe_load(path.read_text())["unit_tests"]}
    assert {"actor_keeps_the_latest_event_per_key_by_log_position",
            "revenue_counts_a_payment_once_per_category_of_its_film"} <= declared, declared
    result = dbt_invoke("test", "--select", "test_type:unit")
    statuses = {r.node.name: str(r.status) for r in result.result.results if r.node.resource_type == "unit_test"}
    assert set(statuses) == declared, statuses
    assert result.success and set(statuses.values()) == {"pass"}, statuses
