"""One ingestion run from Kafka: a Structured Streaming query with an availableNow trigger.

Each micro-batch goes through the same transform as sink files (parse, extract the
Debezium fields, classify) and the same keyed writes (quarantine, then bronze); the
checkpoint commit after the batch is what marks its offsets done. With value format
avro, a batch's records are first rendered as JsonConverter JSON (ingestion.avro_wire)
with the writer schemas fetched by id before anything is written, so a schema that
cannot be had fails the batch with nothing of it written or committed.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from pyspark import StorageLevel
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from core.identifiers import qualified
from core.spark import session_settings
from ingestion import avro_wire, kafka_source, load, transform
from ingestion.errors import SchemaRegistryError
from ingestion.load import QUARANTINE_TABLE, validate_bronze_schema, write_tables
from ingestion.pipeline import CACHE_SETTINGS, log_quarantine
from ingestion.registry import SchemaRegistryClient
from ingestion.sources import default_sources_yml, load_primary_keys
from ingestion.summary import SAMPLES_PER_TOPIC, RunSummary, TableSummary, newest_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaIngestConfig:
    source: kafka_source.KafkaSource
    bronze_schema: str = "bronze"
    sources_yml: Path | None = None
    checkpoint: str | None = None  # any Hadoop path; default under $CDC_LAKEHOUSE_DIR/checkpoints
    max_record_bytes: int = transform.MAX_RECORD_BYTES  # larger records go to quarantine
    registry: SchemaRegistryClient | None = None  # value format avro: from CDC_SCHEMA_REGISTRY_URL if unset


def checkpoint_location(config: KafkaIngestConfig) -> str:
    if config.checkpoint:
        return config.checkpoint
    lakehouse = Path(os.environ.get("CDC_LAKEHOUSE_DIR", "lakehouse")).resolve()
    return str(kafka_source.default_checkpoint(lakehouse, config.bronze_schema, config.source))


def _merge(summary: RunSummary, batch: list[TableSummary]) -> None:
    for entry in batch:
        known = next((t for t in summary.tables if t.table == entry.table), None)
        if known is None:
            summary.tables.append(entry)
            continue
        known.events_read += entry.events_read
        known.landed += entry.landed
        known.held += entry.held
        known.quarantined += entry.quarantined
        known.tombstones += entry.tombstones
        known.skipped += entry.skipped
        for op, count in entry.ops.items():
            known.ops[op] = known.ops.get(op, 0) + count
        known.newest_source_ts_ms = newest_of(known.newest_source_ts_ms, entry.newest_source_ts_ms)
    summary.tables.sort(key=lambda t: t.table)


def run_kafka(spark: SparkSession, config: KafkaIngestConfig) -> RunSummary:
    """Land every record the matching topics hold now; returns the per-table summary.
    Runs into one bronze schema are serialized: a second one raises RunLockedError."""
    validate_bronze_schema(config.bronze_schema)
    kafka_source.validate(config.source)
    if config.source.value_format == "avro" and config.registry is None:
        config = replace(config, registry=SchemaRegistryClient.from_env())
    with load.one_writer(spark, config.bronze_schema):
        return _run_kafka(spark, config)


def writer_schemas(records: DataFrame, registry: SchemaRegistryClient) -> dict[int, str]:
    """Every schema id the wire-format values and keys of `records` name -> its writer
    schema, each fetched once. A schema that cannot be had raises SchemaRegistryError
    naming the first record (topic, partition, offset) that needs it and the id."""
    positions = avro_wire.schema_positions(records, "value").unionByName(
        avro_wire.schema_positions(records, "key")).collect()
    schemas: dict[int, str] = {}
    for row in sorted(positions, key=lambda r: (r["topic"], r["partition"], r["offset"])):
        if row["schema_id"] in schemas:
            continue
        try:
            schemas[row["schema_id"]] = registry.schema(row["schema_id"])
        except SchemaRegistryError as exc:
            raise type(exc)(
                f"topic {row['topic']} partition {row['partition']} offset {row['offset']}: schema id "
                f"{row['schema_id']}: {exc}. Nothing of this micro-batch was written and its offsets are not "
                "committed: the next run starts from it") from exc
    return schemas


def _run_kafka(spark: SparkSession, config: KafkaIngestConfig) -> RunSummary:
    keys = load_primary_keys(config.sources_yml or default_sources_yml())
    schema = config.bronze_schema
    load.ensure_schema(spark, schema)
    summary = RunSummary(batches=0)
    failures: list[Exception] = []  # the batch's own error, re-raised after the query stops

    def write_batch(records: DataFrame, batch_id: int) -> None:
        # foreachBatch hands over a cloned session: temp views must be made and read in it.
        with session_settings(records.sparkSession, CACHE_SETTINGS):  # read when the caches are built
            try:
                land_batch(records, batch_id)
            except SchemaRegistryError as exc:
                failures.append(exc)
                raise

    def land_batch(records: DataFrame, batch_id: int) -> None:
        batch_spark = records.sparkSession
        if "headers" in records.columns:  # Avro: ids in Apicurio's headers -> the wire format
            records = avro_wire.from_apicurio_headers(records)
        records = records.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            value_bytes = {row["_topic"]: row["bytes"] for row in kafka_source.bytes_by_topic(records).collect()}
            if not value_bytes:
                return
            tables = kafka_source.topic_tables(sorted(value_bytes))
            # a large share goes in with bulk_insert, as a large share of sink files does
            input_bytes: dict[str, int] = {}
            for topic, (table, error) in tables.items():
                if table and not error:
                    input_bytes[table] = input_bytes.get(table, 0) + value_bytes[topic]
            key_map = {
                topic: columns
                for topic, (table, _) in tables.items()
                if (columns := keys.lookup(topic, table)) is not None
            }
            updated_at = {
                topic: column
                for topic, (table, _) in tables.items()
                if (column := keys.updated_at(topic, table)) is not None
            }
            ingested_at = datetime.now(timezone.utc).replace(tzinfo=None)  # session time zone is UTC
            rendered = records
            if config.source.value_format == "avro":
                assert config.registry is not None
                rendered = avro_wire.decode_records(records, writer_schemas(records, config.registry))
            classified = transform.for_landing(
                transform.prepare(kafka_source.to_lines(rendered, tables), key_map, config.max_record_bytes,
                                  updated_at))
            classified = classified.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                counts = _batch_counts(classified, tables, key_map)
                if any(t.quarantined for t in counts):
                    samples = transform.quarantine_samples(classified, SAMPLES_PER_TOPIC).collect()
                    log_quarantine(samples, RunSummary(tables=counts))
                write_tables(batch_spark, schema, classified, set(input_bytes), counts, ingested_at,
                             input_bytes=input_bytes)
            finally:
                classified.unpersist()
            _merge(summary, counts)
            summary.batches = (summary.batches or 0) + 1
            log.info("micro-batch %d: %s", batch_id, ", ".join(f"{t.table} +{t.landed}" for t in counts))
        finally:
            records.unpersist()

    location = checkpoint_location(config)
    log.info("reading topics matching %r from %s (checkpoint %s)",
             config.source.topic_pattern, config.source.bootstrap_servers, location)
    query = (
        kafka_source.read_stream(spark, config.source)
        .writeStream.queryName(f"cdc_ingest_{schema}")
        .foreachBatch(write_batch)
        .option("checkpointLocation", location)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()  # re-raises the batch's exception (StreamingQueryException)
    except StreamingQueryException:
        if failures:
            raise failures[0] from None
        raise
    # The batches wrote through foreachBatch's cloned session; this session may hold the
    # tables' relations (file listings) from earlier reads, e.g. a dbt build in the same
    # process, and would keep reading the old snapshot. Refresh what was written.
    for name in sorted({t.table for t in summary.tables if not t.table.startswith("(")} | {QUARANTINE_TABLE}):
        if load.table_exists(spark, schema, name):
            spark.catalog.refreshTable(qualified(schema, name))
    return summary


def _batch_counts(
    classified: DataFrame, tables: dict[str, tuple[str | None, str | None]], key_map: dict[str, list[str]]
) -> list[TableSummary]:
    stats = {row["_topic"]: row for row in transform.file_stats(classified, by="_topic").collect()}
    result = []
    for topic, (table, _) in sorted(tables.items()):
        row = stats.get(topic)
        entry = TableSummary(table=table or f"(unmappable: {topic})", topic=topic, key_checked=topic in key_map)
        if row is not None:
            entry.events_read = row["lines"]
            entry.landed = row["landed_count"]
            entry.quarantined = row["quarantined_count"]
            entry.tombstones = row["tombstone_count"]
            entry.skipped = row["skipped_count"]
            entry.count_accepted(row)
        result.append(entry)
    return result


__all__ = ["KafkaIngestConfig", "checkpoint_location", "run_kafka"]
