"""Differential property tests on real Spark and Hudi: random change streams (see
`streams.py`) are landed batch by batch through the real ingestion into bronze, and
after every batch an incremental `dbt run` of the silver model must equal

  (a) the full-refresh build of all of bronze: the rows the model's SQL yields when run
      on its own (`dbt compile`: the current state, or every version, over all of
      bronze) after each batch but the last, and after the last a real `dbt run
      --full-refresh` that must reproduce the incremental table and its state table
      (deleted keys included) exactly;
  (b) the oracle, `tests/support/oracle.py`, computed in plain Python from the files.

Each source has a current-state model (hard deletes), MariaDB's also a soft-delete one,
and both an SCD type 2 history model (cdc_history), each checked the same two ways.

Budget: four fixed streams of the hardest cases (late events after a delete; a truncate
and a connector reset; soft-deleted values landing late; late events splitting and
merging history versions), then CDC_PROPERTY_EXAMPLES random streams (default 0: `make
test` runs the four; `make test-long` adds 16) from a fixed seed (CDC_PROPERTY_SEED). Shrinking is off: one example costs real Hudi commits,
so a failure reports the stream as drawn, with its description.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, seed, settings

from ingestion.naming import table_for_topic
from ingestion.pipeline import IngestConfig, run as ingest
from tests.support import oracle
from tests.support.lakehouse import MODEL_TABLE_SUFFIXES, dbt, drop_tables, history_rows, silver_rows
from tests.support.paths import ROOT

from .streams import (SOURCES, Source, Stream, change_streams, history_versions_split_and_merged,
                      late_events_after_delete, soft_deleted_values_arrive_late, truncate_and_reset)

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("CDC_PROPERTY_EXAMPLES", "0"))
SEED = int(os.environ.get("CDC_PROPERTY_SEED", "20261122"))
META = ["_cdc_op", "_cdc_order", "_cdc_source_ts", "_cdc_commit_time"]
SOFT_META = ["_cdc_is_deleted", "_cdc_deleted_at", "_cdc_values_order"]
HISTORY_META = ["_cdc_valid_from", "_cdc_valid_to", "_cdc_is_current", "_cdc_op", "_cdc_order", "_cdc_valid_to_order",
                "_cdc_commit_time"]

REPORT = ROOT / "build" / "reports" / "property_tests.json"
TRIED = {"streams": 0, "batches": 0, "changes": 0, "duplicates": 0, "late_files": 0, "truncates": 0,
         "resets": 0}


def bronze_table(source: Source) -> str:
    return f"bronze.{table_for_topic(source.topic)}"


def reset(spark, source: Source) -> None:
    """Drop the source's bronze change log and its silver tables (and their folders)."""
    silver = [("silver", model + suffix) for model, _ in source.models()
              for suffix in MODEL_TABLE_SUFFIXES]
    drop_tables(spark, [("bronze", table_for_topic(source.topic)), *silver])


class CompiledSql(dict):
    """model -> compiled SQL; a short repr, as hypothesis prints the test's arguments."""

    def __repr__(self) -> str:
        return f"<compiled SQL of {', '.join(self)}>"


@pytest.fixture(scope="module")
def model_sql(spark) -> CompiledSql:
    """Each model's SQL as `dbt compile` gives it: what its table holds, from all of bronze."""
    compiled = CompiledSql()
    for source in SOURCES:
        for model, _ in source.models():
            compiled[model] = dbt("compile", "--select", model).results[0].node.compiled_code
    yield compiled
    for source in SOURCES:
        reset(spark, source)
    # what was tried, for the notes (build/ is git-ignored)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({"examples": EXAMPLES, "seed": SEED, **TRIED}, indent=2) + "\n")


def columns_of(source: Source) -> list[str]:
    return list(oracle.TABLES[source.table]["columns"])


def meta_of(deletes: str) -> list[str]:
    return META + (SOFT_META if deletes == "soft" else [])


def model_rows(spark, source: Source, sql: str, deletes: str) -> list[dict]:
    """The rows the model's own SQL returns now (hard deletes: deleted keys left out;
    soft: flagged)."""
    columns = ", ".join(f"`{c}`" for c in columns_of(source) + meta_of(deletes))
    return [row.asDict(recursive=True) for row in spark.sql(
        f"select {columns} from ({sql}) as model order by `{source.primary_key}`").collect()]


def check_batch(spark, stream: Stream, batch: int, batch_dirs: list[Path], compiled: CompiledSql | None) -> None:
    """Silver after `batch` against the oracle and, given `compiled`, against the rows
    the model's own SQL yields now."""
    source = stream.source
    key = [source.primary_key]
    what = f"after batch {batch + 1} of {stream.describe()}"
    for model, deletes in source.models():
        if deletes == "history":
            expected = oracle.expected_history(oracle.files_in(batch_dirs, source.table), source.table)
            actual = history_rows(spark, f"silver.`{model}`", columns_of(source), [source.primary_key])
            assert actual == expected, f"silver.{model} != oracle {what}:\n got  {actual}\n want {expected}"
            if compiled is None:
                continue
            full = history_rows(spark, f"({compiled[model]}) as model", columns_of(source), [source.primary_key])
            assert actual == full, f"silver.{model} (incremental) != its model's SQL {what}"
            continue
        expected = oracle.expected_current_state_from_batches(batch_dirs, source.table, deletes)
        extra = ["_cdc_is_deleted"] if deletes == "soft" else []
        actual = silver_rows(spark, model, columns_of(source) + extra, key)
        assert actual == expected, f"silver.{model} != oracle {what}:\n got  {actual}\n want {expected}"
        if compiled is None:
            continue
        incremental = silver_rows(spark, model, columns_of(source) + meta_of(deletes), key)
        assert incremental == model_rows(spark, source, compiled[model], deletes), (
            f"silver.{model} (incremental) != its model's SQL {what}")


def tables_with_meta(spark, source: Source) -> list[list[dict]]:
    """Every model's silver rows with metadata, and the hard-delete models' state tables
    (deleted keys included)."""
    key = [source.primary_key]
    tables = []
    for model, deletes in source.models():
        if deletes == "history":
            tables.append(silver_rows(spark, model, columns_of(source) + HISTORY_META, key + ["_cdc_order"]))
            continue
        tables.append(silver_rows(spark, model, columns_of(source) + meta_of(deletes), key))
        if deletes == "hard":
            tables.append(silver_rows(spark, f"{model}__cdc_state", columns_of(source) + META + ["_cdc_deleted"], key))
    return tables


@settings(max_examples=max(EXAMPLES, 1), deadline=None, database=None, print_blob=True,
          phases=[Phase.explicit, Phase.generate] if EXAMPLES else [Phase.explicit],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@seed(SEED)
@given(stream=change_streams())
@example(stream=late_events_after_delete())
@example(stream=truncate_and_reset())
@example(stream=soft_deleted_values_arrive_late())
@example(stream=history_versions_split_and_merged())
def test_incremental_equals_full_refresh_and_oracle(spark, run_dir: Path, model_sql, stream: Stream):
    source = stream.source
    reset(spark, source)
    base = run_dir / "property" / uuid.uuid4().hex[:8]
    landing = base / "landing" / "topics"
    landing.mkdir(parents=True)  # the sink's folder exists before its first file (a batch may land nothing)
    batch_dirs: list[Path] = []
    for batch in range(len(stream.batches)):
        # Each batch is also kept in its own folder for the oracle.
        batch_dirs.append(stream.write_batch(batch, base / "batches" / str(batch)))
        stream.write_batch(batch, landing)
        summary = ingest(spark, IngestConfig(input_uri=str(landing), bronze_schema="bronze"))
        assert summary.quarantined == 0, summary.render()
        if not spark.catalog.tableExists(bronze_table(source)):
            # every file so far is late: nothing landed, nothing to build yet
            assert oracle.expected_current_state_from_batches(batch_dirs, source.table) == []
            continue
        models = [model for model, _ in source.models()]
        dbt("run", "--select", *models)
        # After the last batch the real `dbt run --full-refresh` below is compared instead.
        last = batch == len(stream.batches) - 1
        check_batch(spark, stream, batch, batch_dirs, None if last else model_sql)
        TRIED["batches"] += 1

    incremental = tables_with_meta(spark, source)
    dbt("run", "--select", *[model for model, _ in source.models()], "--full-refresh")
    assert tables_with_meta(spark, source) == incremental, (
        f"dbt run --full-refresh gave other silver/state tables than the incremental runs: {stream.describe()}")
    TRIED["streams"] += 1
    TRIED["changes"] += stream.changes
    TRIED["duplicates"] += stream.duplicates
    TRIED["late_files"] += stream.late_files
    TRIED["truncates"] += stream.truncates
    TRIED["resets"] += stream.resets
