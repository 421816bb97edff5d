"""Schema change: the model's YAML declares a column its silver table lacks (a column
added upstream, then to the YAML), so the next build rebuilds the table from all of
bronze instead of merging: every row gets the column's value, as a full refresh gives;
a dropped upstream column is null from its drop on; nothing is lost. The following
build, with nothing new in bronze, leaves the table as it is. A declared type not every
stored value converts to stops that table with an error, and only that table; so does a
malformed watermark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.cli.main import dbtRunner

from ingestion.pipeline import IngestConfig, run as ingest
from tests.property.streams import ACTOR, EPOCH_MS, SinkFile, Stream, _Position, _record, _wrap
from tests.support import oracle
from tests.support.lakehouse import MODEL_TABLE_SUFFIXES, dbt, drop_schemas, drop_tables, silver_rows
from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

SCHEMA = "bronze_schema_change"
VARS = json.dumps({"cdc_bronze_schema": SCHEMA})
COLUMNS = ["actor_id", "first_name", "last_name", "last_update"]


def stream() -> Stream:
    """Batch 1: actors 1-3 with last names. Batch 2: actor 1 updated; actor 2 updated
    after the source dropped last_name (the field is gone from the event)."""
    pos = _Position(postgres=True)
    lines = []

    def add(op: str, after: dict) -> None:
        pos.next_statement(64)
        lines.append(_wrap(_record(ACTOR, "envelope", op, None, after, pos.fields(), EPOCH_MS, len(lines), "false"),
                           False))

    for key, name in ((1, "ANNA"), (2, "BOB"), (3, "CHEN")):
        add("c", {"actor_id": key, "first_name": name, "last_name": "DOE", "last_update": EPOCH_MS * 1000})
    add("u", {"actor_id": 1, "first_name": "DANA", "last_name": "ROE", "last_update": EPOCH_MS * 1000})
    add("u", {"actor_id": 2, "first_name": "EVE", "last_update": EPOCH_MS * 1000})
    return Stream(ACTOR, "envelope", False, 1, [[SinkFile(0, 0, lines[:3])], [SinkFile(0, 3, lines[3:])]])


def land(spark, changes: Stream, index: int, tmp_path: Path) -> Path:
    """Batch `index` of `changes` added to the sink folder `tmp_path/topics` and ingested
    into bronze; returns the batch alone (`tmp_path/batch-<index>`) for the oracle."""
    landing = tmp_path / "topics"
    changes.write_batch(index, landing)
    ingest(spark, IngestConfig(input_uri=str(landing), bronze_schema=SCHEMA))
    return changes.write_batch(index, tmp_path / f"batch-{index}")


def assert_only_actor_fails(spark, before: list[dict], *error_parts: str, table: str = "actor") -> None:
    """Runs actor and actor_history (same source): actor's build stops with an error
    holding every one of `error_parts` and leaves the rows of silver.`table` as `before`;
    actor_history is built."""
    result = dbtRunner().invoke(["run", "--select", "actor", "actor_history", "--vars", VARS,
                                 "--project-dir", str(ROOT), "--profiles-dir", str(ROOT / "profiles")])
    assert not result.success
    outcome = {r.node.name: (str(r.status), r.message or "") for r in result.result.results}
    assert outcome["actor_history"][0] == "success", outcome
    status, message = outcome["actor"]
    assert status == "error", outcome
    for part in error_parts:
        assert part in message, f"{part!r} not in the error: {message}"
    assert silver_rows(spark, table, COLUMNS, ["actor_id"]) == before  # untouched


def assert_full_refresh_rebuilds_actor(spark, batches: list[Path]) -> None:
    """A deliberate --full-refresh of actor gives the oracle's current state of `batches`."""
    dbt("run", "--select", "actor", "--full-refresh", "--vars", VARS)
    assert silver_rows(spark, "actor", COLUMNS, ["actor_id"]) == oracle.expected_current_state_from_batches(
        batches, "actor")


@pytest.fixture
def cleanup(spark):
    yield
    drop_schemas(spark, [SCHEMA])
    drop_tables(spark, [("silver", model + s) for model in ("actor", "actor_history")
                        for s in (*MODEL_TABLE_SUFFIXES, "__old")])


def test_a_declared_column_the_table_lacks_rebuilds_it(spark, tmp_path: Path, cleanup):
    changes = stream()
    batches = [land(spark, changes, 0, tmp_path)]
    dbt("run", "--select", "actor", "--vars", VARS)

    # What a build made before `last_name` was in the YAML looked like: no such column.
    state = "silver.actor__cdc_state"
    watermark = [r[1] for r in spark.sql(f"show tblproperties {state}").collect() if r[0] == "cdc.watermark"][0]
    spark.sql("create table silver.actor__old using hudi tblproperties (type = 'cow', primaryKey = 'actor_id', "
              "preCombineField = '_cdc_order') as select actor_id, first_name, last_update, _cdc_op, _cdc_order, "
              f"_cdc_source_ts, _cdc_commit_time, _cdc_deleted from {state}")
    spark.sql(f"drop table {state} purge")
    spark.sql(f"alter table silver.actor__old rename to {state}")
    spark.sql(f"alter table {state} set tblproperties ('cdc.watermark' = '{watermark}')")

    batches.append(land(spark, changes, 1, tmp_path))
    result = dbt("run", "--select", "actor", "--vars", VARS)
    assert result.results[0].message == "full refresh"  # rebuilt, not merged
    expected = oracle.expected_current_state_from_batches(batches, "actor")
    assert [r["last_name"] for r in expected] == ["ROE", None, "DOE"]  # 3 untouched keeps its value
    assert silver_rows(spark, "actor", COLUMNS, ["actor_id"]) == expected

    again = dbt("run", "--select", "actor", "--vars", VARS)
    # the table now matches its YAML and bronze has no new commit: left as it is
    assert again.results[0].message == "no new bronze commits"
    assert silver_rows(spark, "actor", COLUMNS, ["actor_id"]) == expected


def test_an_unsafe_type_change_stops_that_table_only(spark, tmp_path: Path, cleanup):
    """The YAML declares last_update a timestamp, but the stored table holds it as a
    string (what a table built before an upstream text -> timestamp change holds): not
    every string converts, so the build of actor stops with an error naming the table,
    the column and both types, while actor_history (same source) is built. A deliberate
    --full-refresh then rebuilds actor."""
    changes = stream()
    batches = [land(spark, changes, 0, tmp_path)]
    dbt("run", "--select", "actor", "--vars", VARS)
    state = "silver.actor__cdc_state"
    watermark = dict(spark.sql(f"show tblproperties {state}").collect())["cdc.watermark"]
    spark.sql("create table silver.actor__old using hudi tblproperties (type = 'cow', primaryKey = 'actor_id', "
              "preCombineField = '_cdc_order') as select actor_id, first_name, last_name, "
              "cast(last_update as string) as last_update, _cdc_op, _cdc_order, _cdc_source_ts, _cdc_commit_time, "
              f"_cdc_deleted from {state}")
    before = silver_rows(spark, "actor__old", COLUMNS, ["actor_id"])
    spark.sql(f"drop table {state} purge")
    spark.sql(f"alter table silver.actor__old rename to {state}")
    spark.sql(f"alter table {state} set tblproperties ('cdc.watermark' = '{watermark}')")

    assert_only_actor_fails(spark, before, state, "last_update", "is string", "declares timestamp",
                            "dbt build --full-refresh --select actor", table="actor__cdc_state")
    assert_full_refresh_rebuilds_actor(spark, batches)


def test_a_malformed_watermark_stops_that_table_only(spark, tmp_path: Path, cleanup):
    """A `cdc.watermark` that is not a Hudi instant (edited by hand, a bad restore) would
    make the incremental window meaningless: the build of that table stops with an error
    naming the table, the value and how to rebuild it, touching nothing; the other model
    on the same source is built; --full-refresh then rebuilds the table."""
    changes = stream()
    batches = [land(spark, changes, 0, tmp_path)]
    dbt("run", "--select", "actor", "--vars", VARS)
    before = silver_rows(spark, "actor", COLUMNS, ["actor_id"])
    spark.sql("alter table silver.actor__cdc_state set tblproperties ('cdc.watermark' = '2024-01-01')")
    batches.append(land(spark, changes, 1, tmp_path))

    assert_only_actor_fails(spark, before, "silver.actor__cdc_state", "malformed cdc.watermark '2024-01-01'",
                            "dbt build --full-refresh --select actor")
    assert_full_refresh_rebuilds_actor(spark, batches)
    watermark = dict(spark.sql("show tblproperties silver.actor__cdc_state").collect())["cdc.watermark"]
    assert watermark.isdigit(), watermark
