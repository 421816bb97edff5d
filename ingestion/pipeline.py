"""One ingestion run: wires extract -> transform -> load and reports what happened.

Write order is quarantine, bronze tables, then the file ledger; a crash before the
ledger write means those files are read again next run, and the keyed
duplicate-drop inserts keep bronze and quarantine exact.
"""

from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import unquote

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.identifiers import TableNameError, validate_identifier
from core.spark import session_settings
from ingestion import extract, load, naming, transform
from ingestion.errors import UsageError
from ingestion.naming import FORMAT_JSON
from ingestion.sources import PrimaryKeys, load_primary_keys

log = logging.getLogger(__name__)

QUARANTINE_TABLE = "_quarantine"
LEDGER_TABLE = "_ingested_files"
SAMPLES_PER_TOPIC = 3
# For the cache a run keeps between its counts and its writes. Spark's columnar cache
# compression saved little memory here and made the cache slower to build
# (docs/decisions/bronze-bulk-insert-and-codecs.md).
CACHE_SETTINGS = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}
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


@dataclass
class TableSummary:
    """Counts for one bronze table. events_read counts every line (= landed + held +
    quarantined + tombstones + skipped + duplicates); landed counts the records this run
    added to bronze, held the accepted records bronze held already (a replay's), which it
    left out; skipped counts Debezium's records that are no row change (transaction
    metadata, schema changes, heartbeats: transform.STATUS_SKIPPED); duplicates: copies of
    an offset another file of the run holds with the same record
    (transform.resolve_shared_offsets)."""

    table: str  # bronze table, or `(unmappable: <topic>)`
    topic: str
    files: int = 0
    events_read: int = 0
    landed: int = 0
    quarantined: int = 0
    tombstones: int = 0
    key_checked: bool = False
    held: int = 0
    skipped: int = 0
    duplicates: int = 0
    ops: dict[str, int] = field(default_factory=dict)  # accepted records (landed + held) by Debezium op
    newest_source_ts_ms: int | None = None  # the newest source time among them

    def count_accepted(self, row: Mapping[str, Any]) -> None:
        """Adds a stats row's accepted records by op and its newest source time."""
        for op in transform.REPORTED_OPS:
            if row[f"op_{op}_count"]:
                self.ops[op] = self.ops.get(op, 0) + row[f"op_{op}_count"]
        self.newest_source_ts_ms = newest_of(self.newest_source_ts_ms, row[transform.NEWEST_SOURCE_TS])

    def as_report(self) -> dict[str, Any]:
        """The counts as a JSON-ready dict (the runner's machine-readable report)."""
        return {"table": self.table, "topic": self.topic, "files": self.files, "events_read": self.events_read,
                "landed": self.landed, "held_already": self.held, "quarantined": self.quarantined,
                "tombstones": self.tombstones, "skipped": self.skipped, "duplicates": self.duplicates,
                "accepted_by_op": dict(sorted(self.ops.items())), "newest_source_ts_ms": self.newest_source_ts_ms}


def newest_of(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


@dataclass
class RunSummary:
    tables: list[TableSummary] = field(default_factory=list)
    files_skipped: int = 0  # already in the ledger
    skipped: dict[str, int] = field(default_factory=dict)  # extract.SKIP_RULES key -> entries skipped by it
    batches: int | None = None  # Kafka runs: micro-batches processed (files are not used)
    reprocess: bool = False  # the ledger was ignored: the files were read again

    @property
    def quarantined(self) -> int:
        return sum(t.quarantined for t in self.tables)

    @property
    def duplicates(self) -> int:
        return sum(t.duplicates for t in self.tables)

    def as_report(self) -> dict[str, Any]:
        """The run's counts as a JSON-ready dict (the runner's machine-readable report)."""
        return {"tables": [t.as_report() for t in self.tables], "files_skipped_as_ingested": self.files_skipped,
                "skipped_by_rule": dict(self.skipped), "kafka_micro_batches": self.batches,
                "reprocess": self.reprocess, "quarantined": self.quarantined}

    def table(self, name: str) -> TableSummary:
        return next(t for t in self.tables if t.table == name)

    def render(self) -> str:
        header = ("table", "files", "events read", "landed", "quarantined", "tombstones", "skipped", "key check",
                  "held already")
        kafka = self.batches is not None
        rows = [
            (t.table, "-" if kafka else str(t.files), str(t.events_read), str(t.landed), str(t.quarantined), str(t.tombstones),
             str(t.skipped), "yes" if t.key_checked else "no (not in sources yml)", str(t.held))
            for t in self.tables
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]
        held = sum(t.held for t in self.tables)
        if kafka:
            totals = f"{len(self.tables)} table(s), {self.batches} micro-batch(es) from Kafka, {self.quarantined} quarantined"
        elif self.reprocess:
            totals = (
                f"{len(self.tables)} table(s), {sum(t.files for t in self.tables)} file(s) read again (--reprocess), "
                f"{sum(t.landed for t in self.tables)} record(s) added, {held} held already, "
                f"{self.quarantined} quarantined"
            )
        else:
            totals = (
                f"{len(self.tables)} table(s), {sum(t.files for t in self.tables)} new file(s), "
                f"{self.files_skipped} file(s) skipped as already ingested, {self.quarantined} quarantined"
            )
        return "\n".join([*lines, totals, *self._skipped_line()])

    def _skipped_line(self) -> list[str]:
        """The entries skipped by a rule (extract.SKIP_RULES), counted, if any."""
        counts = [f"{self.skipped[rule]} {what}" for rule, what in extract.SKIP_RULES.items() if self.skipped.get(rule)]
        if self.duplicates:
            counts.append(f"{self.duplicates} duplicate record(s) (an offset another file of the run holds with the same record)")
        return [f"skipped by rule: {', '.join(counts)}"] if counts else []


def validate_bronze_schema(name: str) -> None:
    try:
        validate_identifier(name, "bronze schema")
    except TableNameError as exc:
        raise UsageError(str(exc)) from exc


def _validate(config: IngestConfig) -> None:
    validate_bronze_schema(config.bronze_schema)
    if config.max_record_bytes < 1:
        raise UsageError(f"--max-record-bytes must be positive, got {config.max_record_bytes}")
    if config.topics is not None:
        try:
            re.compile(config.topics)
        except re.error as exc:
            raise UsageError(f"--topics {config.topics!r} is not a valid regular expression: {exc}") from exc


def _reject_table_collisions(files: list[extract.SourceFile], landed: set[str]) -> list[extract.SourceFile]:
    """Files of a topic whose bronze table another topic already uses (or would use)
    get a file-level error: their records go to quarantine instead of mixing."""
    errors = naming.table_collisions({f.topic for f in files} | landed)
    return [replace(f, table=None, error=errors[f.topic]) if f.topic in errors and not f.error else f for f in files]


def _key_map(files: list[extract.SourceFile], keys: PrimaryKeys) -> dict[str, list[str]]:
    found = {f.topic: keys.lookup(f.topic, f.table) for f in files}
    return {topic: columns for topic, columns in found.items() if columns is not None}


def log_quarantine(samples: list, summary: RunSummary) -> None:
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

    listing = extract.list_sink(spark, config.input_uri, config.topics)
    files = listing.files
    load.ensure_schema(spark, schema)
    done, landed_topics = load.read_ledger(spark, schema, LEDGER_TABLE)
    if config.reprocess:
        done = set()
    new_files = _reject_table_collisions([f for f in files if f.uri not in done], landed_topics)
    summary = RunSummary(files_skipped=len(files) - len(new_files), skipped=_count_skipped(listing.skipped),
                         reprocess=config.reprocess)
    new_files = extract.within_offset_range(spark, extract.inspect_binary(spark, new_files))
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
    with session_settings(spark, CACHE_SETTINGS), created_alongside(
        spark, schema, [*tables, (LEDGER_TABLE, load.LEDGER_COLUMNS, load.LEDGER_KEY)]
    ) as ensured:
        cached = [classified.persist(StorageLevel.MEMORY_AND_DISK)]
        try:
            # One stage builds the cache and counts it per file split: the lines are numbered
            # from those counts, so the files are read once (docs/decisions/ingestion-one-pass.md).
            with session_settings(spark, ONE_PASS_SETTINGS):
                splits = transform.split_stats(cached[0]).collect()
            stats = _file_stats(splits)
            input_bytes = _input_bytes(new_files, splits)
            placed = transform.place_lines(cached[0], splits, new_files)
            if extract.share_offsets(new_files, {uri: row["lines"] for uri, row in stats.items()}):
                cached.pop().unpersist()
                placed, stats = _resolve_copies(spark, prepared, new_files, cached)
            summary.tables = _summarize(new_files, stats, key_map)
            samples = transform.quarantine_samples(placed, SAMPLES_PER_TOPIC).collect() if summary.quarantined else []
            log_quarantine(samples, summary)

            created = ensured()
            write_tables(spark, schema, placed, set(input_bytes), summary.tables, ingested_at, input_bytes=input_bytes,
                         created=created)
            # Unless replaying, the ledger holds none of these files: they are the ones this
            # run found missing from it, and runs into a schema do not overlap (run()).
            _write_ledger(spark, schema, new_files, stats, ingested_at, created[LEDGER_TABLE] or not config.reprocess)
        finally:
            for frame in cached:
                frame.unpersist()
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


def _file_stats(splits: list) -> dict[str, dict[str, int]]:
    """Per file: its transform.STATUS_COUNTS, summed over its splits (split_stats rows)."""
    stats: dict[str, dict[str, int]] = {}
    for row in splits:
        entry = stats.setdefault(row["_source_file"], {**dict.fromkeys(transform.STATUS_COUNTS, 0),
                                                        transform.NEWEST_SOURCE_TS: None})
        for name in transform.STATUS_COUNTS:
            entry[name] += row[name]
        entry[transform.NEWEST_SOURCE_TS] = newest_of(entry[transform.NEWEST_SOURCE_TS], row[transform.NEWEST_SOURCE_TS])
    return stats


@contextmanager
def created_alongside(
    spark: SparkSession, schema: str, tables: list[tuple[str, list[tuple[str, str]], list[str]]]
) -> Iterator[Callable[[], dict[str, bool]]]:
    """Create `tables` (load.ensure_table) in a thread once the block's first Spark job
    runs, so that their catalog DDL overlaps the parse instead
    of following it. The thread waits for a running job because the main thread's planning
    of that job waits for the metastore while the DDL holds it (tried: the first job then
    started that much later). Yields a function that returns {table: created by this
    call}, after creating them itself if no job ran (raises the DDL's error, if any)."""
    stop = threading.Event()

    def ensure_all() -> dict[str, bool]:
        return {name: load.ensure_table(spark, schema, name, columns, key) for name, columns, key in tables}

    def once_a_job_runs() -> dict[str, bool] | None:
        tracker = spark.sparkContext.statusTracker()
        while not tracker.getActiveJobsIds():
            if stop.wait(0.05):
                return None
        return ensure_all()

    def created() -> dict[str, bool]:
        stop.set()
        found = future.result()
        return ensure_all() if found is None else found

    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(once_a_job_runs)
        try:
            yield created
        finally:
            stop.set()


def write_tables(
    spark: SparkSession,
    schema: str,
    classified,  # noqa: ANN001 - DataFrame from transform.prepare
    tables: set[str],
    counts: list[TableSummary],
    ingested_at: datetime,
    input_bytes: dict[str, int] | None = None,
    created: Mapping[str, bool] | None = None,
) -> None:
    """Quarantine first, then every bronze table (keyed duplicate-drop inserts).
    `classified` holds one landed row per key: a Kafka micro-batch, or sink files with their
    shared offsets resolved (transform.resolve_shared_offsets). `input_bytes`: sink file bytes (_input_bytes; a Kafka
    micro-batch: record value bytes) per table, which pick bulk_insert for large shares (load.use_bulk_insert).
    `created`: tables the caller already ensured, {table: created by that call}.
    Each of `counts` gets its landed and held set to what its bronze insert added and
    left out as held already."""
    if any(t.quarantined for t in counts):
        quarantine_created = load.ensure_table(
            spark, schema, QUARANTINE_TABLE, transform.QUARANTINE_COLUMNS, transform.QUARANTINE_KEY)
        load.insert_new_rows(
            spark, transform.to_quarantine(classified, ingested_at), schema, QUARANTINE_TABLE,
            transform.QUARANTINE_COLUMNS, transform.QUARANTINE_KEY, holds_none=quarantine_created,
        )
    # Create every mappable table (dbt sources must exist even if only tombstones arrived),
    # one after the other (catalog DDL), then write them, several at a time.
    inserts = []
    for table in sorted(tables):
        if created is not None and table in created:
            was_created = created[table]
        else:
            was_created = load.ensure_table(spark, schema, table, transform.BRONZE_COLUMNS, transform.BRONZE_KEY)
        landed = sum(t.landed for t in counts if t.table == table)
        if landed:
            bronze = transform.to_bronze(classified, table, ingested_at)
            bulk = load.use_bulk_insert((input_bytes or {}).get(table))
            inserts.append(
                load.TableInsert(table, bronze, transform.BRONZE_COLUMNS, transform.BRONZE_KEY, bulk=bulk,
                                 holds_none=was_created, rows=landed))
    held = load.insert_new_rows_of_tables(spark, schema, inserts)
    for entry in counts:
        entry.held = held.get(entry.table, 0)
        entry.landed -= entry.held


def _input_bytes(files: list[extract.SourceFile], splits: Iterable[Mapping] = ()) -> dict[str, int]:
    """Per bronze table that lands records, the bytes load.use_bulk_insert weighs: a JSON
    file's size; for an Avro or Parquet file, the bytes of the JSON lines its records are
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
            size = f.size if f.format == FORMAT_JSON else rendered.get(f.uri, 0)
            sizes[f.table] = sizes.get(f.table, 0) + size
    return sizes


def default_sources_yml() -> Path:
    from core.spark import PROJECT_DIR

    return PROJECT_DIR / "models" / "silver" / "_silver__sources.yml"


def _summarize(files: list[extract.SourceFile], stats: dict, key_map: dict[str, list[str]]) -> list[TableSummary]:
    tables: dict[str, TableSummary] = {}
    for f in files:
        name = f.table or f"(unmappable: {f.topic})"
        entry = tables.setdefault(name, TableSummary(table=name, topic=f.topic, key_checked=f.topic in key_map))
        row = stats.get(f.uri)  # absent for empty files
        entry.files += 1
        if row is not None:
            entry.events_read += row["lines"]
            entry.landed += row["landed_count"]
            entry.quarantined += row["quarantined_count"]
            entry.tombstones += row["tombstone_count"]
            entry.skipped += row["skipped_count"]
            entry.count_accepted(row)
            entry.duplicates += (row["lines"] - row["landed_count"] - row["quarantined_count"] - row["tombstone_count"]
                                 - row["skipped_count"])
    return [tables[name] for name in sorted(tables)]


def _write_ledger(
    spark: SparkSession, schema: str, files: list[extract.SourceFile], stats: dict, ingested_at: datetime,
    holds_none: bool,
) -> None:
    """Last write of a run: these files are done (a file's skipped records are its lines
    less the other counts, so the ledger's columns stay as older lakehouses have them). `holds_none`: the ledger holds none of
    them, so the insert skips its check for known keys (load.insert_new_rows)."""
    rows = []
    for f in files:
        row = stats.get(f.uri)
        counts = (row["lines"], row["landed_count"], row["quarantined_count"], row["tombstone_count"]) if row else (0, 0, 0, 0)
        rows.append((f.topic, f.uri, *counts, ingested_at))
    ddl = ", ".join(f"{name} {kind}" for name, kind in load.LEDGER_COLUMNS)
    ledger = spark.createDataFrame(rows, ddl).select(*[F.col(n) for n, _ in load.LEDGER_COLUMNS])
    load.insert_new_rows_of_tables(spark, schema, [load.TableInsert(
        LEDGER_TABLE, ledger, load.LEDGER_COLUMNS, load.LEDGER_KEY, holds_none=holds_none, rows=len(rows))])
