"""A runner pass builds what changed (runner/selection.py), in-process on the test's
Spark session, on a project of four silver models and one gold model over three of them.

Pass by pass, each expectation comes from the inputs, not from the runner:
1. no state yet, country's topic not landed: every model is built but silver.country
   and the gold model over it, which the log names with the topic to land; exit 0;
2. new actor events: the build runs silver.actor and its tests only (the models
   downstream of bronze.pagila_public_actor, read from the SQL's refs), gold is left out;
3. country's topic lands: the build runs silver.country and gold; silver and gold equal
   the oracle;
4. nothing new: dbt is not run at all;
5. another writer lands actor events (a crash after landing looks the same) while the
   project's YAML mistypes an actor column: the pass fails, and the state keeps actor
   as not taken in;
6. the YAML fixed, nothing new: the pass builds actor again and silver.actor equals the
   oracle over every actor event; a seventh pass has nothing to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion import cli as ingestion_cli
from ingestion.pipeline import IngestConfig, run as ingest
from runner.cli import EXIT_FAILURE, EXIT_OK, one_pass
from runner.report import PassReport
from runner.selection import load_state
from tests.integration.test_dbt_state_and_retry import (assert_address_locations, assert_current_state, descendants,
                                                        with_column_type)
from tests.support.lakehouse import pruned_project
from tests.support.paths import ROOT
from testdata.sink_formats import write_recorded_json

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("empty_project_schemas")]

FIXTURES = ROOT / "tests" / "fixtures" / "debezium" / "pagila-envelope"
MODELS = {"actor", "address", "city", "country", "address_locations"}
ACTOR_TABLE = "pagila_public_actor"


def write_records(tmp_path: Path, topics: Path, table: str, offsets: range) -> None:
    """The recorded events of `table` at `offsets` as sink files under `topics`."""
    fixture = FIXTURES / f"pagila.public.{table}.jsonl"
    part = tmp_path / "parts" / f"{table}-{offsets.start}" / fixture.name
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_text("".join(line + "\n" for line in fixture.read_text().splitlines()
                            if json.loads(line)["offset"] in offsets))
    write_recorded_json(part, topics, records_per_file=len(offsets))


def model_statuses(report: PassReport) -> dict[str, str]:
    return {node["name"]: node["status"] for node in report.dbt["nodes"] if node["resource_type"] == "model"}


def test_a_pass_builds_what_changed_and_retries_what_failed(spark, tmp_path: Path, capfd, caplog) -> None:
    project = pruned_project(tmp_path, MODELS)
    topics = tmp_path / "topics"
    for table in ("address", "city"):
        write_recorded_json(FIXTURES / f"pagila.public.{table}.jsonl", topics, records_per_file=50)
    write_records(tmp_path, topics, "actor", range(0, 3))
    ingest_args = ingestion_cli.build_parser().parse_args(["--input", str(topics)])
    dbt_args = ["--project-dir", str(project), "--target-path", str(project / "target")]
    state_dir = tmp_path / "runner-state"

    def run_pass() -> tuple[int, PassReport]:
        report = PassReport()
        return one_pass(ingest_args, dbt_args, "local", report=report, state_dir=state_dir), report

    capfd.readouterr()
    code, first = run_pass()
    assert code == EXIT_OK, first.dbt
    assert first.selection["first_build"] and first.selection["select"] == []
    left_out = {"country", "address_locations"}
    assert model_statuses(first) == {name: "success" for name in MODELS - left_out}
    # one line for the one bronze table missing that a model reads
    assert [r.getMessage() for r in caplog.records if "does not exist yet" in r.getMessage()] == [
        "bronze.pagila_public_country does not exist yet (land topic pagila.public.country): left out of "
        "this build: gold.address_locations, silver.country"]
    assert not [r.getMessage() for r in caplog.records if "builds again" in r.getMessage()]
    assert first.missing_bronze == [{"table": "pagila_public_country", "topic": "pagila.public.country",
                                     "models_left_out": ["gold.address_locations", "silver.country"]}]
    for table in ("actor", "address", "city"):
        assert_current_state(spark, [topics], table)
    assert not spark.catalog.tableExists("silver.country")
    assert set(load_state(state_dir).bronze) == {ACTOR_TABLE, "pagila_public_address", "pagila_public_city"}

    write_records(tmp_path, topics, "actor", range(3, 6))
    capfd.readouterr()
    code, second = run_pass()
    assert code == EXIT_OK, second.dbt
    # the log says what ran, without dbt's warning for each selector that matched nothing
    log = capfd.readouterr().out
    assert "silver.actor" in log and "does not match any enabled nodes" not in log, log[-3000:]
    assert second.selection["changed_bronze_tables"] == [ACTOR_TABLE]
    expected = descendants(project, "actor")
    assert expected == {"actor"}
    assert model_statuses(second) == {name: "success" for name in expected}
    tests_run = {node["name"] for node in second.dbt["nodes"] if node["resource_type"] == "test"}
    assert tests_run and all("actor" in name for name in tests_run), tests_run
    assert_current_state(spark, [topics], "actor")

    write_recorded_json(FIXTURES / "pagila.public.country.jsonl", topics, records_per_file=50)
    code, third = run_pass()
    assert code == EXIT_OK, third.dbt
    assert third.selection["changed_bronze_tables"] == ["pagila_public_country"] and third.missing_bronze == []
    assert model_statuses(third) == {name: "success" for name in left_out}
    assert_current_state(spark, [topics], "country")
    assert_address_locations(spark, [topics])

    code, fourth = run_pass()
    assert code == EXIT_OK and fourth.dbt["ran"] is False, fourth.dbt
    assert fourth.selection["changed_bronze_tables"] == []

    # another writer lands actor events; the project's YAML is mistyped meanwhile
    write_records(tmp_path, topics, "actor", range(6, 8))
    ingest(spark, IngestConfig(input_uri=str(topics)))
    models_yml = project / "models" / "silver" / "_silver__models.yml"
    good = models_yml.read_text()
    models_yml.write_text(with_column_type(good, "actor", "first_name", "strnig"))
    taken_in = load_state(state_dir).bronze[ACTOR_TABLE]
    code, fifth = run_pass()
    assert code == EXIT_FAILURE
    assert fifth.selection["changed_bronze_tables"] == [ACTOR_TABLE]
    assert model_statuses(fifth) == {"actor": "error"}
    assert load_state(state_dir).bronze[ACTOR_TABLE] == taken_in

    models_yml.write_text(good)
    code, sixth = run_pass()
    assert code == EXIT_OK, sixth.dbt
    assert sixth.selection["changed_bronze_tables"] == [ACTOR_TABLE]
    assert model_statuses(sixth) == {"actor": "success"}
    assert_current_state(spark, [topics], "actor")
    assert load_state(state_dir).bronze[ACTOR_TABLE] != taken_in

    code, seventh = run_pass()
    assert code == EXIT_OK and seventh.dbt["ran"] is False, seventh.dbt
