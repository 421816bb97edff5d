"""`python -m onboarding` without Spark: the type mapping on recorded real Debezium output
(JsonConverter schemas and the registry's Avro schemas) against the hand-written models'
YAML, the rendered entries, never overwriting, the drift report, the registry path over
a local HTTP server, and the exit codes.

Expected types are the hand-written `_silver__models.yml`'s; the columns whose declared
type cannot come from the upstream schema are listed in NOT_FROM_THE_SCHEMA, each with
why, and checked to map to what the schema does say."""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from onboarding import cli, drift, scaffold, schemas
from onboarding.errors import OnboardingError, UnsafeNameError
from onboarding.types import Column, columns_of, connect_from_avro, infer_columns, key_fields, merged
from tests.support.lakehouse import project_copy
from tests.support.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
PAGILA_JSON = sorted((FIXTURES / "debezium" / "pagila-envelope").glob("*.jsonl"))
AVRO = sorted((FIXTURES / "debezium-avro").glob("*/*.jsonl"))
AVRO_SCHEMAS = json.loads((FIXTURES / "debezium-avro" / "schemas.json").read_text())
MOVIES_JSON = FIXTURES / "debezium" / "movies-envelope" / "mariadb.movies_db.movies.jsonl"
MODELS_YML = ROOT / "models" / "silver" / "_silver__models.yml"
SOURCES_YML = ROOT / "models" / "silver" / "_silver__sources.yml"

# (model, column) -> why its hand-written declaration is not what the schema maps to, and
# what the schema maps it to instead (None: the schema has no such field).
NOT_FROM_THE_SCHEMA = {
    ("film", "revenue_projection"): (None, "a generated column: logical replication does not publish it; the "
                                           "model derives it (meta.cdc_derived)"),
    ("customer", "active"): (None, "a generated column, derived by the model like revenue_projection"),
    ("rental", "rental_period"): ("string", "a tsrange arrives as a plain string without a semantic name; the "
                                            "range struct is declared by hand"),
    ("rental", "return_window"): ("string", "a tstzrange, the same as rental_period"),
}


def hand_written() -> dict[str, dict]:
    return {m["name"]: m for m in yaml.safe_load(MODELS_YML.read_text())["models"]}


def hand_written_keys() -> dict[str, list[str]]:
    tables = next(s for s in yaml.safe_load(SOURCES_YML.read_text())["sources"] if s["name"] == "bronze")["tables"]
    return {t["meta"]["topic"]: t["meta"]["primary_key"] for t in tables}


def declared(model: str) -> list[tuple[str, str, str | None]]:
    """(column, data_type, debezium_encoding) of a hand-written model, silver's own columns left out."""
    return [(c["name"], c["data_type"], (c.get("meta") or {}).get("debezium_encoding"))
            for c in hand_written()[model]["columns"] if not c["name"].startswith("_cdc_")]


def json_sample(path: Path, limit: int | None = None) -> schemas.TopicSample:
    """A recorded JsonConverter fixture's records (keys and values as Kafka held them) as read."""
    sample = schemas.TopicSample(path.stem, f"fixture {path.name}")
    for line in path.read_text().splitlines()[:limit]:
        record = json.loads(line)
        schemas.add_value(sample, schemas.parse_json(record["value"]))
        schemas.add_key(sample, schemas.parse_json(record["key"]))
    return sample


def avro_ids(path: Path, side: str) -> list[int]:
    """The registry schema ids a recorded Avro fixture's keys or values name, in order of first use."""
    ids: list[int] = []
    for line in path.read_text().splitlines():
        data = json.loads(line)[side]
        if data is not None and (schema_id := int.from_bytes(base64.b64decode(data)[1:5], "big")) not in ids:
            ids.append(schema_id)
    return ids


def assert_matches_hand_written(model: str, columns: list[Column]) -> None:
    got = {c.name: (c.data_type, c.encoding) for c in columns}
    expected_order = []
    for name, data_type, encoding in declared(model):
        if (model, name) in NOT_FROM_THE_SCHEMA:
            mapped = NOT_FROM_THE_SCHEMA[(model, name)][0]
            assert (got[name][0] if name in got else None) == mapped, (model, name, got.get(name))
            if mapped is None:
                continue
        else:
            assert got.get(name) == (data_type, encoding), (model, name)
        expected_order.append(name)
    assert [c.name for c in columns] == expected_order
    assert all(c.inferred for c in columns), [c for c in columns if not c.inferred]


@pytest.mark.parametrize("fixture", PAGILA_JSON, ids=lambda p: p.stem)
def test_json_converter_schemas_map_to_the_hand_written_types(fixture: Path):
    sample = json_sample(fixture)
    found = schemas.topic_schema(sample, None)
    model = fixture.stem.rsplit(".", 1)[-1]
    assert_matches_hand_written(model, found.columns)
    assert found.key == hand_written_keys()[fixture.stem]
    assert found.problems == []


@pytest.mark.parametrize("fixture", AVRO, ids=lambda p: p.stem)
def test_registry_avro_schemas_map_to_the_hand_written_types(fixture: Path):
    value_ids, key_ids = avro_ids(fixture, "value"), avro_ids(fixture, "key")
    columns = merged([columns_of(connect_from_avro(json.loads(AVRO_SCHEMAS[str(i)]))) for i in value_ids])
    model = fixture.stem.rsplit(".", 1)[-1]
    assert_matches_hand_written(model, columns)
    topic = fixture.stem.replace("_avro.", ".", 1)
    assert key_fields(connect_from_avro(json.loads(AVRO_SCHEMAS[str(key_ids[-1])]))) == hand_written_keys()[topic]


def test_columns_added_later_come_from_the_newer_schemas():
    """rental's first records predate the workload's ALTER TABLE: their schema alone lacks
    checked_at and return_window, which the newer records' schema adds."""
    rental = FIXTURES / "debezium" / "pagila-envelope" / "pagila.public.rental.jsonl"
    first = schemas.topic_schema(json_sample(rental, limit=1), None)
    every = schemas.topic_schema(json_sample(rental), None)
    assert {"checked_at", "return_window"} - {c.name for c in first.columns} == {"checked_at", "return_window"}
    assert [c.name for c in every.columns][-2:] == ["checked_at", "return_window"]
    checked_at = next(c for c in every.columns if c.name == "checked_at")
    assert (checked_at.data_type, checked_at.upstream) == ("timestamp", "string io.debezium.time.ZonedTimestamp")


def test_records_without_a_schema_name_what_is_not_inferred():
    """movies-envelope is JsonConverter with schemas off: integers are inferred from the
    values (as the hand-written YAML declares them), text is declared string and named."""
    found = schemas.topic_schema(json_sample(MOVIES_JSON), None)
    assert [(c.name, c.data_type) for c in found.columns] == [(n, t) for n, t, _ in declared("movies")]
    assert [c.name for c in found.columns if not c.inferred] == ["title", "country"]
    assert found.key == ["movie_id"]
    assert "no schema" in found.origin


def test_bronze_text_values_and_wide_integers_are_not_inferred():
    text_only = infer_columns([{"movie_id": "1", "title": "x"}], values_are_text=True)
    assert [(c.name, c.data_type, c.inferred) for c in text_only] == [
        ("movie_id", "string", False), ("title", "string", False)]
    mixed = infer_columns([{"a": 1, "b": 1714557600123456, "c": True, "d": 1.5, "e": None, "f": [1, None]},
                           {"a": -3, "b": 2, "c": False, "d": 2, "e": None, "f": [2**40]}])
    assert [(c.name, c.data_type, c.inferred) for c in mixed] == [
        ("a", "int", True), ("b", "bigint", False), ("c", "boolean", True), ("d", "double", True),
        ("e", "string", False), ("f", "array<bigint>", True)]


def test_semantic_types_without_a_silver_type_are_declared_string_and_marked():
    """Types of the Types table the fixtures do not hold, each as the table says."""
    def column(**connect):
        return columns_of({"type": "struct", "fields": [{"field": "x", "optional": True, **connect}]})[0]

    cases = [
        (dict(type="int64", name="io.debezium.time.Timestamp"), ("timestamp", "millis", True)),
        (dict(type="int64", name="io.debezium.time.NanoTimestamp"), ("timestamp", "nanos", True)),
        (dict(type="int64", name="org.apache.kafka.connect.data.Timestamp"), ("timestamp", "millis", True)),
        (dict(type="int32", name="org.apache.kafka.connect.data.Date"), ("date", None, True)),
        (dict(type="string", name="io.debezium.data.Json"), ("string", None, True)),
        (dict(type="string", name="io.debezium.data.Uuid"), ("string", None, True)),
        (dict(type="bytes"), ("binary", None, True)),
        (dict(type="int8"), ("int", None, True)),
        (dict(type="float64"), ("double", None, True)),
        (dict(type="array", items={"type": "int64", "optional": True}), ("array<bigint>", None, True)),
        (dict(type="bytes", name="org.apache.kafka.connect.data.Decimal", parameters={"scale": "3"}),
         ("decimal(38,3)", None, True)),
        (dict(type="bytes", name="org.apache.kafka.connect.data.Decimal",
              parameters={"scale": "2", "connect.decimal.precision": "40"}), ("string", None, False)),
        (dict(type="struct", name="io.debezium.data.VariableScaleDecimal",
              fields=[{"field": "scale", "type": "int32"}, {"field": "value", "type": "bytes"}]), ("string", None, False)),
        (dict(type="map", keys={"type": "string"}, values={"type": "string"}), ("string", None, False)),
        (dict(type="int64", name="io.debezium.time.MicroTime"), ("bigint", None, True)),
        (dict(type="array", items={"type": "float64"}), ("array<string>", None, False)),
        (dict(type="int64", name="com.example.Unknown"), ("bigint", None, False)),
    ]
    for connect, expected in cases:
        got = column(**connect)
        assert (got.data_type, got.encoding, got.inferred) == expected, connect


def test_a_schema_name_that_is_not_a_java_name_stays_out_of_descriptions():
    """dbt renders descriptions with Jinja: a name from the data must not reach them as is."""
    col = columns_of({"type": "struct", "fields": [
        {"field": "x", "type": "string", "name": "{{ run_query('drop table silver.actor') }}"}]})[0]
    assert "{{" not in scaffold.describe(col, []) and col.data_type == "string"


def test_the_model_file_is_actor_sql_with_its_source():
    for model in ("actor", "film_actor", "payment", "movies"):
        text = (ROOT / "models" / "silver" / f"{model}.sql").read_text()
        source = re.search(r"source\('bronze', '(\w+)'\)", text).group(1)
        table = scaffold.TablePlan("t", source, model, ["k"], [])
        assert scaffold.model_sql(table) == text


def test_unsafe_names_are_refused():
    column = Column("id", "int", "int32")
    with pytest.raises(UnsafeNameError, match="model name"):
        scaffold.plan("pagila.public.Film-Actor", ["id"], [column])
    with pytest.raises(UnsafeNameError, match="not a plain column name"):
        scaffold.plan("pagila.public.x", ["id"], [column, Column("bad name", "string", "string")])
    with pytest.raises(UnsafeNameError, match="not a plain column name"):
        scaffold.plan("pagila.public.x", ["id"], [column, Column("_cdc_op", "string", "string")])
    with pytest.raises(OnboardingError, match="no primary key"):
        scaffold.plan("pagila.public.x", [], [column])


def test_a_composite_key_gets_the_projects_uniqueness_test():
    """As film_actor is declared: not_null on each key column, unique_combination on the model."""
    entry = scaffold.model_entry(scaffold.plan("pagila.public.film_actor", ["actor_id", "film_id"], [
        Column("actor_id", "int", "int16", False), Column("film_id", "int", "int16", False),
        Column("last_update", "timestamp", "int64 io.debezium.time.MicroTimestamp", False)]))
    rendered = yaml.safe_load("".join(f"{ln}\n" for ln in scaffold.item_lines(entry, 0)))[0]
    written = hand_written()["film_actor"]
    assert rendered["data_tests"] == written["data_tests"]
    for got, expected in zip(rendered["columns"], written["columns"]):
        assert (got["name"], got.get("data_type"), got.get("data_tests")) == (
            expected["name"], expected.get("data_type"), expected.get("data_tests"))
    assert len(rendered["columns"]) == len(written["columns"])


# --- on a copy of the project -----------------------------------------------------------------

def cut_entry(text: str, indent: int, name: str) -> str:
    """`text` without the YAML list item `- name: <name>` whose dash is at column `indent`."""
    lines = text.splitlines(keepends=True)
    start = lines.index(f"{' ' * indent}- name: {name}\n")
    end = next((i for i in range(start + 1, len(lines)) if re.match(rf"^ {{0,{indent}}}\S", lines[i])), len(lines))
    return "".join(lines[:start] + lines[end:])


def pagila_samples(*tables: str) -> dict[str, schemas.TopicSample]:
    return {f"pagila.public.{t}": json_sample(FIXTURES / "debezium" / "pagila-envelope" / f"pagila.public.{t}.jsonl")
            for t in tables}


def snapshot(project: Path) -> dict[str, bytes]:
    return {str(p.relative_to(project)): p.read_bytes() for p in sorted((project / "models").rglob("*")) if p.is_file()}


def test_nothing_that_exists_is_overwritten_and_unchanged_models_show_no_drift(tmp_path):
    """Every Pagila table is declared already: onboarding keeps all of it byte for byte,
    and the hand-written models agree with their upstream schemas."""
    project = project_copy(tmp_path)
    (project / "models" / "silver" / "actor.sql").write_text("-- my own change\n" + (
        project / "models" / "silver" / "actor.sql").read_text())
    before = snapshot(project)
    tables = [p.stem.rsplit(".", 1)[-1] for p in PAGILA_JSON]
    outcomes = cli.onboard(pagila_samples(*tables), project, dry_run=False)
    assert snapshot(project) == before
    assert [o.topic for o in outcomes] == [f"pagila.public.{t}" for t in sorted(tables)]
    for outcome in outcomes:
        assert outcome.error is None and outcome.drift == [], (outcome.topic, outcome.drift)
        w = outcome.written
        assert (w.source, w.model_file, w.model_entry) == (
            f"kept: bronze source {w.plan.source_name} exists", f"kept: models/silver/{w.plan.model}.sql exists",
            f"kept: models/silver/_silver__models.yml declares {w.plan.model}")


def test_missing_parts_are_added_in_place_keeping_every_line(tmp_path):
    project = project_copy(tmp_path)
    silver = project / "models" / "silver"
    models_yml, sources_yml = silver / "_silver__models.yml", silver / "_silver__sources.yml"
    models_yml.write_text(cut_entry(models_yml.read_text(), 2, "payment"))
    sources_yml.write_text(cut_entry(sources_yml.read_text(), 6, "pagila_public_payment"))
    (silver / "payment.sql").unlink()
    old_models, old_sources = models_yml.read_text(), sources_yml.read_text()

    outcomes = cli.onboard(pagila_samples("payment", "staff"), project, dry_run=False)
    assert [(o.topic, o.error, o.written.source, o.written.model_file, o.written.model_entry) for o in outcomes] == [
        ("pagila.public.payment", None, "added", "added", "added"),
        ("pagila.public.staff", None, "kept: bronze source pagila_public_staff exists",
         "kept: models/silver/staff.sql exists", "kept: models/silver/_silver__models.yml declares staff")]
    # The old text is kept whole (comments, anchors, quoting); the entries follow its last item.
    assert models_yml.read_text().startswith(old_models) and sources_yml.read_text().startswith(old_sources)
    added = yaml.safe_load(models_yml.read_text())["models"][-1]
    assert added["name"] == "payment"
    assert [(c["name"], c.get("data_type")) for c in added["columns"]] == [
        (c["name"], c.get("data_type")) for c in hand_written()["payment"]["columns"]]
    assert added["data_tests"] == ["cdc_no_rejected_events"]
    assert added["columns"][0]["data_tests"] == ["not_null", "unique"]
    assert added["columns"][-4]["data_tests"] == hand_written()["payment"]["columns"][-4]["data_tests"]
    assert all(c["description"].strip() for c in added["columns"])
    source = next(s for s in yaml.safe_load(sources_yml.read_text())["sources"] if s["name"] == "bronze")["tables"][-1]
    assert source["name"] == "pagila_public_payment"
    assert source["meta"] == {"topic": "pagila.public.payment", "primary_key": ["payment_id"]}
    assert (silver / "payment.sql").read_text() == (ROOT / "models" / "silver" / "payment.sql").read_text()

    again = snapshot(project)  # a second run adds nothing: everything exists now
    second = cli.onboard(pagila_samples("payment"), project, dry_run=False)
    assert snapshot(project) == again and second[0].drift == []


def test_a_new_project_gets_new_files(tmp_path):
    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    outcomes = cli.onboard(pagila_samples("actor"), tmp_path, dry_run=False)
    assert outcomes[0].error is None
    silver = tmp_path / "models" / "silver"
    assert yaml.safe_load((silver / "_silver__sources.yml").read_text())["sources"][0]["tables"][0]["meta"] == {
        "topic": "pagila.public.actor", "primary_key": ["actor_id"]}
    assert yaml.safe_load((silver / "_silver__models.yml").read_text())["models"][0]["name"] == "actor"
    assert (silver / "actor.sql").exists()


def test_drift_is_reported_column_by_column(tmp_path):
    project = project_copy(tmp_path)
    models_yml = project / "models" / "silver" / "_silver__models.yml"
    spec = yaml.safe_load(models_yml.read_text())
    payment = next(m for m in spec["models"] if m["name"] == "payment")
    columns = {c["name"]: c for c in payment["columns"]}
    columns["amount"]["data_type"] = "decimal(6,2)"
    columns["payment_date"]["meta"] = {"debezium_encoding": "millis"}
    payment["columns"] = [c for c in payment["columns"] if c["name"] != "staff_id"] + [
        {"name": "note", "data_type": "string", "description": "x"}]
    models_yml.write_text(yaml.safe_dump(spec, sort_keys=False))
    before = snapshot(project)
    outcome = cli.onboard(pagila_samples("payment"), project, dry_run=False)[0]
    assert outcome.drift == [
        "column missing in YAML: staff_id (upstream maps to int)",
        "type differs: amount declared decimal(6,2), upstream maps to decimal(5,2) "
        "(bytes org.apache.kafka.connect.data.Decimal(5,2))",
        "encoding differs: payment_date declared meta.debezium_encoding millis, upstream sends micros "
        "(int64 io.debezium.time.MicroTimestamp)",
        "column missing upstream: note (declared string)",
    ]
    assert snapshot(project) == before
    assert "drift (4):" in cli.render([outcome], dry_run=False)


def test_drift_accepts_the_projects_own_declarations():
    """smallint for int16, a range struct for a plain string, derived columns: no drift."""
    upstream = [Column("a", "int", "int16"), Column("r", "string", "string"), Column("t", "string", "string")]
    entry = {"columns": [{"name": "a", "data_type": "smallint"}, {"name": "r", "data_type": declared("rental")[5][1]},
                         {"name": "t", "data_type": "String"}, {"name": "d", "data_type": "int",
                                                                "meta": {"cdc_derived": True}},
                         {"name": "_cdc_op"}]}
    assert drift.differences(entry, upstream) == []
    assert drift.differences({"columns": [{"name": "a", "data_type": "bigint"}]}, upstream[:1]) == [
        "type differs: a declared bigint, upstream maps to int (int16)"]


def test_dry_run_writes_nothing_and_prints_the_entries(tmp_path, capsys):
    project = project_copy(tmp_path)
    silver = project / "models" / "silver"
    (silver / "actor.sql").unlink()
    before = snapshot(project)
    outcomes = cli.onboard(pagila_samples("actor"), project, dry_run=True)
    assert snapshot(project) == before
    text = cli.render(outcomes, dry_run=True)
    assert "model models/silver/actor.sql: would add" in text
    assert "  | select * from final" in text


def test_a_topic_without_a_key_fails_alone(tmp_path):
    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    samples = pagila_samples("actor", "city")
    samples["pagila.public.city"].key = None
    outcomes = cli.onboard(samples, tmp_path, dry_run=False)
    assert [(o.topic, bool(o.error)) for o in outcomes] == [("pagila.public.actor", False), ("pagila.public.city", True)]
    assert "no primary key" in outcomes[1].error
    silver = tmp_path / "models" / "silver"
    assert not (silver / "city.sql").exists() and (silver / "actor.sql").exists()


# --- the registry, over HTTP ------------------------------------------------------------------

class Registry(BaseHTTPRequestHandler):
    """A Confluent-compatible registry holding the recorded Avro fixtures' latest schemas."""

    subjects: dict[str, str] = {}

    def do_GET(self):  # noqa: N802 - the http.server API
        if self.path == "/subjects":
            body = json.dumps(sorted(self.subjects))
        elif (m := re.fullmatch(r"/schemas/ids/(\d+)", self.path)) and m[1] in AVRO_SCHEMAS:
            body = json.dumps({"schema": AVRO_SCHEMAS[m[1]]})
        elif (m := re.fullmatch(r"/subjects/([^/]+)/versions/latest", self.path)) and unquote(m[1]) in self.subjects:
            body = json.dumps({"subject": unquote(m[1]), "version": 1, "schema": self.subjects[unquote(m[1])]})
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def registry_url():
    subjects = {}
    for fixture in AVRO:
        subjects[f"{fixture.stem}-value"] = AVRO_SCHEMAS[str(avro_ids(fixture, "value")[-1])]
        subjects[f"{fixture.stem}-key"] = AVRO_SCHEMAS[str(avro_ids(fixture, "key")[-1])]
    Registry.subjects = subjects
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_registry_path_scaffolds_typed_models(tmp_path, registry_url, capsys):
    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    pattern = r"pagila_avro\.public\.(payment|rental)"
    assert cli.main(["--schema-registry-url", registry_url, "--topic-pattern", pattern,
                     "--project-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 topic(s), 0 failed, 0 with drift" in out
    models = {m["name"]: m for m in yaml.safe_load((tmp_path / "models/silver/_silver__models.yml").read_text())["models"]}
    assert sorted(models) == ["payment", "rental"]
    for model in models:
        columns = [Column(c["name"], c["data_type"], "", encoding=(c.get("meta") or {}).get("debezium_encoding"))
                   for c in models[model]["columns"] if not c["name"].startswith("_cdc_")]
        assert_matches_hand_written(model, columns)
    sources = yaml.safe_load((tmp_path / "models/silver/_silver__sources.yml").read_text())["sources"][0]["tables"]
    assert [(t["name"], t["meta"]["primary_key"]) for t in sources] == [
        ("pagila_avro_public_payment", ["payment_id"]), ("pagila_avro_public_rental", ["rental_id"])]


def test_exit_codes(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("CDC_SCHEMA_REGISTRY_URL", raising=False)
    assert cli.main(["--topic-pattern", "x"]) == 2
    assert "give one of --input, --kafka-bootstrap-servers or --schema-registry-url" in caplog.text
    assert cli.main(["--schema-registry-url", "http://127.0.0.1:9", "--topic-pattern", "("]) == 2
    assert cli.main(["--schema-registry-url", "http://127.0.0.1:9", "--topic-pattern", "x",
                     "--project-dir", str(tmp_path)]) == 2
    assert "is not a dbt project" in caplog.text
    assert cli.main(["--schema-registry-url", "registry:8081", "--topic-pattern", "x"]) == 2
    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    caplog.clear()
    assert cli.main(["--schema-registry-url", "http://127.0.0.1:9", "--topic-pattern", "x",
                     "--project-dir", str(tmp_path)]) == 1
    assert "schema registry unreachable" in caplog.text


def test_no_matching_topic_is_a_failure(tmp_path, registry_url, caplog):
    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    assert cli.main(["--schema-registry-url", registry_url, "--topic-pattern", "nothing", "--project-dir",
                     str(tmp_path)]) == 1
    assert "no topic matches" in caplog.text


def test_the_ingestions_registry_client_still_reads_schemas_by_id(registry_url):
    """The client's GET was shared with the subject look-ups: reading by id is unchanged."""
    from ingestion.errors import UnknownSchemaError
    from ingestion.registry import SchemaRegistryClient

    client = SchemaRegistryClient(registry_url)
    assert client.schema(2) == AVRO_SCHEMAS["2"]
    with pytest.raises(UnknownSchemaError, match=rf"the registry has no schema with id 999 \(GET {registry_url}"
                                                 r"/schemas/ids/999: 404\)"):
        client.schema(999)


def test_a_topic_that_gives_no_table_name_fails_alone(tmp_path):
    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    samples = pagila_samples("actor")
    samples["9lives.public.cat"] = schemas.TopicSample("9lives.public.cat", "test", samples["pagila.public.actor"]
                                                       .value_schemas, ["actor_id"])
    outcomes = cli.onboard(samples, tmp_path, dry_run=False)
    assert [(o.topic, o.error is None) for o in outcomes] == [("9lives.public.cat", False), ("pagila.public.actor", True)]
    assert "table name '9lives_public_cat' must match" in outcomes[0].error
