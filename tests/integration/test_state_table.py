"""The state table behind a hard-delete silver model is merge-on-read with event-time
ordering, the combination under which Hudi is known to skip deletes (apache/hudi#19978:
a MERGE INTO ... DELETE loses against the stored row's ordering value). Silver never
deletes that way: a delete is an upserted row flagged `_cdc_deleted`, and a reset's
superseded rows are upserted back with the delete marker and their own order. This
proves, on real Spark and Hudi, that deletes hold across log files and a compaction:
a delete removes the row, a late older event does not bring it back (before and after
the compaction), a re-insert after the delete does, and a truncate removes every row
older than it. Each step is checked against the oracle of the files landed so far, on
events written here and on recorded real Debezium output (PostgreSQL: a delete, its
Kafka tombstone, and the key inserted again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion.pipeline import IngestConfig, run as ingest
from runner import table_services
from tests.support import oracle
from tests.support.lakehouse import MODEL_TABLE_SUFFIXES, dbt, dbt_invoke, drop_schemas, drop_tables, silver_rows
from tests.support.paths import ROOT
from testdata.sink_formats import write_recorded_json

pytestmark = pytest.mark.integration

SCHEMA = "bronze_state_table"
TOPIC = "pagila.public.actor"
VARS = json.dumps({"cdc_bronze_schema": SCHEMA})
COLUMNS = ["actor_id", "first_name", "last_name", "last_update"]
STATE = "actor__cdc_state"
RECORDED_ACTOR = ROOT / "tests" / "fixtures" / "debezium" / "pagila-envelope" / "pagila.public.actor.jsonl"


def event(op: str, lsn: int, key: int, name: str | None, snapshot: str = "false") -> str:
    image = {"actor_id": key, "first_name": name, "last_name": "DOE", "last_update": 1_700_000_000_000_000 + lsn}
    source = {"connector": "postgresql", "db": "pagila", "schema": "public", "table": "actor", "lsn": lsn,
              "txId": lsn, "ts_ms": 1_700_000_000_000 + lsn, "snapshot": snapshot}
    before, after = (image, None) if op == "d" else (None, image)
    if op == "t":
        before = after = None
    return json.dumps({"before": before, "after": after, "source": source, "op": op,
                       "ts_ms": 1_700_000_000_000 + lsn})


@pytest.fixture
def landing(spark, tmp_path: Path):
    yield tmp_path
    drop_schemas(spark, [SCHEMA])
    drop_tables(spark, [("silver", "actor" + s) for s in MODEL_TABLE_SUFFIXES])


def land_and_build(spark, root: Path, batches: list[Path], offset: int, lines: list[str],
                   expect_failure: bool = False) -> None:
    """One sink file of `lines` at `offset`, kept in its own batch folder for the oracle,
    landed with everything before it; then the incremental build of actor (not when
    `expect_failure`: the caller runs it)."""
    batch = root / "batches" / str(len(batches))
    for folder in (batch, root / "landing"):
        partition = folder / "topics" / TOPIC / "partition=0"
        partition.mkdir(parents=True, exist_ok=True)
        (partition / f"{TOPIC}+0+{offset}.json").write_text("\n".join(lines) + "\n")
    batches.append(batch)
    summary = ingest(spark, IngestConfig(input_uri=str(root / "landing" / "topics"), bronze_schema=SCHEMA))
    assert summary.quarantined == 0, summary.render()
    if not expect_failure:
        dbt("run", "--select", "actor", "--vars", VARS)


def assert_silver_is_oracle(spark, batches: list[Path], what: str) -> None:
    expected = oracle.expected_current_state_from_batches(batches, "actor")
    assert silver_rows(spark, "actor", COLUMNS, ["actor_id"]) == expected, what


def deleted_keys(spark) -> dict[int, str]:
    """key -> `_cdc_op` of the state table's rows flagged deleted."""
    return dict(spark.sql(f"select actor_id, _cdc_op from silver.{STATE} where _cdc_deleted").collect())


def test_deletes_hold_on_merge_on_read_across_a_compaction(spark, landing: Path):
    batches: list[Path] = []
    land_and_build(spark, landing, batches, 0, [event("c", 10, 1, "ANNA"), event("c", 11, 2, "BOB"),
                                                event("c", 12, 3, "CARL")])
    properties = dict(spark.sql(f"show tblproperties silver.{STATE}").collect())
    assert properties.get("type") == "mor" and properties.get("hoodie.index.type") == "BUCKET", properties

    land_and_build(spark, landing, batches, 3, [event("d", 20, 1, "ANNA")])
    assert_silver_is_oracle(spark, batches, "a delete in a log file")
    assert deleted_keys(spark) == {1: "d"}

    # An update of key 1 older than its delete, landed after it: no resurrection.
    land_and_build(spark, landing, batches, 4, [event("u", 15, 1, "LATE")])
    assert_silver_is_oracle(spark, batches, "a late update after the delete, before compaction")

    # Compact now (the table compacts inline every few delta commits): base files rewritten
    # with the log files merged in, the deleted key's row kept as a flagged row.
    compacted = spark.sql(f"call run_compaction(op => 'scheduleAndExecute', table => 'silver.{STATE}', "
                          "options => 'hoodie.compact.inline.max.delta.commits=1')").collect()
    assert compacted, "no compaction ran"
    assert_silver_is_oracle(spark, batches, "the same after a compaction")
    assert deleted_keys(spark) == {1: "d"}

    land_and_build(spark, landing, batches, 5, [event("u", 16, 1, "LATER"), event("d", 30, 2, "BOB")])
    assert_silver_is_oracle(spark, batches, "a late update after the compaction, and a new delete")
    assert deleted_keys(spark) == {1: "d", 2: "d"}

    land_and_build(spark, landing, batches, 7, [event("c", 40, 1, "ANNA AGAIN")])
    assert_silver_is_oracle(spark, batches, "a re-insert after the delete")
    assert deleted_keys(spark) == {2: "d"}

    # A truncate supersedes every older event: live rows and deleted keys leave the state
    # table, upserted back with the delete marker; a later insert stays.
    land_and_build(spark, landing, batches, 8, [event("t", 50, 0, None), event("c", 51, 4, "DANA")])
    assert_silver_is_oracle(spark, batches, "a truncate")
    assert [r[0] for r in spark.sql(f"select actor_id from silver.{STATE} order by 1").collect()] == [4]


def recent_rows(spark) -> list[tuple[int, str, str | None]]:
    """(key, `_cdc_op`, first_name) of every row of the recent table's generations the
    model's view reads (its `cdc.generations`), sorted."""
    generations = dict(spark.sql("show tblproperties silver.actor").collect())["cdc.generations"]
    if not generations:
        return []
    rows = spark.sql("select actor_id, _cdc_op, first_name from silver.actor__cdc_recent "
                     f"where cdc_generation in ({generations})").collect()
    return sorted((r[0], r[1], r[2]) for r in rows)


def base_file_names(spark) -> dict[int, str]:
    """key -> first_name of the state table's base files, as the read-optimized table reads them."""
    return dict(spark.sql(f"select actor_id, first_name from silver.{STATE}_ro").collect())


def test_the_view_reads_base_files_and_the_recent_table(spark, landing: Path):
    """Silver's view reads the state table's base files and lays the recent table over them
    (docs/decisions/silver-read-path.md): what the builds since the last compaction wrote,
    a late event left out of it by the look-up of the base files, a compaction emptying it
    at the next build, a truncate's tombstones hiding base rows. The view equals the oracle
    and the state table's own snapshot at every step, and a full refresh at the end."""
    def check(what: str) -> None:
        assert_silver_is_oracle(spark, batches, what)
        snapshot = spark.sql(f"select actor_id, first_name from silver.{STATE} where not _cdc_deleted").collect()
        assert sorted(spark.sql("select actor_id, first_name from silver.actor").collect()) == sorted(snapshot), what

    batches: list[Path] = []
    land_and_build(spark, landing, batches, 0, [event("c", 10, 1, "ANNA"), event("c", 11, 2, "BOB"),
                                                event("c", 12, 3, "CARL")])
    check("the first build")
    assert recent_rows(spark) == []
    assert base_file_names(spark) == {1: "ANNA", 2: "BOB", 3: "CARL"}

    land_and_build(spark, landing, batches, 3, [event("u", 20, 2, "BOBBY"), event("d", 21, 3, "CARL")])
    check("an update and a delete in log files")
    # the base files do not hold them yet: the view has them from the recent table
    assert base_file_names(spark) == {1: "ANNA", 2: "BOB", 3: "CARL"}
    assert recent_rows(spark) == [(2, "u", "BOBBY"), (3, "d", None)]

    # late events: key 2's is appended and loses against the newer row of the recent
    # table; key 1's loses against the base files (looked up, as the batch is older than
    # the newest stored row) and is left out
    land_and_build(spark, landing, batches, 5, [event("u", 15, 2, "LATE"), event("u", 5, 1, "EARLY")])
    check("late events")
    assert recent_rows(spark) == [(2, "u", "BOBBY"), (2, "u", "LATE"), (3, "d", None)]

    compacted = spark.sql(f"call run_compaction(op => 'scheduleAndExecute', table => 'silver.{STATE}', "
                          "options => 'hoodie.compact.inline.max.delta.commits=1')").collect()
    assert compacted, "no compaction ran"
    assert base_file_names(spark) == {1: "ANNA", 2: "BOBBY", 3: None}
    check("after a compaction, the recent table not yet emptied")
    land_and_build(spark, landing, batches, 7, [event("c", 30, 4, "DORA")])
    check("the build after the compaction")
    assert recent_rows(spark) == [(4, "c", "DORA")]

    # a truncate: every stored key gets a tombstone in the recent table (the base files
    # still hold their rows; a new key may go straight to a base file), then a new row
    # (built keeping one replaced generation: the older ones no view names any more go)
    land_and_build(spark, landing, batches, 8, [event("t", 40, 0, None), event("c", 41, 5, "EVA")],
                   expect_failure=True)
    dbt("run", "--select", "actor", "--vars", json.dumps({"cdc_bronze_schema": SCHEMA,
                                                          "cdc_read_retention_generations": 1}))
    check("a truncate")
    marker = "_cdc_delete"
    assert recent_rows(spark) == [(1, marker, "ANNA"), (2, marker, "BOBBY"), (3, marker, None),
                                  (4, marker, "DORA"), (4, "c", "DORA"), (5, "c", "EVA")]
    assert {1, 2, 3} <= set(base_file_names(spark))
    live = dict(spark.sql("show tblproperties silver.actor").collect())["cdc.generations"].split(",")
    stored = [row[0].split("=")[1] for row in spark.sql("show partitions silver.actor__cdc_recent").collect()]
    assert len(live) == 2 and sorted(stored) == sorted(live), (live, stored)

    incremental = sorted(spark.sql("select * from silver.actor").collect())
    dbt("run", "--select", "actor", "--vars", VARS, "--full-refresh")
    assert sorted(spark.sql("select * from silver.actor").collect()) == incremental
    assert recent_rows(spark) == []


def recorded_deleted_keys(upto: int) -> dict[int, str]:
    """actor_id -> 'd' for the keys whose latest recorded event up to offset `upto` is a
    delete, read from the fixture itself (its Kafka tombstones carry no event)."""
    latest: dict[int, str] = {}
    for line in RECORDED_ACTOR.read_text().splitlines():
        record = json.loads(line)
        if record["offset"] > upto or record["value"] is None:
            continue
        payload = json.loads(record["value"])["payload"]
        latest[(payload["after"] or payload["before"])["actor_id"]] = payload["op"]
    return {key: op for key, op in latest.items() if op == "d"}


def test_recorded_debezium_delete_and_reinsert_on_merge_on_read(spark, landing: Path):
    """Real pgoutput records of actor: inserts and updates, then a delete with its Kafka
    tombstone, a compaction, then the deleted key inserted again."""
    files = sorted(write_recorded_json(RECORDED_ACTOR, landing / "recorded", records_per_file=1),
                   key=lambda path: int(path.stem.rsplit("+", 1)[1]))
    topics = landing / "landing" / "topics"
    delete_offset = next(i for i, line in enumerate(RECORDED_ACTOR.read_text().splitlines())
                         if json.loads(line)["value"] and json.loads(json.loads(line)["value"])["payload"]["op"] == "d")
    for upto in (delete_offset - 1, delete_offset + 1, len(files) - 1):
        for path in files:
            if int(path.stem.rsplit("+", 1)[1]) <= upto:
                target = topics / path.parent.parent.name / path.parent.name / path.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
        summary = ingest(spark, IngestConfig(input_uri=str(topics), bronze_schema=SCHEMA))
        assert summary.quarantined == 0, summary.render()
        dbt("run", "--select", "actor", "--vars", VARS)
        if upto == delete_offset + 1:
            compacted = spark.sql(f"call run_compaction(op => 'scheduleAndExecute', table => 'silver.{STATE}', "
                                  "options => 'hoodie.compact.inline.max.delta.commits=1')").collect()
            assert compacted, "no compaction ran"
        expected = oracle.expected_current_state(oracle.files_in([topics], "actor"), "actor")
        assert silver_rows(spark, "actor", COLUMNS, ["actor_id"]) == expected, f"up to offset {upto}"
        assert deleted_keys(spark) == recorded_deleted_keys(upto), f"up to offset {upto}"
    assert recorded_deleted_keys(delete_offset + 1), "the fixture has no delete: the test would prove nothing"


def stored_reset_groups(spark) -> list[dict]:
    return json.loads(dict(spark.sql(f"show tblproperties silver.{STATE}").collect())["cdc.reset_groups"])


def last_batch_resets_source(run_dir: Path) -> str:
    """What the cdc_resets stage of the last batch statement in dbt's log reads from."""
    log = (run_dir / "dbt-logs" / "dbt.log").read_text()
    stage = log[log.rindex("cdc_resets as ("):]
    return stage[stage.index("from cdc_"):].split()[1]


def test_resets_come_from_the_window_and_the_groups_earlier_builds_kept(spark, landing: Path, run_dir: Path):
    """An incremental build finds resets in its window only, merged with the reset groups
    earlier builds kept (`cdc.reset_groups`), not by scanning all of bronze: a
    re-snapshot whose reads span two builds completes in the second and removes the row
    it no longer holds; a truncate and a change after it follow. Each build equals the
    oracle, and the last the full refresh."""
    batches: list[Path] = []
    land_and_build(spark, landing, batches, 0, [event("c", 10, 1, "ANNA"), event("c", 11, 2, "BOB"),
                                                event("c", 12, 3, "CARL")])
    assert stored_reset_groups(spark) == []

    # a connector reset's snapshot reads keys 1 and 2 (not 3) at one position; its last
    # read lands in the next build
    land_and_build(spark, landing, batches, 3, [event("r", 50, 1, "ANNA", "first")])
    assert last_batch_resets_source(run_dir) == "cdc_window"
    assert_silver_is_oracle(spark, batches, "an incomplete snapshot supersedes nothing yet")
    [group] = stored_reset_groups(spark)
    assert (group["partition"], group["last_offset"], group.get("complete_snapshot_position")) == (0, 3, None), group

    land_and_build(spark, landing, batches, 4, [event("r", 50, 2, "BOB", "last")])
    assert last_batch_resets_source(run_dir) == "cdc_window"
    assert_silver_is_oracle(spark, batches, "the snapshot completed in a later build")
    assert [r["actor_id"] for r in silver_rows(spark, "actor", ["actor_id"], ["actor_id"])] == [1, 2]
    [group] = stored_reset_groups(spark)
    assert (group["last_offset"], group["complete_snapshot_position"]) == (4, group["position"]), group

    land_and_build(spark, landing, batches, 5, [event("t", 60, 0, None)])
    land_and_build(spark, landing, batches, 6, [event("c", 70, 4, "DORA")])
    assert_silver_is_oracle(spark, batches, "a truncate, then a new row")
    assert ["truncated_before" in g for g in stored_reset_groups(spark)] == [False, True]

    incremental, groups = silver_rows(spark, "actor", COLUMNS, ["actor_id"]), stored_reset_groups(spark)
    dbt("run", "--select", "actor", "--vars", VARS, "--full-refresh")
    assert last_batch_resets_source(run_dir) == "cdc_change_log"
    assert silver_rows(spark, "actor", COLUMNS, ["actor_id"]) == incremental
    assert stored_reset_groups(spark) == groups  # all of bronze grouped at once: the same groups

    # a property that is not ours fails the build with the way out, before anything is written
    spark.sql(f"alter table silver.{STATE} set tblproperties ('cdc.reset_groups' = '{{\"position\": 1}}')")
    land_and_build(spark, landing, batches, 7, [event("c", 80, 5, "EVE")], expect_failure=True)
    result = dbt_invoke("run", "--select", "actor", "--vars", VARS)
    assert not result.success and "malformed cdc.reset_groups" in str(result.result), result.result
    assert "dbt build --full-refresh --select actor" in str(result.result)


def test_rows_written_by_hand_reach_the_view_with_a_build(spark, landing: Path):
    """An UPDATE of the state table by hand is a delta commit no view published: the view
    does not show it yet (its base files and generations are as they were) and the
    runner's compaction leaves the table alone; a build publishes it, with new bronze
    data or, without any, when told to (var cdc_publish), and a compaction after that
    keeps it (read_path.sql: cdc_write_unpublished). A build alters the view in place
    (a drop and a create would leave readers a moment without it), and a build killed
    between the view's new text and its properties leaves nothing unpublished behind."""
    def names() -> dict[int, str]:
        return dict(spark.sql("select actor_id, first_name from silver.actor").collect())

    batches: list[Path] = []
    land_and_build(spark, landing, batches, 0, [event("c", 10, 1, "ANNA"), event("c", 11, 2, "BOB")])
    spark.sql(f"update silver.{STATE} set first_name = 'HAND' where actor_id = 1")
    assert names() == {1: "ANNA", 2: "BOB"}
    assert table_services.unpublished(spark, f"silver.{STATE}")
    dbt("run", "--select", "actor", "--vars", json.dumps({"cdc_bronze_schema": SCHEMA, "cdc_publish": True}))
    assert names() == {1: "HAND", 2: "BOB"}
    assert not table_services.unpublished(spark, f"silver.{STATE}")

    spark.sql(f"update silver.{STATE} set first_name = 'HANDS' where actor_id = 1")
    land_and_build(spark, landing, batches, 2, [event("u", 20, 2, "BOBBY")])
    assert names() == {1: "HANDS", 2: "BOBBY"}
    assert spark.sql(f"call run_compaction(op => 'scheduleAndExecute', table => 'silver.{STATE}', "
                     "options => 'hoodie.compact.inline.max.delta.commits=1')").collect(), "no compaction ran"
    assert names() == {1: "HANDS", 2: "BOBBY"}

    # the build's swap alters the view: the metastore keeps the view it created
    def created() -> str:
        return dict((r[0], r[1]) for r in spark.sql("describe table extended silver.actor").collect())["Created Time"]

    def properties() -> dict[str, str]:
        return {k: v for k, v in spark.sql("show tblproperties silver.actor").collect() if k.startswith("cdc.")}

    view_created, earlier = created(), properties()
    land_and_build(spark, landing, batches, 3, [event("u", 30, 2, "BOBO"), event("c", 31, 3, "CARL")])
    assert created() == view_created
    assert names() == {1: "HANDS", 2: "BOBO", 3: "CARL"}
    # as a build killed after the view's new text, before its properties, leaves them
    spark.sql("alter view silver.actor set tblproperties ("
              + ", ".join(f"'{k}' = '{v}'" for k, v in earlier.items()) + ")")
    assert names() == {1: "HANDS", 2: "BOBO", 3: "CARL"}
    assert table_services.unpublished(spark, f"silver.{STATE}"), "the runner would compact the killed build's rows"
    land_and_build(spark, landing, batches, 5, [event("u", 40, 1, "ANNE")])
    assert names() == {1: "ANNE", 2: "BOBO", 3: "CARL"}
    assert not table_services.unpublished(spark, f"silver.{STATE}")
