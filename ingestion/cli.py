"""Command line: `python -m ingestion` / `cdc-ingest`."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from core.cli import run_command
from core.exit_codes import EXIT_FAILURE, EXIT_LOCKED, EXIT_OK, EXIT_QUARANTINED, EXIT_USAGE
from core.lock import RunLockedError
from ingestion.errors import IngestionError, UsageError
from ingestion.pipeline import IngestConfig, RunSummary, default_sources_yml, run
from ingestion.transform import MAX_RECORD_BYTES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("ingestion")

EPILOG = f"""\
two sources, one of them per run:
  --input DIR_OR_URI        Kafka Connect S3-sink files (below)
  --kafka-bootstrap-servers HOST:PORT --topic-pattern REGEX
                            Debezium topics read directly with Spark Structured Streaming:
                            each run reads what the topics hold now and stops (availableNow);
                            the checkpoint remembers the offsets, so a record lands once
                            across runs and crashes. Consumer settings (e.g. SASL) come from
                            CDC_KAFKA_OPT_<NAME> environment variables (-> kafka.<name>).
                            A record's `_source_file` is kafka:<topic>/<partition>/<offset>.

input layout (Kafka Connect S3 sink: JsonFormat, AvroFormat or ParquetFormat, mixed at will):
  INPUT/<topic>/partition=<n>/<topic>+<n>+<startOffset>.json   (JSON lines, one record value per line)
  INPUT/<topic>/partition=<n>/<topic>+<n>+<startOffset>.avro   (Avro container file)
  INPUT/<topic>/partition=<n>/<topic>+<n>+<startOffset>[.<codec>].parquet
  line or record i (0-based, tombstones included) of a file has Kafka offset startOffset + i;
  Avro and Parquet records are read as the JSON JsonConverter writes for them.

what it writes (Hudi COPY_ON_WRITE tables in the bronze schema):
  <schema>.<table>            one per topic; table = topic lower-cased, other chars -> '_'
  <schema>._quarantine        records that cannot be landed, with the reason and raw line
  <schema>._ingested_files    ledger of finished files; they are skipped on later runs
  Debezium envelopes and ExtractNewRecordState-flattened records are accepted, with or
  without the JsonConverter {{schema, payload}} wrapper; tombstones are counted, not landed.
  Skipped and counted ("skipped by rule:"): Debezium heartbeat topics (__debezium-heartbeat*),
  Hadoop bookkeeping names (starting with . or _), ._COPYING_ uploads, entries outside
  <topic>/partition=<n>/; identical copies of an offset in two files land once.

exit codes:
  {EXIT_OK}  ok
  {EXIT_QUARANTINED}  the run finished but some records were quarantined
  {EXIT_USAGE}  usage error (bad arguments)
  {EXIT_LOCKED}  another ingestion run is landing into the same bronze schema (nothing done)
  {EXIT_FAILURE}  failure (nothing after the failing step was written; rerun is safe)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-ingest",
        description="Land Debezium change events from Kafka topics or Kafka Connect S3-sink files into bronze Hudi tables.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--input", metavar="DIR_OR_URI",
        help="the sink's `topics/` folder: a local path or any Hadoop URI (s3a://, hdfs://, file:...)",
    )
    source.add_argument(
        "--kafka-bootstrap-servers", metavar="HOST:PORT[,...]",
        help="read Debezium topics from these Kafka brokers instead of sink files",
    )
    kafka = parser.add_argument_group("Kafka source (with --kafka-bootstrap-servers)")
    kafka.add_argument(
        "--topic-pattern", metavar="REGEX",
        help=r"topics to read, a Java regex such as 'pagila\.public\..*' (required with Kafka)",
    )
    kafka.add_argument(
        "--checkpoint", metavar="PATH",
        help="streaming checkpoint (default: $CDC_LAKEHOUSE_DIR/checkpoints/kafka-<schema>-<hash of brokers+pattern>)",
    )
    kafka.add_argument(
        "--starting-offsets", default="earliest", choices=["earliest", "latest"],
        help="where a new checkpoint starts (default: earliest)",
    )
    kafka.add_argument(
        "--value-format", default="json", choices=["json", "avro"],
        help="json: JsonConverter text, schemas on or off (default); avro: the schema registry wire format "
        "(byte 0, 4-byte schema id, Avro), schemas fetched by id from $CDC_SCHEMA_REGISTRY_URL "
        "(Confluent-compatible API; optional CDC_SCHEMA_REGISTRY_USER / CDC_SCHEMA_REGISTRY_PASSWORD)",
    )
    kafka.add_argument(
        "--max-offsets-per-batch", type=int, default=None, metavar="N",
        help="split a large backlog into micro-batches of at most N records (default: one batch)",
    )
    parser.add_argument(
        "--target", default="local", choices=["local", "none"],
        help="`local`: start the embedded Spark from profiles/profiles.yml (default); "
        "`none`: use the session spark-submit created",
    )
    parser.add_argument("--bronze-schema", default="bronze", help="schema (database) of the bronze tables (default: bronze)")
    parser.add_argument(
        "--sources-yml", type=Path, default=None, metavar="PATH",
        help=f"dbt sources YAML declaring primary keys (source `bronze`, meta.topic/meta.primary_key); "
        f"default: {default_sources_yml()}; a missing file only disables the key check",
    )
    parser.add_argument(
        "--topics", default=None, metavar="REGEX",
        help="only topics whose folder name fully matches REGEX (default: all)",
    )
    parser.add_argument(
        "--reprocess", action="store_true",
        help="ignore the ledger and read every file again (keyed inserts drop what is already there)",
    )
    parser.add_argument(
        "--max-record-bytes", type=int, default=MAX_RECORD_BYTES, metavar="N",
        help=f"a record (line) longer than N bytes goes to quarantine (default: {MAX_RECORD_BYTES})",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(build_parser(), argv, _run,
                       {UsageError: EXIT_USAGE, RunLockedError: EXIT_LOCKED, IngestionError: EXIT_FAILURE},
                       "ingestion")


def _run(args: argparse.Namespace) -> int:
    run_once = make_run(args)
    from core.spark import get_session

    summary = run_once(get_session(None if args.target == "none" else args.target))
    print(summary.render())
    return EXIT_QUARANTINED if summary.quarantined else EXIT_OK


def make_run(args: argparse.Namespace) -> Callable[[SparkSession], RunSummary]:
    """The run the arguments ask for, checked before Spark starts."""
    if args.input is not None:
        if args.topic_pattern or args.checkpoint:
            raise UsageError("--topic-pattern and --checkpoint go with --kafka-bootstrap-servers, not --input")
        if args.value_format != "json":
            raise UsageError("--value-format goes with --kafka-bootstrap-servers; sink files are read by their name")
        config = IngestConfig(
            input_uri=args.input,
            bronze_schema=args.bronze_schema,
            sources_yml=args.sources_yml,
            topics=args.topics,
            reprocess=args.reprocess,
            max_record_bytes=args.max_record_bytes,
        )
        return lambda spark: run(spark, config)
    if not args.topic_pattern:
        raise UsageError("--kafka-bootstrap-servers needs --topic-pattern REGEX (e.g. 'pagila\\.public\\..*')")
    if args.topics or args.reprocess:
        raise UsageError("--topics and --reprocess go with --input; with Kafka use --topic-pattern and a new --checkpoint")
    from ingestion.kafka_pipeline import KafkaIngestConfig, run_kafka
    from ingestion.kafka_source import KafkaSource, validate

    kafka_config = KafkaIngestConfig(
        source=KafkaSource(
            bootstrap_servers=args.kafka_bootstrap_servers,
            topic_pattern=args.topic_pattern,
            starting_offsets=args.starting_offsets,
            max_offsets_per_batch=args.max_offsets_per_batch,
            value_format=args.value_format,
        ),
        bronze_schema=args.bronze_schema,
        sources_yml=args.sources_yml,
        checkpoint=args.checkpoint,
        max_record_bytes=args.max_record_bytes,
    )
    validate(kafka_config.source)
    if kafka_config.source.value_format == "avro":
        from dataclasses import replace

        from ingestion.registry import SchemaRegistryClient

        kafka_config = replace(kafka_config, registry=SchemaRegistryClient.from_env())  # checked before Spark starts
    return lambda spark: run_kafka(spark, kafka_config)


if __name__ == "__main__":
    sys.exit(main())
