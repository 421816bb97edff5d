"""Hudi table services the runner schedules (`--table-services`): compaction of
merge-on-read tables, cleaning and archival, on every Hudi table of the lakehouse's
schemas, between passes instead of inside every write.

With the runner in charge, its passes write with Hudi's automatic cleaning and archival
off and compaction only planned (INLINE_OFF), so a pass's build pays for its changes
only and the retention is the one the runner states (`--retain-commits`): the commits a
table keeps, hence how far back time travel (cdc_as_of) and Hudi's incremental queries
reach. A state table's write still plans a compaction every 5 delta commits; after each
pass the runner runs the plans within a time budget (compact_pending), and with the
full services it compacts whatever logs remain so that readers between passes read
base files only. A hand-run `dbt build` compacts after publishing its rows.

A silver state table whose newest delta commit its model's view has not published (a
build stopped between the two, or one still running in another process) is not
compacted: its base files would then show readers rows no view names yet
(docs/decisions/silver-atomic-reads.md). The model's next build publishes them."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from pyspark.sql import SparkSession

from core.identifiers import IDENTIFIER, TableNameError, validate_identifier
from runner import hudi_timeline
from status.collect import BUILD_TABLE, STATE_SUFFIX, hudi_call

log = logging.getLogger(__name__)

# The schemas the project writes Hudi tables to (bronze by the ingestion, silver and gold by dbt).
SCHEMAS = ("bronze", "silver", "gold")
# Hudi's own default: ten commits kept, the reach documented for time travel.
DEFAULT_RETAIN_COMMITS = 10
# Archival keeps the active timeline between these many commits more than the cleaner
# retains (Hudi refuses a minimum at or below the retained commits); Hudi's defaults
# keep the same shape (10 retained, 20 to 30 active).
ARCHIVE_MIN_EXTRA, ARCHIVE_MAX_EXTRA = 10, 20
# Session settings of a pass when the runner runs the services: none inside the writes,
# where a compaction would make one build of the pass wait for it (Hudi's session
# settings win over the tables' own inline setting).
INLINE_OFF = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
              "hoodie.compact.inline": "false"}
# The delta commits after which compact_due compacts a table: the state tables' own
# inline trigger (cdc_state_table_options).
COMPACT_AFTER = 5
# Where compact_due looks after each pass: the merge-on-read tables dbt writes.
COMPACTED_SCHEMAS = ("silver", "gold")


class TableServiceError(Exception):
    """A table service failed; the message names the table and the service."""


@dataclass(frozen=True)
class Retention:
    """What a table keeps: `commits` for the cleaner, an active timeline of
    `archive_min`..`archive_max` commits before archival."""

    commits: int = DEFAULT_RETAIN_COMMITS

    @property
    def archive_min(self) -> int:
        return self.commits + ARCHIVE_MIN_EXTRA

    @property
    def archive_max(self) -> int:
        return self.commits + ARCHIVE_MAX_EXTRA


@dataclass
class ServiceResult:
    """What the services did to one table."""

    table: str
    table_type: str
    compactions: list[str] = field(default_factory=list)  # instants of the compactions run
    files_cleaned: int = 0
    earliest_commit_retained: str | None = None
    seconds: float = 0.0
    error: str | None = None

    def as_report(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


def hudi_tables(spark: SparkSession, schemas: Sequence[str] = SCHEMAS) -> list[tuple[str, str]]:
    """(qualified name, table type `COPY_ON_WRITE` / `MERGE_ON_READ`) of every Hudi table
    in `schemas` that exist, once per folder (a merge-on-read table's `_ro` and `_rt`
    names share its folder); names that are not plain identifiers are left out (they
    never reach SQL) and logged."""
    found, locations = [], set()
    for schema in schemas:
        validate_identifier(schema, "schema")
        if not spark.catalog.databaseExists(schema):
            continue
        for table in sorted(spark.catalog.listTables(schema), key=lambda t: t.name):
            if table.tableType == "VIEW" or table.isTemporary or BUILD_TABLE.search(table.name):
                continue  # a build's lock and work tables are parquet and may vanish while listed
            if not IDENTIFIER.match(table.name):
                log.warning("table services: %s.%r left out: not a plain identifier", schema, table.name)
                continue
            name = f"{schema}.{table.name}"
            details = {row[0]: row[1] for row in spark.sql(f"describe table extended {name}").collect()}
            if (details.get("Provider") or "").lower() != "hudi" or details.get("Location") in locations:
                continue
            locations.add(details.get("Location"))
            properties = {row["key"]: row["value"] for row in hudi_call(spark, "show_table_properties", name)}
            found.append((name, properties.get("hoodie.table.type", "COPY_ON_WRITE")))
    return sorted(found)


def unpublished(spark: SparkSession, table: str, delta_commits: Sequence[str] | None = None) -> bool:
    """True for a silver state table (`silver.<model>__cdc_state`) with a delta commit
    newer than the instant its model's view published (`cdc.published`, read_path.sql).
    `delta_commits`: the table's completed delta commits (requested instants), when the
    caller has its timeline; else read with `show_commits`."""
    schema, name = table.split(".", 1)
    if schema != "silver" or not name.endswith(STATE_SUFFIX):
        return False
    view = f"silver.{name[:-len(STATE_SUFFIX)]}"
    validate_identifier(view.split(".", 1)[1], "model")
    if not spark.catalog.tableExists(view):
        return False
    published = dict(spark.sql(f"show tblproperties {view}").collect()).get("cdc.published")
    if not published:
        return False  # a view of the layout before generations: nothing to guard
    if delta_commits is None:
        delta_commits = [str(row["commit_time"]) for row in hudi_call(spark, "show_commits", table, limit=20)
                         if row["action"] == "deltacommit"]
    newer = [instant for instant in delta_commits if instant > published]
    if newer:
        log.warning("%s: not compacted: its delta commit %s is not published by %s's view yet (a build stopped "
                    "after writing; the model's next build publishes it)", table, max(newer), view)
    return bool(newer)


def service_table(spark: SparkSession, table: str, table_type: str, retention: Retention) -> ServiceResult:
    """Compaction (merge-on-read: every log file into its base file, pending plans first),
    then cleaning to `retention.commits` commits, then archival."""
    result = ServiceResult(table=table, table_type=table_type)
    started = time.monotonic()
    try:
        if table_type == "MERGE_ON_READ" and not unpublished(spark, table):
            # pending plans (a crashed build's) run first; a new one takes every log file now
            done = hudi_call(spark, "run_compaction", table, op="scheduleAndExecute",
                         options="hoodie.compact.inline.max.delta.commits=1")
            result.compactions = sorted(str(row["timestamp"]) for row in done)
        cleaned = hudi_call(spark, "run_clean", table, clean_policy="KEEP_LATEST_COMMITS",
                        retain_commits=retention.commits)
        if cleaned:
            result.files_cleaned = sum(row["total_files_deleted"] or 0 for row in cleaned)
            result.earliest_commit_retained = cleaned[-1]["earliest_commit_to_retain"]
        archived = hudi_call(spark, "archive_commits", table, min_commits=retention.archive_min,
                         max_commits=retention.archive_max, retain_commits=retention.commits,
                         enable_metadata=False)
        if archived and archived[0]["result"] != 0:
            raise TableServiceError(f"archival returned {archived[0]['result']}")
    except Exception as exc:  # noqa: BLE001 - one table's failure is reported, the others still serviced
        result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        log.error("table services on %s failed: %s", table, result.error)
    result.seconds = time.monotonic() - started
    return result


def run(spark: SparkSession, retention: Retention, schemas: Sequence[str] = SCHEMAS) -> list[ServiceResult]:
    """The services on every Hudi table of `schemas`, one table after another (each
    table's services are Spark jobs of their own)."""
    try:
        tables = hudi_tables(spark, schemas)
    except TableNameError as exc:
        raise TableServiceError(str(exc)) from None
    results = [service_table(spark, table, table_type, retention) for table, table_type in tables]
    done = [r for r in results if r.error is None]
    log.info("table services: %d table(s), %d compaction(s), %d file(s) cleaned, %d failed",
             len(results), sum(len(r.compactions) for r in done), sum(r.files_cleaned for r in done),
             len(results) - len(done))
    return results


@dataclass
class Compactions:
    """What compact_due did: per table, the compactions it ran; the tables left for later."""

    results: list[ServiceResult] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)  # tables due that it did not start

    def as_report(self) -> dict[str, Any]:
        return {"tables": [r.as_report() for r in self.results], "deferred": self.deferred}


def compact_due(spark: SparkSession, budget_seconds: float, after: int = COMPACT_AFTER,
                schemas: Sequence[str] = COMPACTED_SCHEMAS) -> Compactions:
    """Compaction of the merge-on-read tables that need it, while `budget_seconds` last:
    first those with a plan left pending (a build killed while compacting), oldest plan
    first, each plan run by its instant; then those with `after` or more delta commits
    since their last compaction, the most first. A compaction started runs to its end
    (it commits at once or not at all); the tables not started wait for the next pass.
    Which tables are due is read from their timelines, no Spark job."""
    due = []
    for schema in schemas:
        # only a merge-on-read table has delta commits or compaction plans
        for name, timeline in hudi_timeline.timelines(spark, schema).items():
            plans = timeline.pending_compactions()
            deltas = timeline.delta_commits_since_compaction()
            delta_commits = [requested for requested, _, action in timeline.completed if action == "deltacommit"]
            if (plans or deltas >= after) and not unpublished(spark, f"{schema}.{name}", delta_commits):
                due.append((0 if plans else 1, plans[0] if plans else "", -deltas, f"{schema}.{name}", plans))
    done = Compactions()
    started = time.monotonic()
    for _, _, _, table, plans in sorted(due):
        if time.monotonic() - started >= budget_seconds:
            done.deferred.append(table)
            continue
        result = ServiceResult(table=table, table_type="MERGE_ON_READ")
        done.results.append(result)
        try:
            for plan in plans:
                hudi_call(spark, "run_compaction", table, op="run", timestamp=int(plan))
                result.compactions.append(plan)
            if not plans:
                ran = hudi_call(spark, "run_compaction", table, op="scheduleAndExecute",
                                options=f"hoodie.compact.inline.max.delta.commits={after}")
                result.compactions.extend(sorted(str(row["timestamp"]) for row in ran))
        except Exception as exc:  # noqa: BLE001 - reported; the other tables are still compacted
            result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            log.error("compaction of %s failed: %s", table, result.error)
        result.seconds = time.monotonic() - started - sum(r.seconds for r in done.results[:-1])
    if due:
        log.info("compaction: %d table(s) compacted in %.1fs, %d left for the next pass (budget %gs)",
                 len(done.results), time.monotonic() - started, len(done.deferred), budget_seconds)
    return done
