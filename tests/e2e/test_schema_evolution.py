"""Schema evolution through the schema registry, on the real stack (docs/reference/schema-registry.md,
docs/decisions/schema-evolution.md).

The stack's registry holds every subject to BACKWARD compatibility, as the reference
setup does. A scratch table `evo.item` in Pagila's database gets its own Avro connector
(`evo-avro`: own publication, slot and topic prefix), so the other end-to-end tests'
topics are untouched; it shares their stack (conftest's package-scoped `cdc_stack`).
While the connector runs, the table gets a column added, a column dropped, three types
widened (int -> bigint, varchar(10) -> varchar(40), numeric(5,2) -> numeric(9,2)), and
then an incompatible change (bigint -> text). After each step the topic is landed with
--value-format avro and a silver model of a scratch copy of the project is built; silver
must equal the table read back from PostgreSQL, column for column, but for the
documented rules: a column added upstream is null in silver for rows whose last change
came before it (PostgreSQL fills them with the default without an event), and a dropped
column keeps the value of a row's last event before the drop (null for rows changed
after it). The incompatible change stops the scratch connector with a message naming
the column and both types and what to do, while another connector's table goes on;
doing what it says lands the change. Last, a second connector on the same table writes
the schema ids into Apicurio's record headers instead of the payload, and its records
land like the wire format's.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.request
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
import yaml

from ingestion.kafka_pipeline import KafkaIngestConfig, run_kafka
from ingestion.kafka_source import KafkaSource
from ingestion.naming import table_for_topic
from ingestion.registry import SchemaRegistryClient
from tests.support.lakehouse import MODEL_TABLE_SUFFIXES, dbt_invoke, drop_tables, silver_rows
from tests.support.paths import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("empty_project_schemas")]

CONNECTOR = "evo-avro"
TOPIC = "evo_avro.evo.item"
SUBJECT = f"{TOPIC}-value"
MODEL = "evo_item"
SOURCE = table_for_topic(TOPIC)
# The model's YAML columns, step by step (the test's scratch project rewrites them).
COLUMNS = {"id": "int", "name": "string", "qty": "int", "price": "decimal(5,2)", "note": "string"}
# `note` as inserted, for rows whose last event came before the column was dropped.
NOTES = {1: "n1", 2: "n2", 3: "n3", 4: "n4"}
# Keys whose last event came after `color` was added: the others are null in silver.
COLORED: set[int] = set()


def registry_versions(info) -> list[int]:
    with urllib.request.urlopen(f"{info.registry_url}/subjects/{SUBJECT}/versions", timeout=10) as answer:
        return json.load(answer)


def registry_call(info, method: str, path: str, body: dict | None = None) -> int:
    base = info.registry_url.removesuffix("/apis/ccompat/v7")
    request = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status


def task_states(name: str) -> list[str]:
    import stack

    return stack.status()["connectors"][name]["tasks"]


def wait_for(what: str, check, timeout: float = 120):
    """Poll `check` until it returns something true; every answer before is transient."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last answer {value!r}", pytrace=False)
        time.sleep(1)


@pytest.fixture(scope="module")
def evo(cdc_stack, tmp_path_factory):
    """The scratch table (3 rows), its publication and its connector, registered with
    the initial snapshot; removed after the module."""
    import stack

    user = cdc_stack.credentials.pg_user
    stack.psql(f"""
        drop schema if exists evo cascade;
        create schema evo;
        create table evo.item (id int primary key, name varchar(10) not null, qty int, price numeric(5,2), note text);
        insert into evo.item values (1, 'ann', 10, 1.50, 'n1'), (2, 'bob', 20, 2.50, 'n2'), (3, 'cy', 30, 3.50, 'n3');
        grant usage on schema evo to "{user}";
        grant select on all tables in schema evo to "{user}";
        drop publication if exists cdc_evo;
        create publication cdc_evo for table evo.item;
    """)
    stack.register(CONNECTOR, template="pagila-avro", overrides={
        "topic.prefix": "evo_avro", "slot.name": "cdc_evo_avro", "publication.name": "cdc_evo",
        "table.include.list": "evo.item", "message.key.columns": "evo.item:id"})
    yield tmp_path_factory.mktemp("evolution")
    stack.unregister(CONNECTOR)  # also drops its slot
    stack.psql("drop publication if exists cdc_evo; drop schema if exists evo cascade;")


@pytest.fixture(scope="module")
def project(evo, spark) -> Path:
    """A scratch dbt project: this project's dbt_project.yml and macros, the bronze source
    of TOPIC and a silver model MODEL like the project's (its YAML is written by build())."""
    project = evo / "project"
    (project / "models" / "silver").mkdir(parents=True)
    shutil.copy(ROOT / "dbt_project.yml", project / "dbt_project.yml")
    shutil.copytree(ROOT / "macros", project / "macros")
    sources = yaml.safe_load((ROOT / "models" / "silver" / "_silver__sources.yml").read_text())
    sources["sources"][0]["tables"] = [{"name": SOURCE, "meta": {"topic": TOPIC, "primary_key": ["id"]}}]
    (project / "models" / "silver" / "_silver__sources.yml").write_text(yaml.safe_dump(sources, sort_keys=False))
    model_sql = (ROOT / "models" / "silver" / "actor.sql").read_text()
    (project / "models" / "silver" / f"{MODEL}.sql").write_text(model_sql.replace("pagila_public_actor", SOURCE))
    yield project
    drop_tables(spark, [("silver", MODEL + s) for s in MODEL_TABLE_SUFFIXES])


def build(project: Path, columns: dict[str, str]) -> str:
    """The model's YAML declares `columns`; `dbt run` of the model; its result message."""
    spec = {"version": 2, "models": [{"name": MODEL,
                                      "columns": [{"name": n, "data_type": t} for n, t in columns.items()]}]}
    (project / "models" / "silver" / "_silver__models.yml").write_text(yaml.safe_dump(spec, sort_keys=False))
    result = dbt_invoke("run", "--select", MODEL, "--target-path", str(project / "target"), project=project)
    assert result.success, f"dbt run failed: {str(result.exception or [r.message for r in result.result])[:3000]}"
    return result.result.results[0].message


def ingest(spark, info, run_dir: Path, topic: str = TOPIC, checkpoint: str = "evolution") -> int:
    """Land `topic` into bronze (Avro through the registry), nothing quarantined; its bronze rows."""
    summary = run_kafka(spark, KafkaIngestConfig(
        source=KafkaSource(bootstrap_servers=info.kafka_bootstrap, topic_pattern=re.escape(topic),
                           value_format="avro"),
        checkpoint=str(run_dir / "checkpoints" / checkpoint),
        registry=SchemaRegistryClient(info.registry_url)))
    assert summary.quarantined == 0, summary.render()
    return spark.sql(f"select count(*) from bronze.`{table_for_topic(topic)}`").first()[0]


def source_rows(info) -> list[dict]:
    with psycopg.connect(info.pg_dsn) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute("select * from evo.item order by id")
        return cur.fetchall()


def expected(info, columns: dict[str, str]) -> list[dict]:
    """The table read back from PostgreSQL, by the documented rules for `color` (added)
    and `note` (dropped)."""
    rows = []
    for row in source_rows(info):
        if "color" in row and row["id"] not in COLORED:
            row["color"] = None  # PostgreSQL's default for rows written before: no event carried it
        if "note" not in row:
            row["note"] = NOTES.get(row["id"])  # the value of the row's last event before the drop
        rows.append({c: row[c] for c in columns})
    return rows


def run(info, *statements: str) -> None:
    with psycopg.connect(info.pg_dsn) as conn, conn.transaction(), conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def test_snapshot(spark, cdc_stack, run_dir, evo, project):
    import stack

    stack.wait_caught_up(re.escape(TOPIC), quiet_seconds=1)
    assert ingest(spark, cdc_stack, run_dir) == 3
    assert build(project, COLUMNS) == "full refresh"
    assert silver_rows(spark, MODEL, list(COLUMNS), ["id"]) == expected(cdc_stack, COLUMNS)
    assert registry_versions(cdc_stack) == [1]


def test_column_added_lands_without_restart_and_reaches_silver_once_declared(spark, cdc_stack, run_dir, project):
    import stack

    run(cdc_stack, "alter table evo.item add column color text default 'grey'",
        "insert into evo.item (id, name, qty, price, note, color) values (4, 'dee', 40, 4.50, 'n4', 'red')")
    run(cdc_stack, "update evo.item set qty = 11 where id = 1")
    COLORED.update({1, 4})
    stack.wait_caught_up(re.escape(TOPIC), quiet_seconds=1)
    assert task_states(CONNECTOR) == ["RUNNING"]  # the same task went on
    assert registry_versions(cdc_stack) == [1, 2]  # accepted under BACKWARD
    assert ingest(spark, cdc_stack, run_dir) == 5
    # not declared yet: silver goes on without it
    assert build(project, COLUMNS) != "full refresh"
    assert silver_rows(spark, MODEL, list(COLUMNS), ["id"]) == expected(cdc_stack, COLUMNS)
    # declared: the table is rebuilt from bronze; rows 2 and 3 are 'grey' upstream but
    # no event carried the column for them: null, as the rule says
    COLUMNS["color"] = "string"
    assert build(project, COLUMNS) == "full refresh"
    rows = silver_rows(spark, MODEL, list(COLUMNS), ["id"])
    assert rows == expected(cdc_stack, COLUMNS)
    assert [r["color"] for r in rows] == ["grey", None, None, "red"]


def test_column_dropped_and_types_widened(spark, cdc_stack, run_dir, project):
    """One step (one landing, one build): `note` dropped, row 2 changed after it and row 5
    inserted without it; qty int -> bigint, name varchar(10) -> varchar(40), price
    numeric(5,2) -> numeric(9,2), with values only the wider types hold."""
    import stack

    run(cdc_stack, "alter table evo.item drop column note", "update evo.item set name = 'bobby' where id = 2",
        "insert into evo.item (id, name, qty, price, color) values (5, 'eve', 50, 5.50, 'blue')")
    NOTES.pop(2)
    COLORED.update({2, 5})
    run(cdc_stack, "alter table evo.item alter column qty type bigint, alter column name type varchar(40),"
                   " alter column price type numeric(9,2)",
        "insert into evo.item (id, name, qty, price, color) values"
        " (6, 'a name longer than ten characters', 5000000000, 1234567.89, 'green')",
        "update evo.item set price = 12345.67 where id = 3")
    NOTES.pop(3)
    COLORED.update({3, 6})
    stack.wait_caught_up(re.escape(TOPIC), quiet_seconds=1)
    assert task_states(CONNECTOR) == ["RUNNING"]  # the same task went on
    # each accepted under BACKWARD: the drop, then int -> long with the decimal's new
    # precision (Avro promotes int to long; a varchar's length is not in the schema)
    assert registry_versions(cdc_stack) == [1, 2, 3, 4]
    assert ingest(spark, cdc_stack, run_dir) == 9
    # The YAML keeps note (null from the drop on) and declares the wider types: rebuilt.
    COLUMNS.update(qty="bigint", price="decimal(9,2)")
    assert build(project, COLUMNS) == "full refresh"
    rows = silver_rows(spark, MODEL, list(COLUMNS), ["id"])
    assert rows == expected(cdc_stack, COLUMNS)
    assert [r["note"] for r in rows] == ["n1", None, None, "n4", None, None]
    assert rows[-1] == {"id": 6, "name": "a name longer than ten characters", "qty": 5000000000,
                        "price": Decimal("1234567.89"), "note": None, "color": "green"}
    assert rows[2]["price"] == Decimal("12345.67")


def test_incompatible_change_stops_that_table_only(spark, cdc_stack, run_dir, project):
    import stack

    before = silver_rows(spark, MODEL, list(COLUMNS), ["id"])
    offsets = stack.end_offsets(re.escape(TOPIC))
    run(cdc_stack, "alter table evo.item alter column qty type text using qty::text",
        "update evo.item set qty = 'many' where id = 1")
    wait_for("the evo-avro task to fail", lambda: task_states(CONNECTOR) == ["FAILED"])
    message = stack.connector_problem(CONNECTOR)
    for part in (f"connector {CONNECTOR} stopped", f"refused the new schema of {SUBJECT}", "not BACKWARD compatible",
                 "qty: long -> string (now text in evo.item)", "What to do", "undo the change",
                 f"artifacts/{SUBJECT}/rules", f"/connectors/{CONNECTOR}/tasks/0/restart", "data_type"):
        assert part in message, f"{part!r} not in: {message}"
    assert registry_versions(cdc_stack) == [1, 2, 3, 4]  # refused
    # The other tables go on: pagila-avro runs and carries a new actor.
    actor_offsets = stack.end_offsets(r"pagila_avro\.public\.actor")
    run(cdc_stack, "insert into public.actor (actor_id, first_name, last_name) values (9001, 'EVO', 'LUTION')")
    run(cdc_stack, "delete from public.actor where actor_id = 9001")
    wait_for("the actor insert and delete in pagila_avro.public.actor",
             lambda: sum(stack.end_offsets(r"pagila_avro\.public\.actor").values())
             >= sum(actor_offsets.values()) + 2)
    assert stack.status()["connectors"]["pagila-avro"] == {"state": "RUNNING", "tasks": ["RUNNING"]}
    # Nothing of the change reached the scratch topic, bronze or silver.
    assert stack.end_offsets(re.escape(TOPIC)) == offsets
    assert ingest(spark, cdc_stack, run_dir) == 9
    assert build(project, COLUMNS) == "no new bronze commits"
    assert silver_rows(spark, MODEL, list(COLUMNS), ["id"]) == before


def test_accepting_the_incompatible_change_as_the_message_says(spark, cdc_stack, run_dir, project):
    import stack

    rules = f"/apis/registry/v2/groups/default/artifacts/{SUBJECT}/rules"
    assert registry_call(cdc_stack, "POST", rules, {"type": "COMPATIBILITY", "config": "NONE"}) == 204
    stack.api._running_connect().call("POST", f"/connectors/{CONNECTOR}/tasks/0/restart")
    wait_for("the evo-avro task to run again", lambda: task_states(CONNECTOR) == ["RUNNING"])
    # The task reports RUNNING before it sends the refused record again: the rule may go
    # only once that record's schema is registered, else it is refused again.
    wait_for("the changed schema registered", lambda: len(registry_versions(cdc_stack)) == 5)
    assert registry_call(cdc_stack, "DELETE", f"{rules}/COMPATIBILITY") == 204  # BACKWARD again from here
    stack.wait_caught_up(re.escape(TOPIC), quiet_seconds=1)
    assert stack.connector_problem(CONNECTOR) is None
    assert registry_versions(cdc_stack) == [1, 2, 3, 4, 5]
    assert ingest(spark, cdc_stack, run_dir) == 10
    NOTES.pop(1)  # row 1 changed after the drop
    COLUMNS["qty"] = "string"  # bigint -> string: every stored value converts, rebuilt
    assert build(project, COLUMNS) == "full refresh"
    rows = silver_rows(spark, MODEL, list(COLUMNS), ["id"])
    assert rows == expected(cdc_stack, COLUMNS)
    assert [r["qty"] for r in rows] == ["many", "20", "30", "40", "50", "5000000000"]


HEADERS_TOPIC = "evo_avro_h.evo.item"


def first_record_headers(info, topic: str) -> tuple[dict[str, bytes], bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": info.kafka_bootstrap, "group.id": "e2e-evolution",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = wait_for(f"a record of {topic}", lambda: consumer.poll(5), timeout=60)
        assert not message.error(), message.error()
        return dict(message.headers() or []), message.value()
    finally:
        consumer.close()


def test_apicurio_header_mode_lands(spark, cdc_stack, run_dir, evo):
    """A connector writing the schema ids into Apicurio's headers (headers.enabled): its
    snapshot of the table and a later update land with the same --value-format avro, each
    bronze row equal to the table read back from PostgreSQL."""
    import stack
    from testdata.debezium import decimal_bytes

    snapshot = source_rows(cdc_stack)
    stack.register("evo-avro-headers", template="pagila-avro", overrides={
        "topic.prefix": "evo_avro_h", "slot.name": "cdc_evo_avro_h", "publication.name": "cdc_evo",
        "table.include.list": "evo.item", "message.key.columns": "evo.item:id",
        "key.converter.apicurio.registry.headers.enabled": "true",
        "value.converter.apicurio.registry.headers.enabled": "true"})
    try:
        run(cdc_stack, "update evo.item set name = 'ann again' where id = 1")
        stack.wait_caught_up(re.escape(HEADERS_TOPIC), quiet_seconds=1)
        headers, value = first_record_headers(cdc_stack, HEADERS_TOPIC)
        assert len(headers["apicurio.value.contentId"]) == 8 and len(headers["apicurio.key.contentId"]) == 8, headers
        ingest(spark, cdc_stack, run_dir, HEADERS_TOPIC, "evolution-headers")
    finally:
        stack.unregister("evo-avro-headers")

    def as_event(row: dict) -> dict:
        """A row's columns as the event's `after` holds them (decimals as Connect's base64 bytes)."""
        price = row["price"] if isinstance(row["price"], str) else decimal_bytes(row["price"], 2)
        return {"id": row["id"], "name": row["name"], "qty": row["qty"], "color": row["color"], "price": price}

    landed = [(r["_op"], json.loads(r["_after"])) for r in spark.sql(
        f"select _op, _after from bronze.`{table_for_topic(HEADERS_TOPIC)}` order by _offset").collect()]
    updated = [row for row in source_rows(cdc_stack) if row["id"] == 1]
    snapshot_events = sorted((as_event(after) for op, after in landed if op == "r"), key=lambda e: e["id"])
    assert snapshot_events == [as_event(row) for row in snapshot]  # source_rows is by id
    assert [(op, as_event(after)) for op, after in landed if op != "r"] == [("u", as_event(row)) for row in updated]
