"""The generator's Kafka output (`python -m benchmarks.generator --kafka`) on a real broker,
against the S3-sink files it writes for the same stream.

Kafka (only) is started by the stack's own code in this run's folder, on ports 30 above
the `make cdc-up` defaults, and stopped after; if it cannot start the test fails."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.cases import PROJECT_DIR, kafka_broker
from benchmarks.generator import Layout, StreamConfig, write_segments
from benchmarks.generator.kafka import KafkaProduceError, partition_ends, produce_segments
from benchmarks.generator.stream import TOPIC
from stack.settings import ports_above_defaults
from tests.support.compare import diff
from tests.support.lakehouse import drop_schemas

pytestmark = pytest.mark.integration

CONFIG = StreamConfig(events=3_000, keys=400, seed=11)
LAYOUT = Layout(partitions=3, records_per_file=700)
SEGMENTS = [("history", 2_000), ("batch", 1_000)]
SOURCES_YML = PROJECT_DIR / "benchmarks" / "dbt" / "models" / "silver" / "_silver__sources.yml"
FILE_NAME = re.compile(rf"{re.escape(TOPIC)}\+(\d+)\+(\d+)\.json")
# bronze columns compared between the landings (not the source file/line or landing time)
COLUMNS = ("_topic, _partition, _offset, _shape, _op, _deleted, _source_lsn, _source_ts_ms, _source_tx_id, "
           "_ts_ms, _before, _after, _source")
KEY = ["_topic", "_partition", "_offset"]
TABLE = "bench_public_orders"


@pytest.fixture(scope="module")
def kafka(run_dir: Path):
    """Fails the tests (StepFailed, with the broker's log) if Kafka cannot start."""
    with kafka_broker(run_dir / "generator-kafka", ports_above_defaults(30)) as bootstrap:
        yield bootstrap


def file_records(root: Path) -> dict[tuple[int, int], str]:
    """(partition, offset) -> line, from the sink files' names and line numbers."""
    records = {}
    for path in sorted(root.glob(f"*/topics/{TOPIC}/partition=*/*.json")):
        partition, start = map(int, FILE_NAME.fullmatch(path.name).groups())
        for index, line in enumerate(path.read_text().splitlines()):
            records[(partition, start + index)] = line
    return records


def topic_records(bootstrap: str) -> dict[tuple[int, int], tuple[bytes | None, bytes | None]]:
    """(partition, offset) -> (key, value) of every record in the topic."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-generator", "enable.auto.commit": False})
    try:
        ends = dict(enumerate(partition_ends(consumer, TOPIC, LAYOUT.partitions)))
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in ends])
        records = {}
        while len(records) < sum(ends.values()):
            msg = consumer.poll(30)
            assert msg is not None, f"timed out reading {TOPIC}: {len(records)} of {sum(ends.values())} records"
            assert msg.error() is None, msg.error()
            records[(msg.partition(), msg.offset())] = (msg.key(), msg.value())
        return records
    finally:
        consumer.close()


def row_key(line: str) -> int:
    """The primary key a Debezium envelope record is about (after, else before)."""
    payload = json.loads(line)
    return (payload["after"] or payload["before"])["order_id"]


def test_topic_holds_the_sink_files_records_with_their_keys(kafka, tmp_path):
    write_segments(CONFIG, LAYOUT, SEGMENTS, tmp_path / "files")
    produce_segments(CONFIG, LAYOUT, SEGMENTS, kafka, ["history"])
    # A segment produced twice is refused: the offsets would no longer match the files'.
    with pytest.raises(KafkaProduceError, match="ends at offset"):
        produce_segments(CONFIG, LAYOUT, SEGMENTS, kafka, ["history"])
    produced = produce_segments(CONFIG, LAYOUT, SEGMENTS, kafka, ["batch"])

    expected = file_records(tmp_path / "files")
    found = topic_records(kafka)
    assert set(found) == set(expected)
    assert sum(c["records"] for c in produced["counts"].values()) == 1_000 + produced["counts"]["batch"]["d"]
    previous_key: dict[int, bytes] = {}
    for (partition, offset), line in sorted(expected.items()):
        key, value = found[(partition, offset)]
        if line == "null":  # Debezium's tombstone after a delete: a null value, the delete's key
            assert value is None and key == previous_key[partition], (partition, offset)
        else:
            assert value.decode() == line, (partition, offset)
            assert json.loads(key) == {"order_id": row_key(line)}, (partition, offset)
        previous_key[partition] = key


def land_from_kafka(spark, bootstrap: str, schema: str, checkpoint: Path):
    from ingestion.kafka_pipeline import KafkaIngestConfig, run_kafka
    from ingestion.kafka_source import KafkaSource

    summary = run_kafka(spark, KafkaIngestConfig(
        source=KafkaSource(bootstrap_servers=bootstrap, topic_pattern=re.escape(TOPIC)),
        bronze_schema=schema, sources_yml=SOURCES_YML, checkpoint=str(checkpoint),
    ))
    assert summary.quarantined == 0, summary.render()
    return [row.asDict() for row in spark.sql(f"select {COLUMNS} from {schema}.{TABLE}").collect()]


@pytest.fixture(scope="module")
def from_files(spark, kafka, tmp_path_factory):
    """Bronze landed from the sink files of the stream (the topic's twin); the module's
    bronze schemas are dropped after its tests."""
    from ingestion.pipeline import IngestConfig, run

    root = tmp_path_factory.mktemp("files")
    write_segments(CONFIG, LAYOUT, SEGMENTS, root)
    for segment, _ in SEGMENTS:
        run(spark, IngestConfig(input_uri=str(root / segment / "topics"), bronze_schema="gen_files",
                                sources_yml=SOURCES_YML))
    rows = [row.asDict() for row in spark.sql(f"select {COLUMNS} from gen_files.{TABLE}").collect()]
    assert len(rows) == 3_000  # every event once; tombstones carry none
    yield rows
    drop_schemas(spark, ["gen_files", "gen_kafka", "gen_kafka_bulk"])


def test_ingestion_lands_the_same_rows_from_kafka_and_from_files(spark, kafka, from_files, run_dir):
    """Depends on the topic the test above filled (same module, same broker)."""
    landed = land_from_kafka(spark, kafka, "gen_kafka", run_dir / "checkpoints" / "generator")
    problems = diff("bronze from Kafka vs from files", from_files, landed, KEY)
    assert not problems, "\n".join(problems)


def test_a_large_micro_batch_lands_with_bulk_insert_and_a_replay_adds_nothing(spark, kafka, from_files, run_dir,
                                                                              monkeypatch):
    """A micro-batch whose share of a table is over load.BULK_INSERT_MIN_BYTES (its record
    values' bytes) goes in with bulk_insert, with the same rows; reading the topic again
    from the start (a new checkpoint) adds nothing."""
    from ingestion import load

    monkeypatch.setattr(load, "BULK_INSERT_MIN_BYTES", 1)
    calls: list[tuple[str, bool]] = []
    insert = load._insert_new_rows  # every insert goes through it

    def spy(spark, table_insert, schema):  # noqa: ANN001, ANN202
        calls.append((table_insert.table, table_insert.bulk))
        return insert(spark, table_insert, schema)

    monkeypatch.setattr(load, "_insert_new_rows", spy)
    landed = land_from_kafka(spark, kafka, "gen_kafka_bulk", run_dir / "checkpoints" / "generator-bulk")
    assert calls == [(TABLE, True)]
    problems = diff("bronze from Kafka (bulk_insert) vs from files", from_files, landed, KEY)
    assert not problems, "\n".join(problems)
    again = land_from_kafka(spark, kafka, "gen_kafka_bulk", run_dir / "checkpoints" / "generator-replay")
    assert len(again) == len(landed)
