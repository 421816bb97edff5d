"""One ingestion run: wires extract -> transform -> load and reports what happened.

Write order is quarantine, bronze tables, then the file ledger; a crash before the
ledger write means those files are read again next run, and the keyed
duplicate-drop inserts keep bronze and quarantine exact.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping
from urllib.parse import unquote

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from core.spark import session_settings
from core.timing import timed
from ingestion import extract, formats, load, naming, transform
from ingestion.errors import UsageError
from ingestion.sources import PrimaryKeys, default_sources_yml, load_primary_keys
from ingestion.summary import SAMPLES_PER_TOPIC, RunSummary, file_stats, summarize

log = logging.getLogger(__name__)

# For the cache a run keeps between its counts and its writes. Spark's columnar cache
# compression saved little memory here and made the cache slower to build
# (docs/decisions/bronze-bulk-insert-and-codecs.md).
# Parquet sink files are read with a schema that takes decimals as their stored bytes
# (ingestion.formats.parquet_files), which only Spark's vectorized reader honours: the row
# reader converts the file's own type first and fails on Connect's 64-digit decimals. A
# Hudi read earlier in the same session (the gold models' incremental reads) leaves it off.
CACHE_SETTINGS = {"spark.sql.inMemoryColumnarStorage.compressed": "false",
                  "spark.sql.parquet.enableVectorizedReader": "true"}
# For the action that builds that cache. With adaptive execution, Spark 3.5 builds a cache
# in a job of its own and then reads it back for the action; without, one stage builds
# it and counts it. The counts are a few rows per file split: one reducer is plenty
# (docs/decisions/ingestion-one-pass.md).
ONE_PASS_SETTINGS = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}


@dataclass(frozen=True)
class IngestConfig:
    input_uri: str
    bronze_schema: str = "bronze"
    sources_yml: Path | None = None
    topics: str | None = None
    reprocess: bool = False  # ignore the ledger (replay everything; dup-drop keeps tables exact)
    max_record_bytes: int = transform.MAX_RECORD_BYTES  # larger records go to quarantine


def _validate(config: IngestConfig) -> None:
    load.validate_bronze_schema(config.bronze_schema)
    if config.max_record_bytes < 1:
        raise UsageError(f"--max-record-bytes must be positive, got {config.max_record_bytes}")
    if config.topics is not None:
        try:
            re.compile(config.topics)
        except re.error as exc:
            raise UsageError(f"--topics {config.topics!r} is not a valid regular expression: {exc}") from exc


def log_quarantine(samples: list, summary: RunSummary) -> None:
    """Logs each sample quarantined line and how many more each topic had, under this
    module's logger (`ingestion.pipeline`, which alerts match) for file and Kafka runs."""
    by_topic: dict[str, list] = {}
    for row in samples:
        by_topic.setdefault(row["_topic"], []).append(row)
    for table in summary.tables:
        if not table.quarantined:
            continue
        for row in by_topic.get(table.topic, []):
            log.warning("quarantined %s line %s: %s", row["_source_file"], row["_source_line"], row["reason"])
        more = table.quarantined - len(by_topic.get(table.topic, []))
        if more > 0:
            log.warning("... and %d more quarantined record(s) of topic %s", more, table.topic)


def _reject_table_collisions(files: list[extract.SourceFile], landed: set[str]) -> list[extract.SourceFile]:
    """Files of a topic whose bronze table another topic already uses (or would use)
    get a file-level error: their records go to quarantine instead of mixing."""
    errors = naming.table_collisions({f.topic for f in files} | landed)
    return [replace(f, table=None, error=errors[f.topic]) if f.topic in errors and not f.error else f for f in files]


def _key_map(files: list[extract.SourceFile], keys: PrimaryKeys) -> dict[str, list[str]]:
    found = {f.topic: keys.lookup(f.topic, f.table) for f in files}
    return {topic: columns for topic, columns in found.items() if columns is not None}


def run(spark: SparkSession, config: IngestConfig) -> RunSummary:
    """Ingest every new sink file under `config.input_uri`; returns the per-table summary.
    Runs into one bronze schema are serialized: a second one raises RunLockedError."""
    _validate(config)
    with load.one_writer(spark, config.bronze_schema):
        return _run(spark, config)


def _run(spark: SparkSession, config: IngestConfig) -> RunSummary:
    sources_yml = config.sources_yml or default_sources_yml()
    keys = load_primary_keys(sources_yml)
    schema = config.bronze_schema

    summary = RunSummary(reprocess=config.reprocess)
    with timed(summary.seconds, "listing"):
        listing = extract.list_sink(spark, config.input_uri, config.topics)
    files = listing.files
    with timed(summary.seconds, "ledger_read"):
        load.ensure_schema(spark, schema)
        done, landed_topics = load.read_ledger(spark, schema, load.LEDGER_TABLE)
    if config.reprocess:
        done = set()
    new_files = _reject_table_collisions([f for f in files if f.uri not in done], landed_topics)
    summary.files_skipped, summary.skipped = len(files) - len(new_files), _count_skipped(listing.skipped)
    with timed(summary.seconds, "inspection"):
        new_files = extract.within_offset_range(spark, extract.inspect(spark, new_files))
    if not new_files:
        log.info("no new files under %s (%d already ingested)", config.input_uri, summary.files_skipped)
        return summary
    log.info("reading %d new file(s) under %s", len(new_files), config.input_uri)

    ingested_at = datetime.now(timezone.utc).replace(tzinfo=None)  # session time zone is UTC
    key_map = _key_map(new_files, keys)
    catalog = extract.catalog_frame(spark, new_files)
    lines = transform.attach_file_info(transform.split_lines(_read_lines(spark, new_files), catalog), catalog)
    updated_at = {f.topic: column for f in new_files if (column := keys.updated_at(f.topic, f.table)) is not None}
    prepared = transform.prepare(lines, key_map, config.max_record_bytes, updated_at)
    classified = transform.for_landing(prepared, transform.SPLIT_POSITION)
    input_bytes = _input_bytes(new_files)  # its keys: the bronze tables the run writes
    tables = [(name, transform.BRONZE_COLUMNS, transform.BRONZE_KEY) for name in sorted(input_bytes)]
    # The setting is read when the cache is built, at the first action: hold it until unpersist.
    with session_settings(spark, CACHE_SETTINGS), load.created_alongside(
        spark, schema, [*tables, (load.LEDGER_TABLE, load.LEDGER_COLUMNS, load.LEDGER_KEY)]
    ) as ensured:
        cached = [classified.persist(StorageLevel.MEMORY_AND_DISK)]
        try:
            # One stage builds the cache and counts it per file split: the lines are numbered
            # from those counts, so the files are read once (docs/decisions/ingestion-one-pass.md).
            with timed(summary.seconds, "reading"), session_settings(spark, ONE_PASS_SETTINGS):
                splits = transform.split_stats(cached[0]).collect()
            stats = file_stats(splits)
            input_bytes = _input_bytes(new_files, splits)
            placed = transform.place_lines(cached[0], splits, new_files)
            if extract.share_offsets(new_files, {uri: row["lines"] for uri, row in stats.items()}):
                cached.pop().unpersist()
                with timed(summary.seconds, "reading"):
                    placed, stats = _resolve_copies(spark, prepared, new_files, cached)
            summary.tables = summarize(new_files, stats, key_map)
            samples = transform.quarantine_samples(placed, SAMPLES_PER_TOPIC).collect() if summary.quarantined else []
            log_quarantine(samples, summary)

            with timed(summary.seconds, "bronze_writes"):
                created = ensured()
                load.write_tables(spark, schema, placed, set(input_bytes), summary.tables, ingested_at,
                                  input_bytes=input_bytes, created=created)
            # Unless replaying, the ledger holds none of these files: they are the ones this
            # run found missing from it, and runs into a schema do not overlap (run()).
            with timed(summary.seconds, "ledger_write"):
                load.write_ledger(spark, schema, new_files, stats, ingested_at,
                                  created[load.LEDGER_TABLE] or not config.reprocess)
        finally:
            for frame in cached:
                frame.unpersist()
    log.debug("ingestion steps: %s", ", ".join(f"{step} {value:.2f}s" for step, value in summary.seconds.items()))
    return summary


def _read_lines(spark: SparkSession, files: list[extract.SourceFile]) -> DataFrame:
    """extract.read_lines of `files`, each line with its record key when its file has a
    record keys file (transform.fill_record_keys); each file is read once."""
    keyed = [f for f in files if f.read and f.keys_read_path is not None]
    if not keyed:
        return extract.read_lines(spark, files)
    others = [f for f in files if f not in keyed]
    names = {f.uri: unquote((f.keys_uri or "").rsplit("/", 1)[-1]) for f in keyed}
    with_keys = transform.fill_record_keys(extract.read_lines(spark, keyed), extract.read_key_lines(spark, keyed), names)
    return with_keys.unionByName(transform.without_record_keys(extract.read_lines(spark, others)))


def _resolve_copies(
    spark: SparkSession, prepared: DataFrame, files: list[extract.SourceFile], cached: list[DataFrame]
) -> tuple[DataFrame, dict[str, dict[str, int]]]:
    """(placed lines, per-file counts) of a run whose files share offsets, with the copies
    resolved (transform.resolve_shared_offsets). The first cache kept the raw line of
    quarantined records only, and a conflicting copy goes to quarantine whole: the files
    are read again keeping every line. The frames it caches are added to `cached`."""
    classified = transform.for_landing(prepared, transform.SPLIT_POSITION, every_raw=True)
    cached.append(classified.persist(StorageLevel.MEMORY_AND_DISK))
    with session_settings(spark, ONE_PASS_SETTINGS):
        splits = transform.split_stats(classified).collect()
    compared = spark.createDataFrame(
        [(f.uri,) for f in files if f.read and f.error is None and f.start_offset is not None], "_source_file string")
    placed = transform.resolve_shared_offsets(transform.place_lines(classified, splits, files), compared)
    cached.append(placed.persist(StorageLevel.MEMORY_AND_DISK))
    stats = {row["_source_file"]: row.asDict() for row in transform.file_stats(placed).collect()}
    return placed, stats


def _count_skipped(skipped: list[extract.Skipped]) -> dict[str, int]:
    """Entries per skip rule; each is logged, so the summary's counts can be traced to paths."""
    counts: dict[str, int] = {}
    for entry in skipped:
        log.debug("skipped %s: %s", entry.path, extract.SKIP_RULES[entry.rule])
        counts[entry.rule] = counts.get(entry.rule, 0) + 1
    return counts


def _input_bytes(files: list[extract.SourceFile], splits: Iterable[Mapping] = ()) -> dict[str, int]:
    """Per bronze table that lands records, the bytes load.use_bulk_insert weighs: a JSON
    file's size (formats stored as lines); for an Avro or Parquet file, the bytes of the JSON lines its records are
    read as (the `bytes` of its transform.split_stats rows; 0 before they are counted).
    Files with a file-level error land nothing."""
    # The threshold is set on JSON, which lands at about a tenth of its size; Avro holds
    # the same records in fewer bytes, so its own size would keep a share that JSON sends
    # to bulk_insert on insert's one-task write (docs/reference/sink-formats.md).
    rendered: dict[str, int] = {}
    for row in splits:
        rendered[row["_source_file"]] = rendered.get(row["_source_file"], 0) + row["bytes"]
    sizes: dict[str, int] = {}
    for f in files:
        if f.table and not f.error:
            size = f.size if formats.get(f.format).stored_as_lines else rendered.get(f.uri, 0)
            sizes[f.table] = sizes.get(f.table, 0) + size
    return sizes


