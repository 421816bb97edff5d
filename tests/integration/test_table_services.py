"""The runner's table services (runner/table_services.py) on a real lakehouse.

Recorded Debezium events of `actor` land in batches, each built as a runner pass builds
it: Hudi's automatic cleaning and archival off. Then no table has cleaned or archived
anything. The services with 1 commit retained compact the state table's log files into
base files; after one more pass they clean the file slices that compaction superseded,
and leave silver's rows as they were (the oracle's). Time travel to the retained commit
reads its state; to a cleaned one, Hudi refuses with a message saying so. A table with
more commits than archival allows is archived down to its stated bounds. Every expectation is read apart from the services' own results: from
Hudi's timeline folder, the table's files and the oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.spark import session_settings
from ingestion.pipeline import IngestConfig, run as ingest
from runner import hudi_timeline, table_services
from tests.support import oracle
from tests.support.lakehouse import PROJECT_SCHEMAS, dbt_invoke, drop_schemas
from tests.support.paths import ROOT
from testdata.sink_formats import write_recorded_json

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("empty_project_schemas")]

FIXTURE = ROOT / "tests" / "fixtures" / "debezium" / "pagila-envelope" / "pagila.public.actor.jsonl"
STATE = "silver.actor__cdc_state"
BRONZE = "bronze.pagila_public_actor"
RETAIN = 1


def location(spark, table: str) -> Path:
    text = spark.sql(f"describe formatted {table}").where("col_name = 'Location'").first()["data_type"]
    return Path(text.removeprefix("file:"))


def timeline(spark, table: str) -> list[str]:
    """The completed instants of the table's active timeline as `<instant>.<action>`,
    from its `.hoodie/timeline` folder (Hudi 1.x names them `<begin>_<completion>.<action>`)."""
    folder = location(spark, table) / ".hoodie" / "timeline"
    names = [p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    return sorted(f"{n.split('_')[0]}.{n.split('.', 1)[1]}" for n in names
                  if not n.endswith((".requested", ".inflight")))


def as_hudi_sees_it(spark, table: str) -> tuple[str | None, list[str], int]:
    """(newest completed data commit as `<instant>_<completion>`, pending compaction plans,
    delta commits after the last compaction) of `table`, from Hudi's own meta client: the
    expectation for runner/hudi_timeline.py, which reads the same from file names."""
    jvm = spark._jvm
    conf = jvm.org.apache.hudi.hadoop.fs.HadoopFSUtils.getStorageConfWithCopy(spark._jsc.hadoopConfiguration())
    client = jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder().setConf(conf) \
        .setBasePath(str(location(spark, table))).build()
    active = client.getActiveTimeline()
    data = [i for i in active.getCommitsTimeline().filterCompletedInstants().getInstants()
            if i.getAction() in hudi_timeline.DATA_ACTIONS]
    newest = f"{data[-1].requestedTime()}_{data[-1].getCompletionTime()}" if data else None
    plans = sorted(str(i.requestedTime()) for i in active.filterPendingCompactionTimeline().getInstants())
    compacted = active.getCommitTimeline().filterCompletedInstants().lastInstant()
    since = str(compacted.get().requestedTime()) if compacted.isPresent() else ""
    deltas = sum(1 for i in active.getDeltaCommitTimeline().filterCompletedInstants().getInstants()
                 if str(i.requestedTime()) > since)
    return newest, plans, deltas


def as_listed(spark, table: str) -> tuple[str | None, list[str], int]:
    schema, name = table.split(".")
    found = hudi_timeline.timelines(spark, schema)[name]
    return found.newest_data_commit(), found.pending_compactions(), found.delta_commits_since_compaction()


def actions(spark, table: str) -> list[str]:
    return [name.split(".", 1)[1] for name in timeline(spark, table)]


def data_files(spark, table: str) -> list[Path]:
    root = location(spark, table)
    return [p for p in root.rglob("*") if p.is_file() and ".hoodie" not in p.parts
            and (p.suffix == ".parquet" or ".log." in p.name) and p.suffix != ".crc"]


def rows(result) -> list[tuple]:
    table = result.results[0].agate_table
    return sorted((int(row["actor_id"]), row["first_name"], row["last_name"]) for row in table.rows)


def shown(sql: str) -> list[tuple]:
    result = dbt_invoke("show", "--inline", sql, "--limit", "-1")
    assert result.success, result.exception or result.result
    return rows(result.result)


def expected(batch_dirs: list[Path]) -> list[tuple]:
    found = oracle.expected_current_state(oracle.files_in(batch_dirs, "actor"), "actor")
    return sorted((row["actor_id"], row["first_name"], row["last_name"]) for row in found)


def land_and_build(spark, tmp_path: Path, number: int, lines: list[str]) -> Path:
    """`lines` of the fixture landed as a batch of their own and built, as a runner pass
    does it (no cleaning or archival in the writes); returns the batch's folder."""
    fixture = tmp_path / f"batch{number}.jsonl"
    fixture.write_text("\n".join(lines) + "\n")
    batch = tmp_path / f"batch{number}"
    write_recorded_json(fixture, batch / "topics", records_per_file=100)
    with session_settings(spark, table_services.INLINE_OFF):
        ingest(spark, IngestConfig(input_uri=str(batch / "topics")))
        assert dbt_invoke("run", "--select", "actor").success
    return batch


def written_at(path: Path) -> str:
    """The instant that wrote a data file: a base file's is its name's last part
    (`<file id>_<token>_<instant>.parquet`), a log file's follows the file id
    (`.<file id>_<instant>.log.<version>_<token>`)."""
    return path.stem.split("_")[-1] if path.suffix == ".parquet" else path.name.split("_")[1].split(".")[0]


def newest_base_instants(files: list[Path]) -> dict[str, str]:
    """Per file group, the instant of its newest base file (`<file id>_<token>_<instant>.parquet`)."""
    latest: dict[str, str] = {}
    for path in (p for p in files if p.suffix == ".parquet"):
        file_id = path.stem.split("_")[0]
        latest[file_id] = max(latest.get(file_id, ""), written_at(path))
    return latest


def test_services_compact_clean_and_archive_what_passes_leave(spark, tmp_path: Path) -> None:
    lines = FIXTURE.read_text().splitlines()
    assert len(lines) >= 8
    batches = [land_and_build(spark, tmp_path, number, lines[2 * number:2 * number + 2]) for number in range(3)]
    # no write cleaned or archived: every commit is still in the timeline
    for table in (STATE, BRONZE):
        assert "clean" not in actions(spark, table), timeline(spark, table)
    assert actions(spark, STATE) == ["deltacommit"] * 3, timeline(spark, STATE)
    before = data_files(spark, STATE)
    assert [p for p in before if ".log." in p.name], "the incremental builds should have written log files"
    first_builds = [name.split(".")[0] for name in timeline(spark, STATE)]

    results = {r.table: r for r in table_services.run(spark, table_services.Retention(RETAIN))}
    assert all(r.error is None for r in results.values()), results
    # every Hudi table of the project's schemas, once (not the _ro/_rt names of the state table)
    # (other tests of this worker may leave schemas of their own in the warehouse)
    warehouse = location(spark, STATE).parent.parent
    folders = {p.parent.parent for schema in ("bronze", "silver", "gold")
               for p in (warehouse / f"{schema}.db").rglob(".hoodie/hoodie.properties")}
    assert {location(spark, name) for name in results} == folders
    assert {name for name in results if name.startswith("silver.")} == {STATE, "silver.actor__cdc_rejected"}
    (compaction,) = results[STATE].compactions
    assert results[STATE].table_type == "MERGE_ON_READ" and f"{compaction}.commit" in timeline(spark, STATE)
    # every file group's newest slice is the compaction's base file: no log file is read any more
    assert set(newest_base_instants(data_files(spark, STATE)).values()) == {compaction}
    assert shown("select * from {{ ref('actor') }}") == expected(batches)

    # a pass after the compaction, then the services again: the slices older than the one
    # the retained commit's predecessor reads (the first build's base files and the logs
    # on them) are cleaned, and nothing else
    batches.append(land_and_build(spark, tmp_path, 3, lines[6:]))
    before = set(data_files(spark, STATE))
    results = {r.table: r for r in table_services.run(spark, table_services.Retention(RETAIN))}
    state = results[STATE]
    assert state.error is None and len(state.compactions) == 1, state
    gone = before - set(data_files(spark, STATE))
    assert state.files_cleaned == len(gone) > 0, (state, gone)
    assert {written_at(p) for p in gone} <= set(first_builds), gone
    assert "clean" in actions(spark, STATE) and state.earliest_commit_retained is not None
    want = expected(batches)
    assert want != expected(batches[:3])
    assert shown("select * from {{ ref('actor') }}") == want
    # time travel reaches the retained commit, and refuses what was cleaned, saying so
    assert shown(f"{{{{ cdc_as_of(ref('actor'), '{state.earliest_commit_retained}') }}}}") == want
    cleaned = dbt_invoke("show", "--inline", f"{{{{ cdc_as_of(ref('actor'), '{first_builds[0]}') }}}}")
    assert not cleaned.success and "Cleaner cleaned up the timestamp of interest" in str(cleaned.exception)

    # a third run finds nothing to do
    again = {r.table: r for r in table_services.run(spark, table_services.Retention(RETAIN))}
    assert again[STATE].compactions == [] and again[STATE].files_cleaned == 0, again[STATE]


def test_archival_keeps_the_active_timeline_within_its_stated_bounds(spark) -> None:
    retention = table_services.Retention(1)
    spark.sql("create database if not exists silver")
    spark.sql("create table silver.services_archival (id int, v string, o bigint) using hudi "
              "tblproperties (type = 'cow', primaryKey = 'id', preCombineField = 'o')")
    with session_settings(spark, table_services.INLINE_OFF):
        for number in range(retention.archive_max + 2):
            spark.sql(f"insert into silver.services_archival values (1, 'v{number}', {number})")
    commits = [n for n in timeline(spark, "silver.services_archival") if n.endswith(".commit")]
    assert len(commits) == retention.archive_max + 2

    (result,) = [r for r in table_services.run(spark, retention, schemas=("silver",))
                 if r.table == "silver.services_archival"]
    assert result.error is None and result.earliest_commit_retained is not None, result
    left = [n for n in timeline(spark, "silver.services_archival") if n.endswith(".commit")]
    # archived down to the minimum, keeping the newest commits
    assert len(left) == retention.archive_min and left == commits[-retention.archive_min:], left
    # archival moves timeline entries, never data: every insert (plain inserts, no upsert) is read
    assert [r.v for r in spark.sql("select v from silver.services_archival order by o").collect()] == [
        f"v{number}" for number in range(retention.archive_max + 2)]
    assert json.dumps(result.as_report())  # the report's entry is plain JSON


def test_passes_never_compact_and_the_runner_compacts_within_a_budget(spark, tmp_path: Path) -> None:
    """Under the runner (INLINE_OFF) a state table's builds do not compact, even past
    their trigger; compact_due starts nothing once its budget is spent, then compacts the
    table due, after which silver still equals the oracle and nothing is due. The trigger
    is 2 delta commits here instead of the tables' 5: the same setting, fewer builds."""
    drop_schemas(spark, PROJECT_SCHEMAS)  # the module's other tests leave compactions behind
    lines = FIXTURE.read_text().splitlines()
    with session_settings(spark, {"hoodie.compact.inline.max.delta.commits": "2"}):
        batches = [land_and_build(spark, tmp_path, number, lines[number:number + 1]) for number in range(3)]
    assert actions(spark, STATE) == ["deltacommit"] * 3, timeline(spark, STATE)

    assert as_listed(spark, STATE) == as_hudi_sees_it(spark, STATE)
    assert as_listed(spark, STATE)[2] == 3

    spent = table_services.compact_due(spark, budget_seconds=0, after=2)
    assert spent.results == [] and spent.deferred == [STATE], spent
    assert actions(spark, STATE) == ["deltacommit"] * 3

    done = table_services.compact_due(spark, budget_seconds=600, after=2)
    assert done.deferred == [] and [(r.table, len(r.compactions), r.error) for r in done.results] == [
        (STATE, 1, None)], done
    assert actions(spark, STATE) == ["deltacommit"] * 3 + ["commit"], timeline(spark, STATE)
    assert f"{done.results[0].compactions[0]}.commit" in timeline(spark, STATE)
    assert as_listed(spark, STATE) == as_hudi_sees_it(spark, STATE)
    assert as_listed(spark, STATE)[2] == 0
    assert shown("select * from {{ ref('actor') }}") == expected(batches)
    assert table_services.compact_due(spark, budget_seconds=600, after=2).results == []
