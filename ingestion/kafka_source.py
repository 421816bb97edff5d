"""Extract from Kafka: Debezium topics read with Spark Structured Streaming.

The stream is consumed with `trigger(availableNow=True)`: every run processes what the
topics hold at its start and stops, so a scheduler (cron, an orchestrator) can run it.
Progress is the streaming checkpoint; a crash between a bronze write and the
checkpoint commit replays that micro-batch, and the keyed duplicate-drop inserts
(bronze key = topic, partition, offset) make the replay add nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from core.identifiers import TableNameError
from ingestion.errors import UsageError
from ingestion.naming import table_collisions, table_for_topic

# Consumer settings taken from the environment, so secrets (e.g. sasl.jaas.config)
# never appear on a command line: CDC_KAFKA_OPT_SASL_JAAS_CONFIG -> kafka.sasl.jaas.config
ENV_OPTION_PREFIX = "CDC_KAFKA_OPT_"


@dataclass(frozen=True)
class KafkaSource:
    bootstrap_servers: str
    topic_pattern: str  # Java regex, e.g. `pagila\.public\..*`, as Kafka's subscribePattern
    starting_offsets: str = "earliest"
    max_offsets_per_batch: int | None = None
    options: dict[str, str] = field(default_factory=dict)  # extra `kafka.*` consumer settings
    value_format: str = "json"  # VALUE_FORMATS: how record values (and keys) are serialized


# json: JsonConverter text (schemas on or off); avro: the schema registry wire format.
VALUE_FORMATS = ("json", "avro")


def validate(source: KafkaSource) -> None:
    if not source.bootstrap_servers.strip():
        raise UsageError("--kafka-bootstrap-servers is empty: give host:port[,host:port...]")
    try:
        re.compile(source.topic_pattern)
    except re.error as exc:
        raise UsageError(f"--topic-pattern {source.topic_pattern!r} is not a valid regular expression: {exc}") from exc
    if source.starting_offsets not in ("earliest", "latest"):
        raise UsageError(f"--starting-offsets must be earliest or latest, not {source.starting_offsets!r}")
    if source.max_offsets_per_batch is not None and source.max_offsets_per_batch <= 0:
        raise UsageError("--max-offsets-per-batch must be a positive number")
    if source.value_format not in VALUE_FORMATS:
        raise UsageError(f"--value-format must be one of {', '.join(VALUE_FORMATS)}, not {source.value_format!r}")


def env_options(environ: dict[str, str] | None = None) -> dict[str, str]:
    """`kafka.*` consumer options from CDC_KAFKA_OPT_* environment variables."""
    environ = dict(os.environ) if environ is None else environ
    return {
        "kafka." + name[len(ENV_OPTION_PREFIX):].lower().replace("_", "."): value
        for name, value in environ.items()
        if name.startswith(ENV_OPTION_PREFIX) and len(name) > len(ENV_OPTION_PREFIX)
    }


def default_checkpoint(lakehouse_dir: Path, bronze_schema: str, source: KafkaSource) -> Path:
    """One checkpoint per (bronze schema, brokers, topic pattern): a new pattern starts from
    the beginning of its topics, and the keyed inserts drop what bronze already has."""
    digest = hashlib.sha1(f"{source.bootstrap_servers}|{source.topic_pattern}".encode()).hexdigest()[:12]
    return lakehouse_dir / "checkpoints" / f"kafka-{bronze_schema}-{digest}"


def read_stream(spark: SparkSession, source: KafkaSource) -> DataFrame:
    """The raw Kafka records (topic, partition, offset, value and key: text, or bytes for
    `value_format` avro) as a streaming DataFrame; the key fills in a delete whose value
    lacks it (transform.fill_key_from_record_key)."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribePattern", source.topic_pattern)
        .option("startingOffsets", source.starting_offsets)
        # Records deleted by retention before we read them are lost data: stop, do not skip.
        .option("failOnDataLoss", "true")
    )
    if source.value_format == "avro":
        # Apicurio's converter may put the schema id in the headers (avro_wire.from_apicurio_headers)
        reader = reader.option("includeHeaders", "true")
    if source.max_offsets_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(source.max_offsets_per_batch))
    for key, value in {**env_options(), **source.options}.items():
        reader = reader.option(key, value)
    return reader.load().select(
        F.col("topic").alias("_topic"),
        F.col("partition").cast("int").alias("_partition"),
        F.col("offset").cast("bigint").alias("_offset"),
        *((F.col("value"), F.col("key"), F.col("headers")) if source.value_format == "avro" else (
            F.col("value").cast("string").alias("value"), F.col("key").cast("string").alias("key"))),
    )


def record_uri(topic: Column, partition: Column, offset: Column) -> Column:
    """Where a record came from, in the `_source_file` column: kafka:<topic>/<partition>/<offset>."""
    return F.format_string("kafka:%s/%d/%d", topic, partition, offset)


def topic_tables(topics: list[str]) -> dict[str, tuple[str | None, str | None]]:
    """topic -> (bronze table, error) for the topics of one micro-batch; topics that
    map to one table are all refused (see naming.table_collisions)."""
    result: dict[str, tuple[str | None, str | None]] = {}
    collisions = table_collisions(topics)
    for topic in topics:
        if topic in collisions:
            result[topic] = (None, collisions[topic])
            continue
        try:
            result[topic] = (table_for_topic(topic), None)
        except TableNameError as exc:
            result[topic] = (None, f"topic {topic!r} cannot be mapped to a bronze table name: {exc}")
    return result


def bytes_by_topic(records: DataFrame) -> DataFrame:
    """`_topic`, `bytes`: the record values' bytes per topic of a micro-batch (as the sink
    would have written them), which pick bulk_insert for large shares (load.use_bulk_insert)."""
    return records.groupBy("_topic").agg(F.sum(F.coalesce(F.octet_length("value"), F.lit(0))).alias("bytes"))


def to_lines(records: DataFrame, tables: dict[str, tuple[str | None, str | None]]) -> DataFrame:
    """Kafka records in the shape `transform.prepare` takes (what `attach_file_info` gives
    for sink files): each record is a one-line source named kafka:<topic>/<partition>/<offset>.
    A null value (Kafka tombstone) becomes an empty line, which the transform counts as a tombstone.
    A `_wire_error` column (avro_wire.decode_records) quarantines its record with that reason."""
    mapping = records.sparkSession.createDataFrame(
        [(topic, table, error) for topic, (table, error) in tables.items()],
        "_topic string, _table string, _file_error string",
    )
    return records.join(F.broadcast(mapping), "_topic", "left").select(
        record_uri(F.col("_topic"), F.col("_partition"), F.col("_offset")).alias("_source_file"),
        F.lit(1).alias("_source_line"),
        "_topic",
        "_partition",
        "_offset",
        "_table",
        (F.coalesce("_file_error", "_wire_error") if "_wire_error" in records.columns else F.col("_file_error"))
        .alias("_file_error"),
        F.coalesce(F.col("value"), F.lit("")).alias("line"),
        *([F.col("key").alias("_key")] if "key" in records.columns else []),
    )

