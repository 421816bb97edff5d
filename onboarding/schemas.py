"""Extract: each matching topic's upstream schema and key, from S3-sink files, Kafka, a
schema registry, or (records without a schema) the landed bronze rows.

Sink files are listed and read with the ingestion's own extract (`list_sink`,
`inspect`, `read_lines`, `read_key_lines`): of each partition only its oldest and
newest files, whose record value schemas (JsonConverter's `{"schema", "payload"}`
wrapper; an Avro file's header; parquet-avro's footer) and record keys are collected.
Kafka is read as the ingestion reads it (Spark's Kafka source, consumer settings from
CDC_KAFKA_OPT_*), a batch of each partition's newest records. The registry answers
`<topic>-value` and `<topic>-key` subjects (TopicNameStrategy).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from onboarding.errors import OnboardingError, OnboardingUsageError
from onboarding.types import Column, columns_of, connect_from_avro, infer_columns, key_fields, merged

log = logging.getLogger(__name__)

# Records read per Kafka partition, newest first.
KAFKA_SAMPLE = 200
# Row images of records without a schema kept per topic, and bronze rows read for them.
IMAGES = 500
WRAPPER_KEYS = ["payload", "schema"]
# Record keys read per keys file: the first key that is not null names the key's fields.
KEY_LINES = 20


@dataclass
class TopicSample:
    """What was read of one topic: its record value schemas (Connect, oldest first), its
    key's field names, row images of records without a schema, and where from."""

    topic: str
    origin: str
    value_schemas: list[dict[str, Any]] = field(default_factory=list)
    key: list[str] | None = None
    images: list[dict[str, Any]] = field(default_factory=list)
    schemaless: bool = False  # some record value carried no schema
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TopicSchema:
    """The columns and key onboarding declares for a topic, and where they came from."""

    topic: str
    columns: list[Column]
    key: list[str]
    origin: str
    problems: list[str]


def parse_json(text: str | None) -> Any:
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return None


def wrapped(value: Any) -> bool:
    """A JsonConverter value with schemas on: exactly `schema` and `payload`."""
    return isinstance(value, dict) and sorted(value) == WRAPPER_KEYS and isinstance(value["schema"], dict)


def row_image(value: dict[str, Any]) -> dict[str, Any] | None:
    """The row of a record value without a schema: the envelope's `after` (or `before`),
    or the flattened row's fields less the `__` ones."""
    if "op" in value and ("after" in value or "before" in value):
        image = value.get("after") or value.get("before")
        return image if isinstance(image, dict) else None
    if "ddl" in value or ("status" in value and "id" in value):
        return None  # schema change and transaction records hold no row
    return {k: v for k, v in value.items() if not k.startswith("__")}


def add_value(sample: TopicSample, value: Any) -> None:
    """One record value (parsed JSON) into the sample."""
    if value is None:
        return
    if wrapped(value):
        if not sample.value_schemas or sample.value_schemas[-1] != value["schema"]:
            sample.value_schemas.append(value["schema"])
        return
    if isinstance(value, dict):
        sample.schemaless = True
        image = row_image(value)
        if image is not None and len(sample.images) < IMAGES:
            sample.images.append(image)


def add_key(sample: TopicSample, key: Any) -> None:
    """One record key (parsed JSON) into the sample: its schema's fields, else its own."""
    if sample.key or key is None:
        return
    if wrapped(key):
        sample.key = key_fields(key["schema"]) or None
    elif isinstance(key, dict) and key:
        sample.key = list(key)


def topic_schema(sample: TopicSample, bronze: tuple[list[dict[str, Any]], bool] | None) -> TopicSchema:
    """The columns and key of a sample: from its value schemas; for records without one,
    from `bronze` (row images, and whether their values are all text) or else from the
    sample's own row images."""
    problems = list(sample.problems)
    origin = sample.origin
    if sample.value_schemas:
        columns = merged([columns_of(s) for s in sample.value_schemas])
        if not columns:
            problems.append("the record value schema holds no row (neither a Debezium envelope nor a flat row)")
        if sample.schemaless:
            problems.append("some record values carry no schema: the columns are the schema's")
    elif bronze is not None:
        images, values_are_text = bronze
        columns = infer_columns(images, values_are_text)
        origin += "; columns from the landed bronze rows (the records carry no schema)"
    elif sample.images:
        columns = infer_columns(sample.images)
        origin += "; columns from the records read (no schema, and no bronze table yet)"
    else:
        columns = []
        problems.append("no record with a row was read: nothing to take columns from")
    return TopicSchema(sample.topic, columns, list(sample.key or []), origin, problems)


# --- S3-sink files -------------------------------------------------------------------------

def read_sink(spark: Any, input_uri: str, topic_pattern: str) -> dict[str, TopicSample]:
    """Samples of the topics under `input_uri` whose folder name fully matches `topic_pattern`."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    from ingestion import extract
    from ingestion.errors import InputNotFoundError
    from ingestion.formats import AVRO, JSON, PARQUET
    from ingestion.formats.parquet_files import avro_writer_schema

    try:
        listing = extract.list_sink(spark, input_uri, topics=topic_pattern)
    except InputNotFoundError as exc:
        raise OnboardingUsageError(str(exc)) from None
    samples: dict[str, TopicSample] = {}
    chosen: list[extract.SourceFile] = []
    key_files: dict[str, list[extract.SourceFile]] = {}
    by_partition: dict[tuple[str, int | None], list[extract.SourceFile]] = {}
    for f in listing.files:
        name = f.read_path.rsplit("/", 1)[-1]
        if re.search(r"\+\d+\.keys\.(avro|[a-z0-9]*\.?parquet)$", name):
            key_files.setdefault(f.topic, []).append(f)
        elif f.read and f.error is None and f.start_offset is not None:
            by_partition.setdefault((f.topic, f.partition), []).append(f)
    for (topic, _), files in sorted(by_partition.items(), key=lambda item: (item[0][0], item[0][1] or -1)):
        files.sort(key=lambda f: f.start_offset or 0)
        chosen += [files[0]] + ([files[-1]] if len(files) > 1 else [])
        samples.setdefault(topic, TopicSample(topic, f"sink files under {input_uri}"))
    checked = extract.inspect(spark, chosen)
    order = {f.uri: (f.start_offset or 0) for f in checked}
    for f in sorted(checked, key=lambda f: (f.topic, f.start_offset or 0)):
        sample = samples[f.topic]
        if not f.read:
            sample.problems.append(f"not read: {f.error}")
        elif f.format == AVRO:
            _add_schema(sample, connect_from_avro(json.loads(f.reader_schema or "null")))
        elif f.format == PARQUET:
            schema = avro_writer_schema(spark, f.uri)
            if schema is None:
                sample.problems.append(f"{f.uri}: a Parquet file without parquet-avro's writer schema in its footer")
            else:
                _add_schema(sample, connect_from_avro(json.loads(schema)))
    json_files = [f for f in checked if f.read and f.format == JSON]
    if json_files:
        lines = extract.read_lines(spark, json_files)
        parsed = F.from_json("line", "map<string,string>")
        is_wrapped = F.array_sort(F.map_keys(parsed)) == F.array(*[F.lit(k) for k in WRAPPER_KEYS])
        schemas = (lines.where(is_wrapped).select("_source_file", "_row_id", parsed["schema"].alias("schema"))
                   .groupBy("_source_file", "schema").agg(F.max("_row_id").alias("last")).collect())
        for row in sorted(schemas, key=lambda r: (order.get(r["_source_file"], 0), r["last"])):
            topic = next(f.topic for f in json_files if f.uri == row["_source_file"])
            add_value(samples[topic], {"schema": parse_json(row["schema"]), "payload": None})
        newest_first = Window.partitionBy("_source_file").orderBy(F.col("_row_id").desc())
        plain = (lines.where(~is_wrapped & F.col("line").startswith("{"))
                 .withColumn("_n", F.row_number().over(newest_first)).where(F.col("_n") <= IMAGES)
                 .select("_source_file", "line").collect())
        for row in plain:
            topic = next(f.topic for f in json_files if f.uri == row["_source_file"])
            add_value(samples[topic], parse_json(row["line"]))
        keyed = [f for f in json_files if f.keys_read_path is not None]
        if keyed:
            first = Window.partitionBy("_source_file").orderBy("_block", "_row_id")
            key_lines = extract.read_key_lines(spark, keyed).withColumn("_n", F.row_number().over(first))
            for row in key_lines.where(F.col("_n") <= KEY_LINES).collect():
                topic = next(f.topic for f in keyed if f.uri == row["_source_file"])
                add_key(samples[topic], parse_json(row["line"]))
    for topic, files in key_files.items():
        if topic in samples and samples[topic].key is None:
            samples[topic].key = binary_key_fields(spark, files[0]) or None
    return samples


def _add_schema(sample: TopicSample, connect: dict[str, Any]) -> None:
    if not sample.value_schemas or sample.value_schemas[-1] != connect:
        sample.value_schemas.append(connect)


def binary_key_fields(spark: Any, keys_file: Any) -> list[str]:
    """The field names of an Avro or Parquet record keys file (`.keys.avro`, `.keys.parquet`),
    read from its schema alone."""
    kind = "avro" if keys_file.read_path.endswith(".avro") else "parquet"
    try:
        return list(spark.read.format(kind).load(keys_file.read_path).schema.fieldNames())
    except Exception as exc:  # noqa: BLE001 - py4j wraps the reader's error; the key is then unknown
        log.warning("record keys file %s: its schema does not read: %s", keys_file.uri, str(exc).splitlines()[0])
        return []


# --- Kafka ---------------------------------------------------------------------------------

def read_kafka(spark: Any, bootstrap_servers: str, topic_pattern: str, per_partition: int = KAFKA_SAMPLE
               ) -> dict[str, TopicSample]:
    """Samples of the topics matching the Java regex `topic_pattern`: each partition's
    newest `per_partition` records, read with one Spark Kafka batch query."""
    from pyspark.sql import functions as F

    from ingestion.kafka_source import env_options

    options = {"kafka.bootstrap.servers": bootstrap_servers, **env_options()}
    ranges = newest_offsets(spark, options, topic_pattern, per_partition)
    samples = {topic: TopicSample(topic, f"Kafka topic {topic} at {bootstrap_servers}") for topic in ranges}
    starting = {t: {str(p): start for p, (start, _) in parts.items()} for t, parts in ranges.items() if parts}
    ending = {t: {str(p): end for p, (_, end) in parts.items()} for t, parts in ranges.items() if parts}
    if not starting:
        return samples
    reader = spark.read.format("kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    records = (reader.option("assign", json.dumps({t: [int(p) for p in parts] for t, parts in starting.items()}))
               .option("startingOffsets", json.dumps(starting)).option("endingOffsets", json.dumps(ending))
               .load().select("topic", "offset", F.hex(F.substring("value", 1, 1)).alias("first_byte"),
                              F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value"))
               .orderBy("topic", "offset").collect())
    for row in records:
        sample = samples[row["topic"]]
        if row["first_byte"] == "00":
            problem = ("values in the schema registry wire format (Avro): read their schemas with "
                       "--schema-registry-url instead")
            if problem not in sample.problems:
                sample.problems.append(problem)
            continue
        add_value(sample, parse_json(row["value"]))
        add_key(sample, parse_json(row["key"]))
    return samples


def newest_offsets(spark: Any, options: dict[str, str], topic_pattern: str, per_partition: int
                   ) -> dict[str, dict[int, tuple[int, int]]]:
    """topic -> partition -> (start, end) offsets of its newest `per_partition` records,
    for the topics matching the Java regex, asked of the brokers with the Kafka client
    Spark's Kafka source carries (its consumer settings: `options` less `kafka.`)."""
    jvm = spark._jvm
    properties = jvm.java.util.Properties()
    for key, value in options.items():
        if key.startswith("kafka."):
            properties.setProperty(key[len("kafka."):], value)
    deserializer = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
    properties.setProperty("key.deserializer", deserializer)
    properties.setProperty("value.deserializer", deserializer)
    properties.setProperty("enable.auto.commit", "false")
    timeout = jvm.java.time.Duration.ofSeconds(30)
    pattern = jvm.java.util.regex.Pattern.compile(topic_pattern)
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(properties)
    try:
        topics = consumer.listTopics(timeout)
        partitions = jvm.java.util.ArrayList()
        for topic in sorted(topics.keySet()):
            if pattern.matcher(topic).matches():
                for info in topics.get(topic):
                    partitions.add(jvm.org.apache.kafka.common.TopicPartition(topic, info.partition()))
        beginning = consumer.beginningOffsets(partitions, timeout)
        end = consumer.endOffsets(partitions, timeout)
        ranges: dict[str, dict[int, tuple[int, int]]] = {}
        for partition in partitions:
            first, last = int(beginning.get(partition)), int(end.get(partition))
            ranges.setdefault(str(partition.topic()), {})
            if last > first:
                ranges[str(partition.topic())][int(partition.partition())] = (max(first, last - per_partition), last)
        return ranges
    except Exception as exc:  # noqa: BLE001 - py4j wraps the client's error
        raise OnboardingError(f"Kafka at {options.get('kafka.bootstrap.servers')}: {str(exc).splitlines()[0]}") from None
    finally:
        consumer.close()


# --- schema registry ---------------------------------------------------------------------

def read_registry(client: Any, topic_pattern: str) -> dict[str, TopicSample]:
    """Samples of the topics whose `<topic>-value` subject the registry holds and whose
    name fully matches `topic_pattern`: the latest value schema, the `<topic>-key` fields."""
    try:
        matcher = re.compile(topic_pattern)
    except re.error as exc:
        raise OnboardingUsageError(f"--topic-pattern {topic_pattern!r} is not a valid regular expression: {exc}") from None
    subjects = set(client.subjects())
    samples: dict[str, TopicSample] = {}
    for subject in sorted(subjects):
        topic = subject.removesuffix("-value")
        if not subject.endswith("-value") or not matcher.fullmatch(topic):
            continue
        sample = TopicSample(topic, f"schema registry {client.url}, subject {subject} (latest version)")
        sample.value_schemas.append(connect_from_avro(json.loads(client.latest_schema(subject))))
        if f"{topic}-key" in subjects:
            sample.key = key_fields(connect_from_avro(json.loads(client.latest_schema(f"{topic}-key")))) or None
        samples[topic] = sample
    return samples


# --- bronze ------------------------------------------------------------------------------

def bronze_images(spark: Any, schema: str, table: str, limit: int = IMAGES
                  ) -> tuple[list[dict[str, Any]], bool] | None:
    """Row images of a bronze table's newest events (`_after`, else `_before`) and
    whether they are all of flattened records (whose values bronze keeps as text); None
    when the table does not exist."""
    from core.identifiers import qualified

    if not spark.catalog.tableExists(f"{schema}.{table}"):
        return None
    rows = spark.sql(
        f"select _shape, coalesce(_after, _before) as image from {qualified(schema, table)} "
        f"where coalesce(_after, _before) is not null order by _offset desc limit {int(limit)}").collect()
    images = [image for row in rows if isinstance(image := parse_json(row["image"]), dict)]
    flattened = bool(rows) and all(row["_shape"] == "flattened" for row in rows)
    return images, flattened
