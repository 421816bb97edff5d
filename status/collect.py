"""Reads a silver table's status from the lakehouse: its properties, Hudi's timeline and
file-system view (Hudi's `call` procedures) and one aggregate over its rows."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import SparkSession

from core.identifiers import IDENTIFIER, TableNameError, validate_identifier
from status.errors import StatusError
from status.model import TableStatus, age_seconds, newest_instant, pending, seconds_between

STATE_SUFFIX = "__cdc_state"
# A hard-delete silver model's tables besides its view (macros/materializations/cdc_incremental/):
# the state table, the read-optimized and real-time tables Hudi's metastore sync registers
# for it, the recent table the view lays over the base files, and the rejected events.
MODEL_TABLE_SUFFIXES = (STATE_SUFFIX, STATE_SUFFIX + "_ro", STATE_SUFFIX + "_rt", "__cdc_recent", "__cdc_rejected")
# Tables next to silver's that are not a model's own: Hudi's read-optimized and real-time
# views of a merge-on-read table, and the rejected events.
NOT_MODELS = ("_ro", "_rt", "__cdc_rejected")
# A build's short-lived lock entries and work tables (macros/materializations/helpers/concurrent_builds.sql):
# parquet, and they may vanish while listed.
BUILD_TABLE = re.compile(r"__cdc_lock_\d{14}_[0-9a-f]{8}$|__cdc_(batch|actions)$|__hudi_(window|changes)$")
TIMELINE_LIMIT = 200
# Statuses are read a few tables at a time: each waits mostly on Hudi's timeline reads.
THREADS = 4


def _checked(name: str, what: str) -> str:
    try:
        return validate_identifier(name, what)
    except TableNameError as exc:
        raise StatusError(f"{exc}; it is not read") from None


def silver_tables(spark: SparkSession, schema: str) -> list[tuple[str, str, dict[str, str]]]:
    """(model, table, properties) of every table in `schema` a cdc materialization wrote
    (it has a `cdc.watermark`): `<model>__cdc_state` tables and history tables."""
    _checked(schema, "schema")
    if not spark.catalog.databaseExists(schema):
        raise StatusError(f"there is no schema {schema!r} in this lakehouse: has `dbt build` run?")
    found = []
    for table in spark.catalog.listTables(schema):
        if table.tableType == "VIEW" or table.name.endswith(NOT_MODELS) or BUILD_TABLE.search(table.name) \
                or not IDENTIFIER.match(table.name):
            continue
        properties = {row[0]: row[1] for row in spark.sql(f"show tblproperties {schema}.{table.name}").collect()}
        if "cdc.watermark" in properties:
            model = table.name[: -len(STATE_SUFFIX)] if table.name.endswith(STATE_SUFFIX) else table.name
            found.append((model, f"{schema}.{table.name}", properties))
    return sorted(found)


def hudi_call(spark: SparkSession, procedure: str, table: str, **arguments: Any) -> list[dict[str, Any]]:
    """`call <procedure>(table => '<table>', <name> => <value>, ...)`'s rows as dicts. The
    table and the procedure are the caller's checked identifiers; values are the caller's
    own constants: numbers and booleans as they are, text quoted."""
    def literal(value: Any) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        return str(value) if isinstance(value, int) else f"'{value}'"
    extra = "".join(f", {name} => {literal(value)}" for name, value in arguments.items())
    return [row.asDict() for row in spark.sql(f"call {procedure}(table => '{table}'{extra})").collect()]


def newest_commit(spark: SparkSession, table: str) -> dict[str, Any] | None:
    rows = hudi_call(spark, "show_commits", table, limit=1)
    return rows[0] if rows else None


def table_status(spark: SparkSession, model: str, table: str, properties: dict[str, str],
                 bronze_commits: dict[str, str | None]) -> TableStatus:
    status = TableStatus(model=model, table=table, watermark=properties.get("cdc.watermark"))
    status.sources = [s for s in properties.get("cdc.sources", "").split(",") if s]
    last = newest_commit(spark, table)
    if last is not None:
        status.last_commit, status.last_commit_action = str(last["commit_time"]), last["action"]
    if not status.sources:
        status.problems.append("no cdc.sources property (written by builds from this version on): "
                               "lag behind bronze unknown until the next build")
    else:
        status.bronze_newest_commit = newest_instant([bronze_commits.get(s) for s in status.sources])
        if status.watermark and status.bronze_newest_commit:
            status.behind_bronze_seconds = seconds_between(status.watermark, status.bronze_newest_commit)
    for group in hudi_call(spark, "show_fsview_latest", table):
        status.file_groups += 1
        status.base_files_bytes += group["data_file_size"] or 0
        status.log_files += group["num_delta_files"] or 0
        status.log_files_bytes += group["total_delta_file_size"] or 0
    status.pending_services = pending(hudi_call(spark, "show_timeline", table, limit=TIMELINE_LIMIT))
    if "_cdc_source_ts" in spark.table(table).columns:
        newest = spark.sql(f"select max(_cdc_source_ts) from {table}").first()[0]
        if newest is not None:
            status.newest_source_change = newest
            status.behind_source_seconds = age_seconds(newest)
    return status


def collect(spark: SparkSession, schema: str, models: list[str] | None = None) -> list[TableStatus]:
    """The status of every silver table in `schema` (or of `models`)."""
    tables = silver_tables(spark, schema)
    if models:
        unknown = sorted(set(models) - {model for model, _, _ in tables})
        if unknown:
            raise StatusError(f"no silver table for {', '.join(unknown)} in {schema!r} (a model a cdc "
                              f"materialization has built: see `dbt ls --select tag:silver`)")
        tables = [entry for entry in tables if entry[0] in models]
    sources = sorted({s for _, _, properties in tables for s in properties.get("cdc.sources", "").split(",") if s})
    for source in sources:
        for part in source.split("."):
            _checked(part, "bronze table")
    with ThreadPoolExecutor(THREADS) as pool:
        commits = dict(zip(sources, pool.map(lambda s: newest_commit(spark, s), sources)))
        bronze_commits = {s: (str(c["commit_time"]) if c else None) for s, c in commits.items()}
        return list(pool.map(lambda entry: table_status(spark, *entry, bronze_commits), tables))
