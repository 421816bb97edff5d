"""A silver model with dbt's `partition_by` keeps each key once, in the Hive-style folder
of its latest values (`city_id=<value>`): an update that changes the partition column
moves the row, a delete leaves no row behind in any partition (the state table's flagged
row, its values nulled, sits in Hudi's default partition), a late older event brings
nothing back, a delete then a re-insert elsewhere ends with one live row, and a truncate
removes every row it supersedes. A partition_by added to a built model, or removed from
one, rebuilds its tables from bronze, saying why. Both delete modes (`address` with hard deletes, a copy
with `cdc_deletes: soft`) are built incrementally, build after build, and with
--full-refresh, each time compared row by row with the oracle. And a partition_by that
names no column, a partitioned history model, a partition column of a type that makes
no folder name or hudi_options that would replace the global index stop before anything
is written, saying how to fix them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ingestion.pipeline import IngestConfig, run as ingest
from tests.support import oracle
from tests.support.lakehouse import (MODEL_TABLE_SUFFIXES, dbt_invoke, drop_schemas, drop_tables, project_copy,
                                     silver_rows, table_folder)

pytestmark = pytest.mark.integration

SCHEMA = "bronze_partitioned"
TOPIC = "pagila.public.address"
VARS = json.dumps({"cdc_bronze_schema": SCHEMA})
COLUMNS = list(oracle.TABLES["address"]["columns"])
STATE = "address__cdc_state"
SOFT = "address_soft"
DEFAULT_PARTITION = "city_id=__HIVE_DEFAULT_PARTITION__"


def event(op: str, lsn: int, key: int, city: int | None = None, text: str = "") -> str:
    """A Debezium envelope of public.address; a delete's before-image holds the key and
    the defaults REPLICA IDENTITY DEFAULT gives the other columns (city_id 0)."""
    image = {"address_id": key, "address": f"{key} {text or 'MAIN'} ST", "address2": None, "district": "D",
             "city_id": city, "postal_code": "1000", "phone": "555", "last_update": 1_700_000_000_000_000 + lsn}
    source = {"connector": "postgresql", "db": "pagila", "schema": "public", "table": "address", "lsn": lsn,
              "txId": lsn, "ts_ms": 1_700_000_000_000 + lsn, "snapshot": "false"}
    before, after = None, image
    if op == "d":
        before, after = {**{c: None for c in COLUMNS}, "address_id": key, "city_id": 0, "address": "",
                         "district": "", "phone": "", "last_update": 0}, None
    elif op == "t":
        after = None
    return json.dumps({"before": before, "after": after, "source": source, "op": op,
                       "ts_ms": 1_700_000_000_000 + lsn})


def partitioned_project(tmp_path: Path, configs: dict[str, dict] | None = None) -> Path:
    """A copy of the project whose `address` is partitioned by city_id, with `address_soft`
    (address with soft deletes, partitioned too); `configs` replaces those configs, or sets
    other models' (model -> config)."""
    project = project_copy(tmp_path)
    folder = project / "models" / "silver"
    (folder / f"{SOFT}.sql").write_text((folder / "address.sql").read_text())
    configs = configs or {"address": {"partition_by": ["city_id"]},
                          SOFT: {"partition_by": "city_id", "cdc_deletes": "soft"}}
    for models_yml in (folder / "_silver__models.yml", folder / "history" / "_history__models.yml"):
        spec = yaml.safe_load(models_yml.read_text())
        if models_yml.parent == folder:
            address = next(node for node in spec["models"] if node["name"] == "address")
            spec["models"].append({"name": SOFT, "description": "address with soft deletes",
                                   "columns": [{k: v for k, v in column.items() if k != "data_tests"}
                                               for column in address["columns"]]})
        for node in spec["models"]:
            if node["name"] in configs:
                node.setdefault("config", {}).update(configs[node["name"]])
        models_yml.write_text(yaml.safe_dump(spec, sort_keys=False))
    return project


@pytest.fixture
def landing(spark, tmp_path: Path):
    yield tmp_path
    drop_schemas(spark, [SCHEMA])
    drop_tables(spark, [("silver", name + suffix) for name in ("address", SOFT)
                        for suffix in MODEL_TABLE_SUFFIXES])


def land(spark, root: Path, offset: int, lines: list[str]) -> None:
    """One sink file of `lines` at `offset`, ingested with everything landed before it."""
    partition = root / "landing" / "topics" / TOPIC / "partition=0"
    partition.mkdir(parents=True, exist_ok=True)
    (partition / f"{TOPIC}+0+{offset}.json").write_text("\n".join(lines) + "\n")
    summary = ingest(spark, IngestConfig(input_uri=str(root / "landing" / "topics"), bronze_schema=SCHEMA))
    assert summary.quarantined == 0, summary.render()


def build(project: Path, *flags: str) -> None:
    result = dbt_invoke("run", "--select", "address", SOFT, "--vars", VARS, "--target-path", str(project / "target"),
                        *flags, project=project)
    assert result.success, [str(r.message) for r in result.result.results] if result.result else result.exception


def stored(spark, table: str, deleted_flag: str) -> list[dict]:
    return [row.asDict() for row in spark.sql(
        f"select address_id, city_id, {deleted_flag} as deleted, _hoodie_partition_path as path, "
        f"_hoodie_file_name as file from silver.{table}").collect()]


def assert_partitioned_silver_is_oracle(spark, root: Path, what: str) -> None:
    files = oracle.files_in([root / "landing" / "topics"], "address")
    soft = oracle.expected_current_state(files, "address", deletes="soft")
    assert silver_rows(spark, "address", COLUMNS, ["address_id"]) == \
        oracle.expected_current_state(files, "address"), what
    assert silver_rows(spark, SOFT, COLUMNS + ["_cdc_is_deleted"], ["address_id"]) == soft, what
    deleted = {row["address_id"] for row in soft if row["_cdc_is_deleted"]}
    for table, flag in ((STATE, "_cdc_deleted"), (SOFT, "_cdc_is_deleted")):
        rows = stored(spark, table, flag)
        keys = [row["address_id"] for row in rows]
        assert len(keys) == len(set(keys)), f"{what}: a key stored twice in {table}: {sorted(rows, key=str)}"
        assert {row["address_id"] for row in rows if row["deleted"]} == deleted, f"{what}: {table}"
        for row in rows:
            # a hard-deleted key's flagged row has its values nulled: Hudi's default partition
            folder = DEFAULT_PARTITION if row["city_id"] is None else f"city_id={row['city_id']}"
            assert row["path"] == folder, f"{what}: {table} {row}"
            file_id = row["file"].split("_", 1)[0]
            assert any(file_id in name.name for name in (table_folder(spark, "silver", table) / folder).iterdir()), \
                f"{what}: {table} {row}: no file of its file group in {folder}"


def test_rows_move_between_partitions_and_deletes_leave_none_behind(spark, landing: Path):
    project = partitioned_project(landing)

    land(spark, landing, 0, [event("c", 10 + key, key, city) for key, city in
                             ((1, 1), (2, 1), (3, 2), (4, 2), (5, 3))])
    build(project)
    properties = dict(spark.sql(f"show tblproperties silver.{STATE}").collect())
    assert properties.get("hoodie.index.type") == "GLOBAL_BLOOM", properties
    assert properties.get("cdc.partition_by") == "city_id", properties
    assert_partitioned_silver_is_oracle(spark, landing, "the first build")

    # key 1 moves, key 2 is deleted, key 3 changes in place, key 4 moves twice in one window
    land(spark, landing, 5, [event("u", 20, 1, 2), event("d", 21, 2), event("u", 22, 3, 2, "NEW"),
                             event("u", 23, 4, 3), event("u", 24, 4, 1)])
    build(project)
    assert_partitioned_silver_is_oracle(spark, landing, "moves, a delete, an update in place")

    # late events older than key 2's delete and key 1's move, each in another partition
    land(spark, landing, 10, [event("u", 15, 2, 3, "LATE"), event("u", 16, 1, 1, "LATE"), event("d", 30, 5)])
    build(project)
    assert_partitioned_silver_is_oracle(spark, landing, "late events against a delete and a move")

    # base files rewritten with the log files merged in, then a late event after the compaction
    assert spark.sql(f"call run_compaction(op => 'scheduleAndExecute', table => 'silver.{STATE}', "
                     "options => 'hoodie.compact.inline.max.delta.commits=1')").collect(), "no compaction ran"
    land(spark, landing, 13, [event("c", 40, 2, 4, "AGAIN"), event("u", 17, 5, 1, "LATE"), event("c", 41, 6, 4)])
    build(project)
    assert_partitioned_silver_is_oracle(spark, landing, "a re-insert elsewhere, a late event after the compaction")

    # a truncate supersedes every older row (an event older than it too); then a re-insert
    # elsewhere, and a delete and re-insert of one key in one window
    land(spark, landing, 16, [event("t", 50, 0), event("c", 51, 1, 5), event("u", 45, 3, 3, "SUPERSEDED"),
                              event("c", 52, 6, 1), event("d", 53, 6), event("c", 54, 6, 2, "BACK")])
    build(project)
    assert_partitioned_silver_is_oracle(spark, landing, "a truncate, then re-inserts")
    assert [row["address_id"] for row in silver_rows(spark, "address", ["address_id"], ["address_id"])] == [1, 6]

    incremental = {table: silver_rows(spark, table, COLUMNS + ["_cdc_op", "_cdc_order"], ["address_id"])
                   for table in ("address", SOFT)}
    build(project, "--full-refresh")
    assert_partitioned_silver_is_oracle(spark, landing, "the full refresh")
    for table, rows in incremental.items():
        assert silver_rows(spark, table, COLUMNS + ["_cdc_op", "_cdc_order"], ["address_id"]) == rows, table


def test_a_changed_partition_by_rebuilds_the_tables_from_bronze(spark, landing: Path, run_dir: Path):
    unpartitioned = {"address": {}, SOFT: {"cdc_deletes": "soft"}}
    log = run_dir / "dbt-logs" / "dbt.log"

    def rebuilt(was: str, now: str) -> list[str]:
        """The models whose rebuild for a partition_by changed from `was` to `now` dbt's log warns of."""
        text = log.read_text() if log.exists() else ""
        return [model for model in ("address", SOFT)
                if f"{model}: rebuilding silver.{model} from all of bronze: the model's partition_by is "
                   f"[{now}], the table's [{was}]." in text]

    def layout(table: str) -> tuple[bool, str | None, set[str]]:
        """Whether the stored table has the global index, its cdc.partition_by and its rows' partition paths."""
        properties = dict(spark.sql(f"show tblproperties silver.{table}").collect())
        paths = {row["path"] for row in stored(spark, table, "_cdc_deleted" if table == STATE else "_cdc_is_deleted")}
        return properties.get("hoodie.index.type") == "GLOBAL_BLOOM", properties.get("cdc.partition_by"), paths

    land(spark, landing, 0, [event("c", 10 + key, key, city) for key, city in ((1, 1), (2, 1), (3, 2))])
    build(partitioned_project(landing / "before", unpartitioned))
    for table in (STATE, SOFT):
        assert layout(table) == (False, None, {""}), table
    assert silver_rows(spark, "address", COLUMNS, ["address_id"]) == oracle.expected_current_state(
        oracle.files_in([landing / "landing" / "topics"], "address"), "address")
    assert rebuilt("", "city_id") == []

    # partition_by added, with a move and a delete in the window the build would have merged
    land(spark, landing, 3, [event("u", 20, 1, 2), event("d", 21, 2), event("c", 22, 4, 3)])
    build(partitioned_project(landing / "added"))
    assert rebuilt("", "city_id") == ["address", SOFT]
    assert_partitioned_silver_is_oracle(spark, landing, "partition_by added")
    for table in (STATE, SOFT):
        assert layout(table)[:2] == (True, "city_id"), table

    # and removed again: back to one unpartitioned table with the bucket index
    land(spark, landing, 6, [event("u", 30, 3, 1), event("d", 31, 4)])
    build(partitioned_project(landing / "removed", unpartitioned))
    assert rebuilt("city_id", "") == ["address", SOFT]
    for table in (STATE, SOFT):
        assert layout(table) == (False, None, {""}), table
    files = oracle.files_in([landing / "landing" / "topics"], "address")
    assert silver_rows(spark, "address", COLUMNS, ["address_id"]) == oracle.expected_current_state(files, "address")
    assert silver_rows(spark, SOFT, COLUMNS + ["_cdc_is_deleted"], ["address_id"]) == \
        oracle.expected_current_state(files, "address", deletes="soft")


def test_a_partition_by_silver_cannot_keep_is_refused_before_anything_is_written(spark, tmp_path: Path):
    before = {t.name for t in spark.catalog.listTables("silver")} if spark.catalog.databaseExists("silver") else set()
    project = partitioned_project(tmp_path, {
        "address": {"partition_by": ["city_id", "nope`) --"]},
        "actor_history": {"partition_by": "actor_id"},
        "country": {"partition_by": "last_update"},
        "city": {"partition_by": ["country_id"], "hudi_options": {"hoodie.index.type": "BUCKET"}},
    })
    result = dbt_invoke("run", "--select", "address", "actor_history", "country", "city",
                        "--target-path", str(project / "target"), project=project)
    assert not result.success
    messages = {r.node.name: str(r.message) for r in result.result.results}
    expected = {
        "address": ['Model address: partition_by names "nope`) --", which is not one of its columns',
                    "or remove partition_by"],
        "actor_history": ["Model actor_history: cdc_history does not support partition_by", "Remove partition_by"],
        "country": ["Model country: partition_by names last_update, a timestamp column", "Partition by another"],
        "city": ["Model city: hudi_options sets hoodie.index.type, but a model with partition_by", "Remove "],
    }
    for name, parts in expected.items():
        assert all(part in messages[name] for part in parts), messages[name]
    after = {t.name for t in spark.catalog.listTables("silver")} if spark.catalog.databaseExists("silver") else set()
    assert after == before  # stopped before writing anything
