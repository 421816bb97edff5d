"""PostgreSQL (Pagila) and MariaDB -> Debezium -> Kafka -> bronze -> dbt silver/gold, checked
against the databases themselves.

The tests run in order and share one stack and one lakehouse:
snapshot (landed only) -> round 1 (inserts, updates in one transaction, a primary-key
change, deletes, NULLs, unchanged TOAST values, ALTER TABLE ADD COLUMN), built with the
snapshot in one window -> round 2 with a Kafka Connect restart in the middle, whose
changes merge into the silver tables round 1 built -> a --full-refresh rebuild. After
each build every silver table must equal its source table row for row and column for
column, and gold `orders` /
`order_items`, built from the outbox's events alone, and `outbox_orders` /
`outbox_order_items`, built from its current document per order, the Northwind tables. Silver
`products` is captured by queries (tests/e2e/jdbc_poller.py polls PostgreSQL as a JDBC
source in timestamp mode would and publishes to Kafka): it equals the source but for
the limits of that capture, which the test shows: a deleted product stays, and a
product changed twice between two polls reaches bronze once, in its last state.

The same changes also go through Debezium's Avro converter and the schema registry
(connectors pagila-avro on seven Pagila tables, conftest.AVRO_PAGILA_TABLES, and
movies-avro): after each step their topics are landed with
--value-format avro and every bronze row must equal the JSON topic's bronze row of the
same event, so the Avro path is held to the sources through the JSON path's silver.
The last tests stop a run on a schema id the registry does not know, and on a registry
that does not answer.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pymysql
import psycopg
import pytest
import yaml

from ingestion.kafka_pipeline import KafkaIngestConfig, run_kafka
from ingestion.errors import RegistryUnavailableError, UnknownSchemaError
from ingestion.kafka_source import KafkaSource
from ingestion.registry import SchemaRegistryClient
from ingestion.naming import table_for_topic
from tests.e2e import workloads
from tests.e2e.conftest import AVRO_PAGILA_TABLES, Lake
from tests.e2e.jdbc_poller import Poller
from testdata.debezium import decimal_bytes
from tests.support.compare import diff
from tests.support.lakehouse import dbt, silver_rows
from tests.support.paths import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("e2e_lake")]

AVRO_TOPIC_PATTERN = r"(pagila_avro\.public|mariadb_avro\.movies_db)\..*"
# What one event must give in bronze whichever converter wrote it (times of processing aside).
BRONZE_EVENT_COLUMNS = ("_shape", "_op", "_deleted", "_before", "_after", "_source_lsn", "_source_binlog_file",
                        "_source_binlog_pos", "_source_binlog_row", "_source_tx_id", "_source_snapshot")
PAGILA_TABLES = (
    "actor", "address", "category", "city", "country", "customer", "film", "film_actor",
    "film_category", "inventory", "language", "rental", "staff", "payment",
)
MARIADB_TABLES = ("movies",)


def silver_models() -> dict[str, dict]:
    """model -> {columns: [...source columns...], key: [...]} from the silver models YAML,
    the key being its bronze source's meta.primary_key (the source its SQL reads)."""
    silver = ROOT / "models" / "silver"
    document = yaml.safe_load((silver / "_silver__models.yml").read_text())
    sources = yaml.safe_load((silver / "_silver__sources.yml").read_text())["sources"][0]["tables"]
    keys = {table["name"]: table["meta"]["primary_key"] for table in sources}
    models = {}
    for model in document["models"]:
        source = re.search(r"source\('bronze', '(\w+)'\)", (silver / f"{model['name']}.sql").read_text()).group(1)
        models[model["name"]] = {
            "columns": [c["name"] for c in model["columns"] if not c["name"].startswith("_cdc_")],
            "key": list(keys[source]),
        }
    return models


def postgres_rows(info, table: str) -> list[dict]:
    with psycopg.connect(info.pg_dsn) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute(f"select * from public.{table}")  # noqa: S608 - fixed table names
        return cur.fetchall()


def mariadb_rows(info, table: str) -> list[dict]:
    conn = pymysql.connect(**info.mariadb_connect_args, cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute(f"select * from {table}")  # noqa: S608 - fixed table names
            return list(cur.fetchall())
    finally:
        conn.close()


def assert_silver_equals_sources(spark, info) -> None:
    models = silver_models()
    problems: list[str] = []
    for table in (*PAGILA_TABLES, *MARIADB_TABLES):
        source = postgres_rows(info, table) if table in PAGILA_TABLES else mariadb_rows(info, table)
        model = models[table]
        source_columns = set(source[0]) if source else set()
        missing = source_columns - set(model["columns"])
        if missing:
            problems.append(f"{table}: source columns {sorted(missing)} are not in silver")
            continue
        silver = silver_rows(spark, table, model["columns"])
        # A model may declare a column before the source adds it (ALTER TABLE later): all null until then.
        for column in sorted(set(model["columns"]) - source_columns):
            filled = sum(row[column] is not None for row in silver)
            if filled:
                problems.append(f"{table}: {column} is not in the source yet but {filled} silver row(s) have a value")
        shared = [c for c in model["columns"] if c in source_columns]
        problems += diff(table, source, [{c: row[c] for c in shared} for row in silver], model["key"])
    assert not problems, "silver differs from the source databases:\n" + "\n".join(problems)


# Gold computed by PostgreSQL itself from its own tables, the independent expectation.
REVENUE_BY_CATEGORY_MONTH = """
select c.name as category_name,
       date_trunc('month', p.payment_date)::date as payment_month,
       sum(p.amount) as revenue,
       count(*) as payment_count
from payment as p
left join rental as r on p.rental_id = r.rental_id
left join inventory as i on r.inventory_id = i.inventory_id
left join film_category as fc on i.film_id = fc.film_id
left join category as c on fc.category_id = c.category_id
group by 1, 2
"""


def assert_gold_equals_source_query(spark, info) -> None:
    with psycopg.connect(info.pg_dsn) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute(REVENUE_BY_CATEGORY_MONTH)
        expected = cur.fetchall()
    columns = ["category_name", "payment_month", "revenue", "payment_count"]
    actual = [row.asDict() for row in spark.sql(f"select {', '.join(columns)} from gold.revenue_by_category_month").collect()]
    problems = diff("gold.revenue_by_category_month", expected, actual, ["category_name", "payment_month"])
    assert not problems, "\n".join(problems)


NORTHWIND_ORDERS = "select order_id, customer_id, order_date, status, ship_country, freight from northwind.orders"
NORTHWIND_ITEMS = "select order_id, product_id, quantity, unit_price, discount from northwind.order_items"
# The orders with their customer and item count, from the tables the outbox's documents copy.
NORTHWIND_ORDER_DOCUMENTS = (
    "select o.order_id, o.customer_id, o.order_date, o.status, o.ship_country, o.freight,"
    " c.company_name as customer_name, c.country as customer_country,"
    " (select count(*)::int from northwind.order_items as i where i.order_id = o.order_id) as item_count"
    " from northwind.orders as o join northwind.customers as c on o.customer_id = c.customer_id")


def assert_outbox_gold_equals_northwind(spark, info) -> None:
    """Gold orders and order_items (from the outbox's event log) and outbox_orders and
    outbox_order_items (from its current document per order) equal PostgreSQL's
    tables; silver keeps every event the triggers ever wrote, purged or not."""
    problems: list[str] = []
    with psycopg.connect(info.pg_dsn) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        for gold, query, key in (("orders", NORTHWIND_ORDERS, ["order_id"]),
                                 ("order_items", NORTHWIND_ITEMS, ["order_id", "product_id"]),
                                 ("outbox_orders", NORTHWIND_ORDER_DOCUMENTS, ["order_id"]),
                                 ("outbox_order_items", NORTHWIND_ITEMS, ["order_id", "product_id"])):
            cur.execute(query)
            expected = cur.fetchall()
            assert expected, f"the expectation of gold.{gold} is empty: the comparison would prove nothing"
            columns = ", ".join(expected[0])
            actual = [row.asDict() for row in spark.sql(f"select {columns} from gold.{gold}").collect()]
            problems += diff(f"gold.{gold}", expected, actual, key)
        # no rollback ever used the sequence, so its last value is the number of events written
        cur.execute("select last_value from northwind.cdc_events_event_id_seq")
        written = cur.fetchone()["last_value"]
    events = [row[0] for row in spark.sql("select event_id from silver.cdc_events order by event_id").collect()]
    if events != list(range(1, written + 1)):
        problems.append(f"silver.cdc_events holds {len(events)} event(s), expected the {written} written")
    assert not problems, "gold differs from the Northwind tables:\n" + "\n".join(problems)


NORTHWIND_PRODUCTS = "select product_id, product_name, unit_price, updated_at from northwind.products"
# Products deleted in the source, as they were just before: query-based capture never sees the delete.
DELETED_PRODUCTS: list[dict] = []


def products_in_source(info) -> list[dict]:
    """northwind.products, `updated_at` cut to the milliseconds the poller publishes."""
    with psycopg.connect(info.pg_dsn) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute(NORTHWIND_PRODUCTS)
        rows = cur.fetchall()
    for row in rows:
        at = row["updated_at"]
        row["updated_at"] = at.replace(microsecond=at.microsecond // 1000 * 1000)
    return rows


def assert_products_equal_source_but_deletes(spark, info) -> None:
    expected = products_in_source(info) + DELETED_PRODUCTS
    columns = ["product_id", "product_name", "unit_price", "updated_at"]
    problems = diff("silver.products", expected, silver_rows(spark, "products", columns), ["product_id"])
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def jdbc_poller(cdc_stack) -> Poller:
    return Poller(cdc_stack.pg_dsn, cdc_stack.kafka_bootstrap)


def run_postgres(info, transactions: list[list[str]]) -> None:
    with psycopg.connect(info.pg_dsn) as conn:
        for statements in transactions:
            with conn.transaction(), conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)


def run_mariadb(info, transactions: list[list[str]]) -> None:
    conn = pymysql.connect(**info.mariadb_connect_args, autocommit=False)
    try:
        for statements in transactions:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
            conn.commit()
    finally:
        conn.close()


def kafka_value_counts(spark, bootstrap: str, topic_pattern: str) -> dict[str, int]:
    """Records with a value (not tombstones) per topic, read from Kafka in batch mode."""
    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribePattern", topic_pattern)
        .option("startingOffsets", "earliest")
        .load()
        .where("value is not null")
        .groupBy("topic")
        .count()
        .collect()
    )
    return {row["topic"]: row["count"] for row in rows}


def has_avro_twin(topic: str) -> bool:
    """Whether the Avro connectors capture the table of this JSON topic (conftest.OVERRIDES)."""
    return topic.startswith("mariadb.") or topic.rsplit(".", 1)[-1] in AVRO_PAGILA_TABLES


def avro_twin(topic: str) -> str:
    return re.sub(r"^(pagila|mariadb)\.", r"\1_avro.", topic)


# Where each connector's own snapshot read a row (its position, and whether it was the
# first or last of its table or of the snapshot, which differ as the Avro connector reads
# fewer tables): the same for a streamed change only.
SNAPSHOT_POSITION_COLUMNS = ("_source_lsn", "_source_binlog_file", "_source_binlog_pos", "_source_binlog_row",
                             "_source_tx_id", "_source_snapshot")


def bronze_events(spark, topic: str) -> Counter:
    columns = ", ".join(
        f"case when _op = 'r' then null else {c} end as {c}" if c in SNAPSHOT_POSITION_COLUMNS else c
        for c in BRONZE_EVENT_COLUMNS)
    return Counter(tuple(row) for row in spark.sql(f"select {columns} from bronze.`{table_for_topic(topic)}`").collect())


def ingest_avro_and_compare(spark, info, run_dir: Path, topics: list[str]) -> None:
    """Land the Avro topics; each table's bronze events equal its JSON twin's, row by row."""
    summary = run_kafka(
        spark,
        KafkaIngestConfig(
            source=KafkaSource(bootstrap_servers=info.kafka_bootstrap, topic_pattern=AVRO_TOPIC_PATTERN,
                               value_format="avro"),
            checkpoint=str(run_dir / "checkpoints" / "e2e-avro"),
            registry=SchemaRegistryClient(info.registry_url),
        ),
    )
    print(summary.render())
    assert summary.quarantined == 0, summary.render()
    problems = []
    for topic in sorted(topics):
        from_json, from_avro = bronze_events(spark, topic), bronze_events(spark, avro_twin(topic))
        if from_json != from_avro:
            problems.append(f"{topic}: {sum(from_json.values())} JSON rows, {sum(from_avro.values())} Avro rows; "
                            f"only JSON: {list((from_json - from_avro).items())[:2]}; "
                            f"only Avro: {list((from_avro - from_json).items())[:2]}")
    assert not problems, "Avro bronze differs from JSON bronze:\n" + "\n".join(problems)


def land(spark, info, run_dir: Path, lake: Lake) -> None:
    """Land both converters' topics: bronze holds each Kafka record once, and the Avro
    topics' bronze rows equal the JSON ones'."""
    import stack

    stack.wait_caught_up(f"{lake.topic_pattern}|{AVRO_TOPIC_PATTERN}")
    started = time.monotonic()
    summary = run_kafka(
        spark,
        KafkaIngestConfig(
            source=KafkaSource(bootstrap_servers=info.kafka_bootstrap, topic_pattern=lake.topic_pattern),
            checkpoint=str(lake.checkpoint),
        ),
    )
    print(summary.render())
    assert summary.quarantined == 0, summary.render()
    # Exactly once: bronze holds each Kafka record with a value once, whatever the runs before did.
    expected = kafka_value_counts(spark, info.kafka_bootstrap, lake.topic_pattern)
    landed = {
        topic: spark.sql(f"select count(*) from bronze.`{table_for_topic(topic)}`").first()[0]
        for topic in expected
    }
    assert landed == expected, f"bronze rows per topic {landed} != Kafka records per topic {expected}"
    json_landed = time.monotonic()
    ingest_avro_and_compare(spark, info, run_dir, [t for t in expected if has_avro_twin(t)])
    print(f"JSON ingestion {json_landed - started:.1f}s, Avro ingestion + comparison "
          f"{time.monotonic() - json_landed:.1f}s")


def land_and_build(spark, info, run_dir: Path, lake: Lake) -> None:
    """Land, then `dbt build` without the project's data tests: the comparisons with the
    sources after every build are the stronger check, and
    tests/integration/test_pipeline.py runs them on the sample."""
    land(spark, info, run_dir, lake)
    started = time.monotonic()
    dbt("build", "--exclude-resource-type", "test", "--exclude-resource-type", "unit_test")
    print(f"dbt build {time.monotonic() - started:.1f}s")


def test_snapshot(spark, cdc_stack, run_dir, jdbc_poller, e2e_lake):
    """Landed, not built: a full-sample build is the costliest step of the suite, and
    round 1's build takes the snapshot in with its own changes."""
    assert len(jdbc_poller.poll()) == 8
    land(spark, cdc_stack, run_dir, e2e_lake)


def test_round_1_workload(spark, cdc_stack, run_dir, jdbc_poller, e2e_lake):
    run_postgres(cdc_stack, workloads.POSTGRES_ROUND_1)
    run_postgres(cdc_stack, workloads.NORTHWIND_ROUND_1)
    run_postgres(cdc_stack, workloads.PRODUCTS_ROUND_1)
    run_mariadb(cdc_stack, workloads.MARIADB_ROUND_1)
    polled = jdbc_poller.poll()
    # product 3 changed twice since the last poll: one record, its last state
    assert sorted(row["product_id"] for row in polled) == [2, 3, 9, 10], polled
    land_and_build(spark, cdc_stack, run_dir, e2e_lake)
    assert_silver_equals_sources(spark, cdc_stack)
    assert_gold_equals_source_query(spark, cdc_stack)
    assert_outbox_gold_equals_northwind(spark, cdc_stack)
    assert_products_equal_source_but_deletes(spark, cdc_stack)
    # the state between product 3's two updates ('Rye crackers, thin' at 3.10) never reached bronze
    states = sorted(tuple(row) for row in spark.sql(
        "select get_json_object(_after, '$.product_name'), get_json_object(_after, '$.unit_price')"
        " from bronze.query_northwind_products where get_json_object(_after, '$.product_id') = '3'").collect())
    assert states == [("Rye crackers", decimal_bytes(Decimal("3.10"), 2)),
                      ("Rye crackers, thin", decimal_bytes(Decimal("3.40"), 2))], states
    # The TOAST placeholder never reaches silver; the big values survive the later updates.
    placeholders = spark.sql(
        "select count(*) from silver.film where description like '%__debezium_unavailable_value%'"
        " or array_contains(special_features, '__debezium_unavailable_value')"
    ).first()[0]
    assert placeholders == 0


def test_round_2_with_connect_restart(spark, cdc_stack, run_dir, jdbc_poller, e2e_lake):
    import stack

    run_postgres(cdc_stack, workloads.POSTGRES_ROUND_2_BEFORE_RESTART)
    stack.restart_connect()
    connectors = stack.status()["connectors"]
    for name in ("pagila-envelope", "movies-envelope", "northwind-outbox", "pagila-avro", "movies-avro"):
        assert connectors[name] == {"state": "RUNNING", "tasks": ["RUNNING"]}, connectors
    run_postgres(cdc_stack, workloads.POSTGRES_ROUND_2_AFTER_RESTART)
    run_postgres(cdc_stack, workloads.NORTHWIND_ROUND_2)
    DELETED_PRODUCTS.extend(row for row in products_in_source(cdc_stack) if row["product_id"] == 10)
    run_postgres(cdc_stack, workloads.PRODUCTS_ROUND_2)
    run_mariadb(cdc_stack, workloads.MARIADB_ROUND_2)
    assert [row["product_id"] for row in jdbc_poller.poll()] == [9]  # the delete of 10 is not seen
    land_and_build(spark, cdc_stack, run_dir, e2e_lake)
    assert_silver_equals_sources(spark, cdc_stack)
    assert_gold_equals_source_query(spark, cdc_stack)
    assert_outbox_gold_equals_northwind(spark, cdc_stack)
    assert_products_equal_source_but_deletes(spark, cdc_stack)


def test_full_refresh_equals_sources(spark, cdc_stack):
    dbt("build", "--full-refresh", "--select", "silver", "orders", "order_items", "outbox_orders", "outbox_order_items", "--exclude-resource-type", "test",
        "--exclude-resource-type", "unit_test")
    assert_silver_equals_sources(spark, cdc_stack)
    assert_gold_equals_source_query(spark, cdc_stack)
    assert_outbox_gold_equals_northwind(spark, cdc_stack)
    assert_products_equal_source_but_deletes(spark, cdc_stack)


# --- Avro: a schema that cannot be had stops the run -------------------------------------
SCRATCH_TOPIC = "regtest_avro.public.actor"


def _seed_scratch_topic(info) -> None:
    """Three real Avro records of pagila_avro.public.actor, then one naming schema id 999999."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": info.kafka_bootstrap, "group.id": "e2e-scratch",
                         "enable.auto.commit": False})
    records = []
    try:
        consumer.assign([TopicPartition("pagila_avro.public.actor", 0, 0)])
        while len(records) < 3:
            message = consumer.poll(30)
            assert message is not None and not message.error(), message and message.error()
            records.append((message.key(), message.value()))
    finally:
        consumer.close()
    producer = Producer({"bootstrap.servers": info.kafka_bootstrap})
    unknown = records[0][1][:1] + (999999).to_bytes(4, "big") + records[0][1][5:]
    for key, value in [*records, (records[0][0], unknown)]:
        producer.produce(SCRATCH_TOPIC, key=key, value=value, partition=0)
    assert producer.flush(30) == 0


def _scratch_config(info, checkpoint: Path, registry: SchemaRegistryClient) -> KafkaIngestConfig:
    return KafkaIngestConfig(
        source=KafkaSource(bootstrap_servers=info.kafka_bootstrap, topic_pattern=re.escape(SCRATCH_TOPIC),
                           max_offsets_per_batch=3, value_format="avro"),
        checkpoint=str(checkpoint),
        registry=registry,
    )


def _scratch_offsets(spark) -> list[int]:
    table = table_for_topic(SCRATCH_TOPIC)
    return [row[0] for row in spark.sql(f"select _offset from bronze.`{table}` order by _offset").collect()]


def _committed_batches(checkpoint: Path) -> list[str]:
    return sorted(p.name for p in (checkpoint / "commits").iterdir() if not p.name.startswith("."))


def test_unknown_schema_id_stops_the_run_after_the_last_good_batch(spark, cdc_stack, run_dir):
    _seed_scratch_topic(cdc_stack)
    checkpoint = run_dir / "checkpoints" / "unknown-schema-id"
    with pytest.raises(UnknownSchemaError) as failure:
        run_kafka(spark, _scratch_config(cdc_stack, checkpoint, SchemaRegistryClient(cdc_stack.registry_url)))
    assert str(failure.value).startswith(
        f"topic {SCRATCH_TOPIC} partition 0 offset 3: schema id 999999: the registry has no schema with id 999999")
    # The first micro-batch (offsets 0-2) landed and was committed; the failed one neither.
    assert _scratch_offsets(spark) == [0, 1, 2]
    assert _committed_batches(checkpoint) == ["0"]
    # A rerun starts at the failed batch again, and fails the same way.
    with pytest.raises(UnknownSchemaError):
        run_kafka(spark, _scratch_config(cdc_stack, checkpoint, SchemaRegistryClient(cdc_stack.registry_url)))
    assert _scratch_offsets(spark) == [0, 1, 2] and _committed_batches(checkpoint) == ["0"]


def test_unreachable_registry_stops_the_run_before_writing(spark, cdc_stack, run_dir):
    # Port 9 (discard) is closed on this machine: every request is refused.
    registry = SchemaRegistryClient("http://127.0.0.1:9/apis/ccompat/v7", attempts=2)
    checkpoint = run_dir / "checkpoints" / "unreachable-registry"
    before = _scratch_offsets(spark)
    with pytest.raises(RegistryUnavailableError) as failure:
        run_kafka(spark, _scratch_config(cdc_stack, checkpoint, registry))
    message = str(failure.value)
    assert message.startswith(f"topic {SCRATCH_TOPIC} partition 0 offset 0: schema id "), message
    assert "schema registry unreachable: GET http://127.0.0.1:9/apis/ccompat/v7/schemas/ids/" in message
    assert _scratch_offsets(spark) == before
    assert not (checkpoint / "commits").exists() or _committed_batches(checkpoint) == []
