"""The generator's Kafka output (`python -m benchmarks.generator --kafka`) on a real broker,
against the S3-sink files it writes for the same stream.

Kafka (only) is started by the stack's own code in this run's folder, on ports 20 above
the `make cdc-up` defaults, and stopped after; if it cannot start the test fails."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from benchmarks.generator import Layout, StreamConfig, write_segments
from benchmarks.generator.kafka import KafkaProduceError, produce_segments
from benchmarks.generator.stream import TOPIC
from stack.settings import ports_above_defaults
from tests.support.compare import diff

pytestmark = pytest.mark.integration

CONFIG = StreamConfig(events=3_000, keys=400, seed=11)
LAYOUT = Layout(partitions=3, records_per_file=700)
SEGMENTS = [("history", 2_000), ("batch", 1_000)]
FILE_NAME = re.compile(rf"{re.escape(TOPIC)}\+(\d+)\+(\d+)\.json")


@pytest.fixture(scope="module")
def kafka(run_dir: Path):
    import stack

    settings = {"CDC_STACK_DIR": str(run_dir / "generator-kafka"), **ports_above_defaults(20)}
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        try:
            info = stack.up(["kafka"])
        except Exception as exc:  # noqa: BLE001 - fail (never skip) with the reason
            stack.down(purge=False)
            pytest.fail(f"Kafka did not start: {exc}", pytrace=False)
        yield info.kafka_bootstrap
        stack.down(purge=False)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(LAYOUT.partitions)}
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
    # A segment produced twice, or out of order, is refused: the offsets would no longer match.
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


def test_ingestion_lands_the_same_rows_from_kafka_and_from_files(kafka, spark, tmp_path, run_dir):
    """Depends on the topic the test above filled (same module, same broker)."""
    from ingestion.kafka_pipeline import KafkaIngestConfig, run_kafka
    from ingestion.kafka_source import KafkaSource
    from ingestion.pipeline import IngestConfig, run
    from ingestion.spark import PROJECT_DIR

    sources = PROJECT_DIR / "benchmarks" / "dbt" / "models" / "silver" / "_silver__sources.yml"
    write_segments(CONFIG, LAYOUT, SEGMENTS, tmp_path / "files")
    for segment, _ in SEGMENTS:
        run(spark, IngestConfig(input_uri=str(tmp_path / "files" / segment / "topics"),
                                bronze_schema="gen_files", sources_yml=sources))
    summary = run_kafka(spark, KafkaIngestConfig(
        source=KafkaSource(bootstrap_servers=kafka, topic_pattern=re.escape(TOPIC)),
        bronze_schema="gen_kafka", sources_yml=sources, checkpoint=str(run_dir / "checkpoints" / "generator"),
    ))
    assert summary.quarantined == 0, summary.render()
    columns = "_topic, _partition, _offset, _shape, _op, _deleted, _source_lsn, _source_ts_ms, _source_tx_id, " \
              "_ts_ms, _before, _after, _source"
    table = "bench_public_orders"
    from_files = spark.sql(f"select {columns} from gen_files.{table}")
    from_kafka = spark.sql(f"select {columns} from gen_kafka.{table}")
    expected = [row.asDict() for row in from_files.collect()]
    assert len(expected) == 3_000  # every event once; tombstones carry none
    problems = diff("bronze from Kafka vs from files", expected, [row.asDict() for row in from_kafka.collect()],
                    ["_topic", "_partition", "_offset"])
    assert not problems, "\n".join(problems)
