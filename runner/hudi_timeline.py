"""Hudi timelines read through Hudi's own meta client (a listing of each table's
`.hoodie` folder, no Spark job): what the runner needs to know between passes, cheaply
enough to ask of every table on every pass."""

from __future__ import annotations

from typing import Any, Iterator

from pyspark.sql import SparkSession

from ingestion.naming import IDENTIFIER, validate_identifier

# Hudi's data-writing actions: a clean, rollback or compaction does not change what a
# model reads (a compaction's commit is a `commit` on merge-on-read, rare in bronze).
DATA_ACTIONS = ("commit", "deltacommit", "replacecommit")


def tables(spark: SparkSession, schema: str, internal: bool = False) -> Iterator[tuple[str, Any]]:
    """(name, meta client) of each Hudi table at `schema`'s location whose name is a plain
    identifier; `_`-prefixed ones (the ingestion's bookkeeping) only with `internal`."""
    validate_identifier(schema, "schema")
    if not spark.catalog.databaseExists(schema):
        return
    names = [row["tableName"] for row in spark.sql(f"show tables in `{schema}`").collect()
             if not row["isTemporary"] and IDENTIFIER.match(row["tableName"])
             and (internal or not row["tableName"].startswith("_"))]
    location = spark.catalog.getDatabase(schema).locationUri.rstrip("/")
    jvm = spark._jvm
    hadoop_conf = spark._jsc.hadoopConfiguration()
    conf = jvm.org.apache.hudi.hadoop.fs.HadoopFSUtils.getStorageConfWithCopy(hadoop_conf)
    for name in sorted(names):
        base = f"{location}/{name}"
        properties = jvm.org.apache.hadoop.fs.Path(base + "/.hoodie/hoodie.properties")
        if not properties.getFileSystem(hadoop_conf).exists(properties):
            continue  # a view, a parquet table, or a table kept elsewhere
        yield name, jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder() \
            .setConf(conf).setBasePath(base).build()


def newest_data_commit(client: Any) -> str | None:
    """The newest completed data commit as `<instant>_<completion time>`, or None."""
    completed = client.getActiveTimeline().getCommitsTimeline().filterCompletedInstants()
    for instant in reversed(list(completed.getInstants())):
        if instant.getAction() in DATA_ACTIONS:
            return f"{instant.requestedTime()}_{instant.getCompletionTime()}"
    return None


def pending_compactions(client: Any) -> list[str]:
    """The instants of the compaction plans scheduled and not yet done, oldest first."""
    return sorted(str(i.requestedTime()) for i in client.getActiveTimeline().filterPendingCompactionTimeline()
                  .getInstants())


def is_merge_on_read(client: Any) -> bool:
    return client.getTableType().name() == "MERGE_ON_READ"


def delta_commits_since_compaction(client: Any) -> int:
    """The completed delta commits after the newest completed compaction (on a
    merge-on-read table a compaction completes as a `commit`)."""
    timeline = client.getActiveTimeline()
    compacted = timeline.getCommitTimeline().filterCompletedInstants().lastInstant()
    since = str(compacted.get().requestedTime()) if compacted.isPresent() else ""
    return sum(1 for instant in timeline.getDeltaCommitTimeline().filterCompletedInstants().getInstants()
               if str(instant.requestedTime()) > since)
