"""Load: every write of a run, into Hudi COPY_ON_WRITE tables created with Spark SQL and
appended with `INSERT INTO`: quarantine, bronze tables, then the file ledger.

Every table is keyed; an insert leaves out the keys the table holds, so replaying a
file (e.g. after a crash before the ledger write) adds no rows.
"""

from __future__ import annotations

import logging
import operator
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from functools import reduce
from pathlib import Path
from typing import Callable, ContextManager, Iterator, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.identifiers import TableNameError, qualified, quote, validate_identifier
from core.lock import exclusive
from core.spark import session_settings
from ingestion import extract, transform
from ingestion.errors import UsageError
from ingestion.summary import TableSummary

log = logging.getLogger(__name__)

# Hudi rewrites a file smaller than this to add an insert's rows to it ("small file
# handling", default 100 MiB): every run paid a rewrite of the newest bronze file, which
# grows run after run. 8 MiB bounds that rewrite and leaves bronze with about one file
# per 8 MiB (docs/decisions/bronze-bulk-insert-and-codecs.md).
SMALL_FILE_LIMIT_BYTES = 8 * 1024 * 1024

# Spark SQL INSERT INTO on Hudi: plain insert (no upsert/precombine, no index lookup);
# the rows whose key is already in the table are left out before (insert_new_rows).
INSERT_SETTINGS = {
    "hoodie.spark.sql.insert.into.operation": "insert",
    "hoodie.parquet.small.file.limit": str(SMALL_FILE_LIMIT_BYTES),
    # zstd instead of Hudi's gzip: faster to write and smaller
    # (docs/decisions/bronze-bulk-insert-and-codecs.md); silver uses it too (cdc_hudi_tblproperties).
    "hoodie.parquet.compression.codec": "zstd",
    # Plain encoding: most of a bronze row is unique text and numbers (row images, offsets,
    # positions), for which Parquet fills a dictionary per column until it overflows and
    # then writes every value again, so without it the write is faster and smaller and scans
    # take as long (docs/decisions/bronze-bulk-insert-and-codecs.md).
    "hoodie.parquet.dictionary.enabled": "false",
}

# A table's share of a run at least this large (sink file bytes) goes in with Hudi's
# bulk_insert instead: its row writer writes each Spark partition as new files in one pass,
# without insert's workload profile and second read of the batch
# (docs/decisions/bronze-bulk-insert-and-codecs.md). It skips small-file handling, so it is
# kept for batches whose files come out near SMALL_FILE_LIMIT_BYTES anyway: JSON lands at
# about a tenth of its size, so 128 MiB read in two splits gives two files below that limit.
BULK_INSERT_MIN_BYTES = 128 * 1024 * 1024
BULK_INSERT_SETTINGS = {
    "hoodie.spark.sql.insert.into.operation": "bulk_insert",
    # No sort: bronze is read by commit, not by key range, so the shuffle would buy nothing.
    "hoodie.bulkinsert.sort.mode": "NONE",
}

# The plain inserts of one run's tables go this many at a time. A small table's insert is
# mostly the driver's work (planning, Hudi's commit and timeline files), which leaves the
# cores idle: overlapping them fills the gaps (docs/decisions/write-and-dbt-threads.md).
WRITE_THREADS = 4

LEDGER_COLUMNS: list[tuple[str, str]] = [
    ("_topic", "string"),
    ("_source_file", "string"),
    ("lines", "bigint"),
    ("landed", "bigint"),
    ("quarantined", "bigint"),
    ("tombstones", "bigint"),
    ("_ingested_at", "timestamp"),
]
LEDGER_KEY = ["_source_file"]
LEDGER_TABLE = "_ingested_files"
QUARANTINE_TABLE = "_quarantine"


def writer_lock_path(spark: SparkSession, schema: str) -> Path | None:
    """The lock file that serializes ingestion runs into `schema`, next to the
    warehouse when it is on this machine; None for a remote warehouse (s3a://,
    hdfs://), where the scheduler must run one ingestion per schema at a time."""
    warehouse = spark.conf.get("spark.sql.warehouse.dir")
    if "://" in warehouse and not warehouse.startswith("file:"):
        return None
    return Path(warehouse.removeprefix("file:")).resolve() / f".ingestion-{schema}.lock"


def ensure_schema(spark: SparkSession, schema: str) -> None:
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(schema)}")


def table_exists(spark: SparkSession, schema: str, table: str) -> bool:
    return spark.catalog.tableExists(qualified(schema, table))


def remove_orphan_location(spark: SparkSession, schema: str, table: str) -> None:
    """Delete the folder of a table the catalog does not know (a run killed while
    creating it): Spark refuses to create a managed table over it. Nothing is lost:
    the ledger is written last, so the files are read again."""
    location = spark.catalog.getDatabase(schema).locationUri.rstrip("/") + "/" + table
    jvm = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    if fs.exists(path):
        log.warning("removing %s: the folder of table %s.%s, which a killed run left unregistered", location, schema, table)
        fs.delete(path, True)


def ensure_table(
    spark: SparkSession, schema: str, table: str, columns: list[tuple[str, str]], key: list[str]
) -> bool:
    """CREATE TABLE IF NOT EXISTS ... USING hudi, COPY_ON_WRITE, keyed by `key`. Returns
    whether this call created it: then it holds no rows (insert_new_rows' `holds_none`)."""
    existed = table_exists(spark, schema, table)
    if not existed:
        remove_orphan_location(spark, schema, table)
    column_sql = ", ".join(f"{quote(name)} {kind}" for name, kind in columns)
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {qualified(schema, table)} ({column_sql}) USING hudi "
        f"TBLPROPERTIES (type = 'cow', primaryKey = '{','.join(key)}')"
    )
    return not existed


def one_writer(spark: SparkSession, schema: str) -> ContextManager:
    """Hold the schema's ingestion lock for a whole run (RunLockedError if taken)."""
    path = writer_lock_path(spark, schema)
    return nullcontext() if path is None else exclusive(path)


def use_bulk_insert(input_bytes: int | None) -> bool:
    """Whether a table's rows of a run, read from `input_bytes` of sink files or Kafka
    record values (None: not known), go in with bulk_insert (BULK_INSERT_MIN_BYTES)."""
    return input_bytes is not None and input_bytes >= BULK_INSERT_MIN_BYTES


@dataclass(frozen=True)
class TableInsert:
    """One table's share of a run, for insert_new_rows_of_tables."""

    table: str
    df: DataFrame
    columns: list[tuple[str, str]]
    key: list[str]
    bulk: bool = False
    holds_none: bool = False  # the table holds none of the df's keys: no check
    rows: int | None = None  # the df's rows, when the caller knows them (spares a job on a replay)


def write_settings(bulk: bool) -> dict[str, str]:
    """The session settings an insert runs under (Hudi reads them from the session)."""
    return {**INSERT_SETTINGS, **(BULK_INSERT_SETTINGS if bulk else {})}


def insert_new_rows(
    spark: SparkSession,
    df: DataFrame,
    schema: str,
    table: str,
    columns: list[tuple[str, str]],
    key: list[str],
    bulk: bool = False,
    holds_none: bool = False,
) -> int:
    """Append the rows of `df` whose `key` the Hudi table does not hold yet (columns
    selected in table order; INSERT INTO is positional); `bulk`: with Hudi's bulk_insert
    (use_bulk_insert), else with its insert and small-file handling; `holds_none`: the
    table holds none of `df`'s keys, so the check is skipped: the run created it
    (ensure_table returned True; a first run into an empty lakehouse saves a job per
    table), or the caller knows (the file ledger: write_ledger).

    The known keys come from a semi-join on the table's key columns, not from Hudi's
    duplicate-drop policy: that one looks every incoming key up in the bloom filters and
    key ranges of the table's files, which for a bronze key (topic, partition, offset as
    one string that does not sort by offset) cannot skip a file, and then re-reads the
    batch for each of its stages. Reading three columns of the table is cheaper.

    Returns how many rows of `df` the table held already (left out); when that is all of
    them, nothing is written, so a replay leaves no empty commit on the table."""
    held = insert_new_rows_of_tables(
        spark, schema, [TableInsert(table, df, columns, key, bulk=bulk, holds_none=holds_none)])
    return held[table]


def insert_new_rows_of_tables(
    spark: SparkSession, schema: str, inserts: Sequence[TableInsert], threads: int | None = None
) -> dict[str, int]:
    """insert_new_rows for several tables: the bulk ones one after the other, then the
    plain ones `threads` (default WRITE_THREADS) at a time. Only inserts under the same
    session settings may overlap, as Hudi reads them from the session. Every insert runs
    to its end; then the first error, if any, is raised. Returns {table: rows it held
    already}."""
    held: dict[str, int] = {}
    bulk = [insert for insert in inserts if insert.bulk]
    if bulk:
        with session_settings(spark, write_settings(True)):
            for insert in bulk:
                held[insert.table] = _insert_new_rows(spark, insert, schema)
    plain = [insert for insert in inserts if not insert.bulk]
    if not plain:
        return held
    with session_settings(spark, write_settings(False)):
        if len(plain) == 1:  # no thread for a single insert (the quarantine, the ledger)
            held[plain[0].table] = _insert_new_rows(spark, plain[0], schema)
            return held
        with ThreadPoolExecutor(max_workers=min(threads or WRITE_THREADS, len(plain))) as pool:
            futures = [(insert.table, pool.submit(_insert_new_rows, spark, insert, schema)) for insert in plain]
    errors = [error for error in (future.exception() for _, future in futures) if error is not None]
    if errors:
        raise errors[0]
    held.update((table, future.result()) for table, future in futures)
    return held


# Hudi's metastore sync after each write looks the Hive client up with a HiveConf that
# differs from Spark's, so Hive replaces the client Spark's catalog shares between
# threads, outside Spark's lock: a catalog lookup of a concurrent insert can then find
# it closed (NullPointerException on `Hive.getMSC()`; apache/hudi#9958 reports the same
# with several tables written at once). Seen once in the sample's landing with four
# insert threads. The failed statement wrote nothing, or Hudi had committed before its
# sync: an insert leaves out the keys the table holds, so running it again adds only
# what is missing (rows the failed attempt committed then count as held already).
METASTORE_CLIENT_CLOSED = 'Hive.getMSC()" is null'
METASTORE_CLIENT_ATTEMPTS = 3


def is_metastore_client_closed(error: BaseException) -> bool:
    """Whether `error` is the shared Hive client closed under a concurrent statement."""
    return METASTORE_CLIENT_CLOSED in str(error)


def _insert_new_rows(spark: SparkSession, insert: TableInsert, schema: str) -> int:
    """One table's insert, under settings the caller holds; returns the rows of the
    insert's df the table held already. Writes nothing when it held every one. Runs
    again, checking the keys the table holds, when the shared metastore client was
    closed under it (METASTORE_CLIENT_CLOSED)."""
    for attempt in range(1, METASTORE_CLIENT_ATTEMPTS):
        try:
            return _insert_new_rows_once(spark, insert, schema)
        except Exception as error:  # noqa: BLE001 - only the one transient error is retried
            if not is_metastore_client_closed(error):
                raise
            log.warning("%s.%s: the shared metastore client was closed under the insert (attempt %d of %d); "
                        "running it again, without the keys the table holds", schema, insert.table, attempt,
                        METASTORE_CLIENT_ATTEMPTS)
            insert = replace(insert, holds_none=False)
    return _insert_new_rows_once(spark, insert, schema)


def _insert_new_rows_once(spark: SparkSession, insert: TableInsert, schema: str) -> int:
    table, df = insert.table, insert.df
    if insert.holds_none:
        new, held = df, 0
    else:
        new, held = _without_known_keys(spark.table(qualified(schema, table)), df, insert.key)
        if held and (held == insert.rows if insert.rows is not None else new.isEmpty()):
            log.info("%s.%s holds every row of this batch already: nothing written", schema, table)
            return held
    view = f"_ingest_{schema}_{table}"
    new.createOrReplaceTempView(view)
    column_list = ", ".join(quote(name) for name, _ in insert.columns)
    try:
        spark.sql(f"INSERT INTO {qualified(schema, table)} SELECT {column_list} FROM {quote(view)}")
    finally:
        spark.catalog.dropTempView(view)
    return held


def _without_known_keys(table: DataFrame, df: DataFrame, key: list[str]) -> tuple[DataFrame, int]:
    """The rows of `df` whose key `table` does not hold, and how many keys of `df` it
    holds (one row per key on both sides: bronze and the batches are keyed)."""
    known = within_key_bounds(table.select(*key), df, key).join(df.select(*key), key, "left_semi")
    held = known.count()
    # Usually none (only replays find some): then the batch goes in as it is, without the
    # anti-join's shuffle and sort of every row of it.
    return (df, 0) if held == 0 else (df.join(known, key, "left_anti"), held)


def within_key_bounds(table: DataFrame, batch: DataFrame, key: list[str]) -> DataFrame:
    """The rows of `table` whose every `key` column lies between the batch's least and
    greatest value of it: only they can share a key with the batch. Parquet's column
    statistics let the scan skip the files and row groups outside (bronze's offsets rise
    from commit to commit), so the check reads about what the batch adds, not the whole
    history (docs/decisions/bronze-bulk-insert-and-codecs.md). An empty batch has no bounds and matches nothing."""
    bounds = batch.agg(
        *[F.min(name).alias(f"lo{i}") for i, name in enumerate(key)],
        *[F.max(name).alias(f"hi{i}") for i, name in enumerate(key)],
    ).first()
    inside = [F.col(name).between(F.lit(bounds[f"lo{i}"]), F.lit(bounds[f"hi{i}"])) for i, name in enumerate(key)]
    return table.where(reduce(operator.and_, inside))


def read_ledger(spark: SparkSession, schema: str, ledger: str) -> tuple[set[str], set[str]]:
    """(`_source_file` of every file a previous run completed, topics of which a previous
    run landed at least one record), in one read: each read of a Hudi table lists its
    files and runs a job, so a second read would cost as much again."""
    if not table_exists(spark, schema, ledger):
        return set(), set()
    rows = spark.sql(
        f"SELECT {quote('_source_file')}, {quote('_topic')}, landed > 0 AS landed FROM {qualified(schema, ledger)}"
    ).collect()
    return {row[0] for row in rows}, {row[1] for row in rows if row[2]}


def validate_bronze_schema(name: str) -> None:
    try:
        validate_identifier(name, "bronze schema")
    except TableNameError as exc:
        raise UsageError(str(exc)) from exc


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
        return {name: ensure_table(spark, schema, name, columns, key) for name, columns, key in tables}

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
        quarantine_created = ensure_table(
            spark, schema, QUARANTINE_TABLE, transform.QUARANTINE_COLUMNS, transform.QUARANTINE_KEY)
        insert_new_rows(
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
            was_created = ensure_table(spark, schema, table, transform.BRONZE_COLUMNS, transform.BRONZE_KEY)
        landed = sum(t.landed for t in counts if t.table == table)
        if landed:
            bronze = transform.to_bronze(classified, table, ingested_at)
            bulk = use_bulk_insert((input_bytes or {}).get(table))
            inserts.append(
                TableInsert(table, bronze, transform.BRONZE_COLUMNS, transform.BRONZE_KEY, bulk=bulk,
                                 holds_none=was_created, rows=landed))
    held = insert_new_rows_of_tables(spark, schema, inserts)
    for entry in counts:
        entry.held = held.get(entry.table, 0)
        entry.landed -= entry.held


def write_ledger(
    spark: SparkSession, schema: str, files: list[extract.SourceFile], stats: dict, ingested_at: datetime,
    holds_none: bool,
) -> None:
    """Last write of a run: these files are done (a file's skipped records are its lines
    less the other counts, so the ledger's columns stay as older lakehouses have them). `holds_none`: the ledger holds none of
    them, so the insert skips its check for known keys (insert_new_rows)."""
    rows = []
    for f in files:
        row = stats.get(f.uri)
        counts = (row["lines"], row["landed_count"], row["quarantined_count"], row["tombstone_count"]) if row else (0, 0, 0, 0)
        rows.append((f.topic, f.uri, *counts, ingested_at))
    ddl = ", ".join(f"{name} {kind}" for name, kind in LEDGER_COLUMNS)
    ledger = spark.createDataFrame(rows, ddl).select(*[F.col(n) for n, _ in LEDGER_COLUMNS])
    insert_new_rows_of_tables(spark, schema, [TableInsert(
        LEDGER_TABLE, ledger, LEDGER_COLUMNS, LEDGER_KEY, holds_none=holds_none, rows=len(rows))])
