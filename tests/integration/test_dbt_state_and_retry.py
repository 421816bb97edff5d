"""dbt's own CI and recovery tools on this project's custom materializations.

`state:modified+` (slim CI): the manifest of an unchanged project selects nothing, so
no materialization adds a config that differs from one parse to the next; a changed
silver model selects itself and the gold models built on it, and `dbt build` of that
selection updates them. `dbt retry`: a build that failed (a column's type mistyped in the
models YAML) reruns the failed model and the ones it skipped once the model is fixed, and
gives the same table the oracle computes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ingestion.pipeline import IngestConfig, run as ingest
from tests.support import oracle
from tests.support.lakehouse import dbt_invoke, project_copy, silver_rows
from tests.support.paths import ROOT
from testdata.sink_formats import write_recorded_json

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("empty_project_schemas")]

FIXTURES = ROOT / "tests" / "fixtures" / "debezium" / "pagila-envelope"
REF = re.compile(r"ref\(\s*'([a-z0-9_]+)'\s*\)")


def land(spark, tmp_path: Path, *tables: str) -> list[Path]:
    """The recorded Debezium events of `tables` as sink files, landed in bronze."""
    topics = tmp_path / "topics"
    for table in tables:
        write_recorded_json(FIXTURES / f"pagila.public.{table}.jsonl", topics, records_per_file=50)
    ingest(spark, IngestConfig(input_uri=str(topics)))
    return [topics]


def descendants(project: Path, model: str) -> set[str]:
    """`model` and every model that refs it, directly or not, read from the SQL files."""
    parents = {path.stem: set(REF.findall(path.read_text())) for path in (project / "models").rglob("*.sql")}
    found = {model}
    while True:
        more = {child for child, refs in parents.items() if refs & found} - found
        if not more:
            return found
        found |= more


def model_names(listed: list[str]) -> set[str]:
    """Model names from `dbt ls --resource-type model` output (`<project>.<path>.<name>`)."""
    return {line.rsplit(".", 1)[-1] for line in listed}


def with_column_type(models_yml: str, model: str, column: str, data_type: str) -> str:
    """The models YAML text with `model`.`column` declared as `data_type`."""
    spec = yaml.safe_load(models_yml)
    node = next(node for node in spec["models"] if node["name"] == model)
    next(c for c in node["columns"] if c["name"] == column)["data_type"] = data_type
    return yaml.safe_dump(spec, sort_keys=False)


def assert_current_state(spark, batch_dirs: list[Path], table: str) -> None:
    spec = oracle.TABLES[table]
    expected = oracle.expected_current_state(oracle.files_in(batch_dirs, table), table)
    assert expected
    assert silver_rows(spark, table, spec["columns"], spec["primary_key"]) == expected


def assert_address_locations(spark, batch_dirs: list[Path]) -> None:
    """gold.address_locations is silver's addresses joined to their city and country,
    the join computed here from the oracle's current states."""
    def state(table: str) -> list[dict]:
        return oracle.expected_current_state(oracle.files_in(batch_dirs, table), table)

    cities = {row["city_id"]: row for row in state("city")}
    countries = {row["country_id"]: row["country"] for row in state("country")}
    expected = []
    for address in state("address"):
        city = cities.get(address["city_id"])
        expected.append((address["address_id"], city and city["city"], city and countries.get(city["country_id"])))
    got = [tuple(row) for row in spark.sql(
        "select address_id, city, country from gold.address_locations order by address_id").collect()]
    assert expected and got == sorted(expected)


def test_state_modified_selects_a_changed_silver_model_and_its_gold_children(spark, tmp_path: Path):
    batches = land(spark, tmp_path, "address", "city", "country")
    result = dbt_invoke("build", "--select", "address", "city", "country", "address_locations")
    assert result.success, result.result
    state = tmp_path / "state"  # as a CI job keeps the production run's manifest
    assert dbt_invoke("parse", "--target-path", str(state)).success

    unchanged = dbt_invoke("ls", "--select", "state:modified", "--state", str(state), "--resource-type", "model")
    assert unchanged.success and unchanged.result == [], unchanged.result

    project = project_copy(tmp_path)
    city = project / "models" / "silver" / "city.sql"
    city.write_text("-- a reviewer's change\n" + city.read_text())
    target = ["--target-path", str(project / "target"), "--state", str(state)]
    listed = dbt_invoke("ls", "--select", "state:modified+", "--resource-type", "model", *target, project=project)
    expected = descendants(project, "city")
    assert expected == {"city", "address_locations"}
    assert listed.success and model_names(listed.result) == expected, listed.result

    built = dbt_invoke("build", "--select", "state:modified+", *target, project=project)
    assert built.success, built.result
    statuses = {r.node.name: str(r.status) for r in built.result.results if r.node.resource_type == "model"}
    assert statuses == {name: "success" for name in expected}, statuses
    assert_current_state(spark, batches, "city")
    assert_address_locations(spark, batches)


def test_retry_reruns_a_failed_silver_build_and_what_it_skipped(spark, tmp_path: Path):
    batches = land(spark, tmp_path, "address", "city", "country")
    assert dbt_invoke("build", "--select", "address", "city").success
    project = project_copy(tmp_path)
    models_yml = project / "models" / "silver" / "_silver__models.yml"
    good = models_yml.read_text()
    models_yml.write_text(with_column_type(good, "country", "country", "strnig"))  # a typo in review
    target = ["--target-path", str(project / "target")]
    failed = dbt_invoke("build", "--select", "country+", *target, project=project)
    assert not failed.success
    statuses = {r.node.name: str(r.status) for r in failed.result.results if r.node.resource_type == "model"}
    assert statuses == {"country": "error", "address_locations": "skipped"}, statuses

    models_yml.write_text(good)  # the fix
    retried = dbt_invoke("retry", *target, project=project)
    assert retried.success, retried.result
    statuses = {r.node.name: str(r.status) for r in retried.result.results if r.node.resource_type == "model"}
    assert statuses == {"country": "success", "address_locations": "success"}, statuses
    assert_current_state(spark, batches, "country")
    assert_address_locations(spark, batches)


def test_source_status_fresher_builds_what_landed_since_the_last_build(spark, tmp_path: Path):
    """The by-hand form of the runner's build of what changed (docs/how-to/run-it-yourself.md):
    `dbt source freshness`, then `dbt build --select source_status:fresher+ ... --state`
    against the artifacts kept after the last build, which are then replaced."""
    project = project_copy(tmp_path)
    target = project / "target"
    last = tmp_path / "last"
    batches = land(spark, tmp_path, "address", "city", "country")
    scope = ["--select", "address", "city", "country", "address_locations", "--target-path", str(target)]
    # the sources this test lands (a source without its bronze table is a freshness error)
    landed = ["--select", *(f"source:bronze.pagila_public_{t}" for t in ("address", "city", "country")),
              "--target-path", str(target)]
    assert dbt_invoke("source", "freshness", *landed, project=project).success
    assert dbt_invoke("build", *scope, project=project).success

    def keep_artifacts() -> None:
        last.mkdir(exist_ok=True)
        for name in ("manifest.json", "run_results.json", "sources.json"):
            (last / name).write_bytes((target / name).read_bytes())

    keep_artifacts()
    more = tmp_path / "more"
    city_files = write_recorded_json(FIXTURES / "pagila.public.city.jsonl", more / "topics", records_per_file=50)
    for path in city_files:  # the same records at later offsets: city gets new commits
        path.rename(path.with_name(path.name.replace("+0+", "+0+100")))
    ingest(spark, IngestConfig(input_uri=str(more / "topics")))

    assert dbt_invoke("source", "freshness", *landed, project=project).success
    changed = ["--select", "source_status:fresher+", "state:modified+", "result:error+", "result:fail+",
               "result:skipped+", "--state", str(last), "--target-path", str(target)]
    built = dbt_invoke("build", *changed, project=project)
    assert built.success, built.result
    statuses = {r.node.name: str(r.status) for r in built.result.results if r.node.resource_type == "model"}
    assert statuses == {name: "success" for name in descendants(project, "city")}, statuses
    assert_current_state(spark, batches + [more / "topics"], "city")
    assert_address_locations(spark, batches + [more / "topics"])
