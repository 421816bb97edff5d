"""`python -m onboarding` end to end: in a copy of the project without the hand-written
actor, film_actor, payment and movies (model files, YAML entries, source entries), the
command scaffolds them from S3-sink files of the recorded Debezium output (with their
record keys files), `dbt build` builds them from the landed bronze, and each table equals
what the oracle computes from the same files, row by row, with the column types the
hand-written YAML declares.

movies' records carry no schema (JsonConverter with schemas off): its columns come from
the landed bronze rows. film_actor is not in the recordings (the workload cannot touch
it, tests/fixtures/debezium/README.md): its few events are written here in the
connector's shape, for a table keyed by two columns."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from ingestion.pipeline import IngestConfig, run as ingest
from onboarding import cli, schemas
from tests.support import oracle
from tests.support.lakehouse import dbt_invoke, project_copy, silver_rows
from tests.support.paths import ROOT
from testdata.sink_formats import recorded_values, write_avro, write_parquet, write_recorded_json
from tests.unit.test_onboarding import assert_matches_hand_written, hand_written_keys

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("empty_project_schemas")]

DEBEZIUM = ROOT / "tests" / "fixtures" / "debezium"
MODELS = ("actor", "film_actor", "payment", "movies")
PATTERN = r"pagila\.public\.(actor|film_actor|payment)|mariadb\.movies_db\.movies"


def film_actor_records() -> list[dict]:
    """film_actor's events as the pagila-envelope connector sends them (its schema,
    source block and key shape taken from a recorded actor event): three inserts, an
    update, a delete (REPLICA IDENTITY DEFAULT: the key, zeros elsewhere) and its tombstone."""
    actor = json.loads((DEBEZIUM / "pagila-envelope" / "pagila.public.actor.jsonl").read_text().splitlines()[0])
    value = json.loads(actor["value"])
    row = {"type": "struct", "optional": True, "name": "pagila.public.film_actor.Value", "fields": [
        {"type": "int16", "optional": False, "field": "actor_id"},
        {"type": "int16", "optional": False, "field": "film_id"},
        {"type": "int64", "optional": False, "name": "io.debezium.time.MicroTimestamp", "version": 1, "default": 0,
         "field": "last_update"}]}
    schema = copy.deepcopy(value["schema"])
    schema["name"] = "pagila.public.film_actor.Envelope"
    schema["fields"] = [{**row, "field": f["field"]} if f["field"] in ("before", "after") else f
                        for f in schema["fields"]]
    key_schema = {"type": "struct", "optional": False, "name": "pagila.public.film_actor.Key",
                  "fields": row["fields"][:2]}
    events = [("c", 1, 1, 1714557600000001), ("c", 1, 2, 1714557600000002), ("c", 2, 1, 1714557600000003),
              ("u", 1, 2, 1714557700000000), ("d", 2, 1, 0)]
    records = []
    for i, (op, actor_id, film_id, last_update) in enumerate(events):
        image = {"actor_id": actor_id, "film_id": film_id, "last_update": last_update}
        source = {**value["payload"]["source"], "table": "film_actor", "lsn": 40000000 + 100 * i,
                  "ts_ms": 1795325830000 + i}
        payload = {**value["payload"], "op": op, "source": source, "before": image if op == "d" else None,
                   "after": None if op == "d" else image}
        key = json.dumps({"schema": key_schema, "payload": {"actor_id": actor_id, "film_id": film_id}})
        records.append({"topic": "pagila.public.film_actor", "partition": 0, "offset": i, "key": key,
                        "value": json.dumps({"schema": schema, "payload": payload})})
    records.append({**records[-1], "offset": len(events), "value": None})
    return records


def write_with_keys(fixture: Path, topics: Path) -> list[Path]:
    """The fixture's records as sink JSON files, each with its record keys file (the S3
    sink's store.kafka.keys=true: one key a line, in the values file's order)."""
    written = write_recorded_json(fixture, topics, records_per_file=50)
    keys = {(r["partition"], r["offset"]): r["key"] for r in map(json.loads, fixture.read_text().splitlines())}
    for path in written:
        _, partition, first = path.name[: -len(".json")].rsplit("+", 2)
        count = len(path.read_text().splitlines())
        lines = [keys[(int(partition), int(first) + i)] or "null" for i in range(count)]
        path.with_name(path.name[: -len(".json")] + ".keys.json").write_text("".join(f"{k}\n" for k in lines))
    return written


def without_models(project: Path) -> None:
    """The project copy without the hand-written MODELS: their SQL files, model YAML
    entries and bronze source entries."""
    silver = project / "models" / "silver"
    for model in MODELS:
        (silver / f"{model}.sql").unlink()
    models_yml, sources_yml = silver / "_silver__models.yml", silver / "_silver__sources.yml"
    spec = yaml.safe_load(models_yml.read_text())
    spec["models"] = [m for m in spec["models"] if m["name"] not in MODELS]
    models_yml.write_text(yaml.safe_dump(spec, sort_keys=False, width=1000))
    spec = yaml.safe_load(sources_yml.read_text())
    bronze = next(s for s in spec["sources"] if s["name"] == "bronze")
    topics = {oracle.TABLES[m]["topic"] for m in MODELS}
    bronze["tables"] = [t for t in bronze["tables"] if t["meta"]["topic"] not in topics]
    sources_yml.write_text(yaml.safe_dump(spec, sort_keys=False, width=1000))


def declared_types(model: str) -> dict[str, str]:
    """The hand-written model's columns and types, as silver stores them (smallint as int)."""
    spec = yaml.safe_load((ROOT / "models" / "silver" / "_silver__models.yml").read_text())
    columns = next(m for m in spec["models"] if m["name"] == model)["columns"]
    return {c["name"]: {"smallint": "int"}.get(c["data_type"], c["data_type"])
            for c in columns if not c["name"].startswith("_cdc_")}


def test_onboarded_models_build_the_tables_the_hand_written_ones_do(spark, tmp_path: Path, capsys):
    topics = tmp_path / "topics"
    fixture = tmp_path / "pagila.public.film_actor.jsonl"
    fixture.write_text("".join(json.dumps(r) + "\n" for r in film_actor_records()))
    files = {model: write_with_keys(path, topics) for model, path in {
        "actor": DEBEZIUM / "pagila-envelope" / "pagila.public.actor.jsonl",
        "payment": DEBEZIUM / "pagila-envelope" / "pagila.public.payment.jsonl",
        "movies": DEBEZIUM / "movies-envelope" / "mariadb.movies_db.movies.jsonl",
        "film_actor": fixture}.items()}
    summary = ingest(spark, IngestConfig(input_uri=str(topics)))
    assert not summary.quarantined, summary.render()

    project = project_copy(tmp_path)
    without_models(project)
    capsys.readouterr()
    assert cli.main(["--input", str(topics), "--topic-pattern", PATTERN, "--project-dir", str(project)],
                    spark=spark) == 0
    report = capsys.readouterr().out
    assert "4 topic(s), 0 failed, 0 with drift" in report, report
    assert re.findall(r"^  not inferred: (\w+)", report, re.M) == ["title", "country"], report
    assert "columns from the landed bronze rows" in report

    built = dbt_invoke("build", "--select", *MODELS, "--exclude", "test_type:unit", "--indirect-selection", "cautious",
                       "--target-path", str(project / "target"), project=project)
    assert built.success, built.result
    statuses = {(r.node.resource_type, r.node.name): str(r.status) for r in built.result.results}
    assert sorted(name for kind, name in statuses if kind == "model") == sorted(MODELS)
    assert set(statuses.values()) <= {"success", "pass"}, statuses
    for model in MODELS:
        spec = oracle.TABLES[model]
        expected = oracle.expected_current_state(files[model], model)
        assert expected, model
        assert silver_rows(spark, model, list(spec["columns"]), spec["primary_key"]) == expected, model
        stored = {name: kind for name, kind in spark.table(f"silver.{model}").dtypes if not name.startswith("_cdc_")}
        assert stored == declared_types(model), model


def test_avro_and_parquet_sink_files_give_the_hand_written_types(spark, tmp_path: Path):
    """film's records in an Avro container file and staff's in a Parquet file, as the
    sink's AvroFormat and ParquetFormat write them, each with an Avro record keys file:
    the schemas in the file header and footer map to the hand-written types."""
    topics = tmp_path / "topics"
    for table, kind in (("film", "avro"), ("staff", "parquet")):
        fixture = DEBEZIUM / "pagila-envelope" / f"pagila.public.{table}.jsonl"
        values = [value for _, value in recorded_values(fixture) if value is not None]
        records = [json.loads(line) for line in fixture.read_text().splitlines()]
        keys = [json.loads(r["key"]) for r in records if r["value"] is not None]
        folder = topics / f"pagila.public.{table}" / "partition=0"
        write_avro(folder / f"pagila.public.{table}+0+0.avro", values)
        write_avro(folder / f"pagila.public.{table}+0+0.keys.avro", keys)
        if kind == "parquet":
            avro_file = folder / f"pagila.public.{table}+0+0.avro"
            write_parquet(spark, avro_file, folder / f"pagila.public.{table}+0+0.snappy.parquet")
            avro_file.unlink()
    samples = schemas.read_sink(spark, str(topics), r"pagila\.public\..*")
    assert sorted(samples) == ["pagila.public.film", "pagila.public.staff"]
    for topic, sample in samples.items():
        found = schemas.topic_schema(sample, None)
        assert_matches_hand_written(topic.rsplit(".", 1)[-1], found.columns)
        assert (found.key, found.problems) == (hand_written_keys()[topic], [])
