"""Hudi timelines without a Spark job: what the runner needs to know between passes,
cheaply enough to ask of every table on every pass.

`timelines` reads every table of a schema from one listing of their timeline folders
(`<table>/.hoodie/timeline/`, Hudi 1.x's layout), whatever the number of tables: a meta
client per table costs a metastore look-up, a properties file and a listing each, which
grows with the tables a database has (docs/reference/what-a-pass-builds.md).
`Timeline` answers what Hudi's meta client would, from the files' names."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from pyspark.sql import SparkSession

from core.identifiers import IDENTIFIER, validate_identifier

# Hudi's data-writing actions: a clean, rollback or compaction does not change what a
# model reads (a compaction's commit is a `commit` on merge-on-read, rare in bronze).
DATA_ACTIONS = ("commit", "deltacommit", "replacecommit")


# A timeline file's name: `<requested>_<completed>.<action>` once completed, else
# `<requested>.<action>.requested|inflight` (a commit's inflight is `<requested>.inflight`).
_INSTANT_FILE = re.compile(r"^(\d+)(?:_(\d+))?(?:\.(?!(?:requested|inflight)$)([a-z]+))?(?:\.(requested|inflight))?$")
# A timeline file's path, as the listing's text gives it: table, then file name.
_TIMELINE_PATH = re.compile(r"/([^/\n]+)/\.hoodie/timeline/([^/\n]+)$", re.MULTILINE)
# Actions that complete a compaction or rewrite base files on a merge-on-read table.
_COMMIT_ACTIONS = ("commit", "replacecommit")


@dataclass
class Timeline:
    """One table's active timeline, from its files' names."""

    completed: list[tuple[str, str, str]] = field(default_factory=list)  # (requested, completed, action)
    pending: list[tuple[str, str]] = field(default_factory=list)  # (requested, action) not completed

    def newest_data_commit(self) -> str | None:
        """As `newest_data_commit` of a meta client: `<instant>_<completion time>`."""
        data = [(requested, done) for requested, done, action in self.completed if action in DATA_ACTIONS]
        return "_".join(max(data)) if data else None

    def pending_compactions(self) -> list[str]:
        return [requested for requested, action in self.pending if action == "compaction"]

    def delta_commits_since_compaction(self) -> int:
        since = max((requested for requested, _, action in self.completed if action in _COMMIT_ACTIONS),
                    default="")
        return sum(1 for requested, _, action in self.completed if action == "deltacommit" and requested > since)


def parse_timeline_files(names: Iterable[str]) -> Timeline:
    """A table's Timeline from the names of its timeline folder's files (others ignored)."""
    timeline = Timeline()
    pending: dict[str, str] = {}
    for name in names:
        match = _INSTANT_FILE.match(name)
        if not match:
            continue
        requested, completed, action, state = match.groups()
        if completed and action and not state:
            timeline.completed.append((requested, completed, action))
        elif state and (action or requested not in pending):
            pending[requested] = action or "commit"  # a bare `<requested>.inflight` is a commit's
    done = {requested for requested, _, _ in timeline.completed}
    timeline.completed.sort()
    timeline.pending = sorted((requested, action) for requested, action in pending.items() if requested not in done)
    return timeline


def catalog_tables(spark: SparkSession, schema: str) -> set[str]:
    """The tables and views `schema` has in the catalog (none when it does not exist)."""
    validate_identifier(schema, "schema")
    if not spark.catalog.databaseExists(schema):
        return set()
    return {row["tableName"] for row in spark.sql(f"show tables in `{schema}`").collect() if not row["isTemporary"]}


def timelines(spark: SparkSession, schema: str, internal: bool = False,
              tables: set[str] | None = None) -> dict[str, Timeline]:
    """Per Hudi table of `schema` registered in the catalog under a plain identifier
    (`_`-prefixed ones only with `internal`): its active timeline, from one listing of
    `<schema location>/*/.hoodie/timeline/*`. Tables without that folder (views,
    parquet tables, tables kept elsewhere) are left out. `tables`: the schema's
    catalog_tables when the caller has them already."""
    tables = catalog_tables(spark, schema) if tables is None else tables
    if not tables:
        return {}
    names = {name for name in tables if IDENTIFIER.match(name) and (internal or not name.startswith("_"))}
    location = spark.catalog.getDatabase(schema).locationUri.rstrip("/")
    jvm = spark._jvm
    pattern = jvm.org.apache.hadoop.fs.Path(location + "/*/.hoodie/timeline/*")
    fs = pattern.getFileSystem(spark._jsc.hadoopConfiguration())
    # The whole listing as one string: a py4j call per file would cost more than the
    # meta clients it replaces.
    listing = jvm.org.apache.spark.deploy.SparkHadoopUtil.get().globPath(fs, pattern).mkString("\n")
    files: dict[str, list[str]] = {}
    for table, name in _TIMELINE_PATH.findall(listing):
        if table in names:
            files.setdefault(table, []).append(name)
    return {table: parse_timeline_files(found) for table, found in sorted(files.items())}
