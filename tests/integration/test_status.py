"""`python -m status` (status/) on a real lakehouse: recorded Debezium events of
`actor` land in two batches. After the first build, the status names the last commit and
a watermark equal to bronze's newest commit (0 s behind bronze), the file groups and
their bytes as the table's folder holds them, and the newest source time among the
events. With the second batch landed but not built, it is behind bronze by exactly the
time between the two bronze commits. After a second build, cdc_as_of reads silver.actor
as the first build left it (by instant and by timestamp); a compaction scheduled and
not run is listed as pending, and no longer once it has run. Every expectation is read
apart from the status code: from the fixture, bronze's rows and the table's files."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ingestion.pipeline import IngestConfig, run as ingest
from status.collect import collect
from status.render import render, to_json
from tests.support import oracle
from tests.support.lakehouse import dbt_invoke
from tests.support.paths import ROOT
from testdata.sink_formats import write_recorded_json

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("empty_project_schemas")]

FIXTURE = ROOT / "tests" / "fixtures" / "debezium" / "pagila-envelope" / "pagila.public.actor.jsonl"
STATE = "silver.actor__cdc_state"


def land_batch(spark, tmp_path: Path, name: str, lines: list[str]) -> list[dict]:
    """`lines` of the fixture as sink files of their own, landed; returns their records."""
    fixture = tmp_path / f"{name}.jsonl"
    fixture.write_text("\n".join(lines) + "\n")
    topics = tmp_path / name / "topics"
    write_recorded_json(fixture, topics, records_per_file=100)
    summary = ingest(spark, IngestConfig(input_uri=str(topics)))
    records = [json.loads(line) for line in lines]
    # the runner's report counts accepted records by op: here on recorded Debezium output
    ops = Counter(payload(record)["op"] for record in records if record["value"] is not None)
    assert summary.table("pagila_public_actor").ops == dict(ops), summary.render()
    return records


def payload(record: dict) -> dict:
    value = json.loads(record["value"])
    return value.get("payload", value)


def newest_source_time(records: list[dict]) -> datetime:
    """The newest `source.ts_ms` among the records' change events, as a naive UTC datetime."""
    times = []
    for record in records:
        if record["value"] is None:
            continue
        times.append(payload(record)["source"]["ts_ms"])
    return datetime.fromtimestamp(max(times) / 1000, timezone.utc).replace(tzinfo=None)


def instant(text: str) -> datetime:
    return datetime.strptime(text, "%Y%m%d%H%M%S%f") if len(text) > 14 else datetime.strptime(text, "%Y%m%d%H%M%S")


def latest_base_files(spark) -> dict[str, Path]:
    """Per file group, its newest parquet base file in the table's folder (the name is
    `<file id>_<write token>_<instant>.parquet`)."""
    location = spark.sql(f"describe formatted {STATE}").where("col_name = 'Location'").first()["data_type"]
    latest: dict[str, Path] = {}
    for path in Path(location.removeprefix("file:")).glob("*.parquet"):
        file_id, _, commit = path.stem.split("_")
        if file_id not in latest or int(commit) > int(latest[file_id].stem.split("_")[2]):
            latest[file_id] = path
    return latest


def requested_compactions(spark) -> list[str]:
    location = spark.sql(f"describe formatted {STATE}").where("col_name = 'Location'").first()["data_type"]
    timeline = Path(location.removeprefix("file:")) / ".hoodie"
    return sorted(p.name.split(".")[0] for p in timeline.rglob("*.compaction.requested"))


def shown(sql: str) -> list[tuple]:
    """`dbt show --inline sql`'s rows: actor_id, first_name, last_name."""
    result = dbt_invoke("show", "--inline", sql, "--limit", "-1")
    assert result.success, result.exception or result.result
    table = result.result.results[0].agate_table
    return sorted((int(row["actor_id"]), row["first_name"], row["last_name"]) for row in table.rows)


def expected(batch_dirs: list[Path]) -> list[tuple]:
    rows = oracle.expected_current_state(oracle.files_in(batch_dirs, "actor"), "actor")
    return sorted((row["actor_id"], row["first_name"], row["last_name"]) for row in rows)


def assert_time_travel(spark, tmp_path: Path, first_commit: str) -> None:
    """cdc_as_of: silver.actor at the first build's commit (as an instant, and as its
    timestamp) is the state of the first batch; now it is that of both batches."""
    first, both = expected([tmp_path / "first"]), expected([tmp_path / "first", tmp_path / "second"])
    assert first != both
    assert shown(f"{{{{ cdc_as_of(ref('actor'), '{first_commit}') }}}}") == first
    moment = instant(first_commit).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    assert shown(f"{{{{ cdc_as_of(ref('actor'), '{moment}') }}}}") == first
    assert shown("select * from {{ ref('actor') }}") == both
    refused = dbt_invoke("show", "--inline", "{{ cdc_as_of(ref('actor'), \"1' or '1\") }}")
    assert not refused.success and "is neither a Hudi instant" in str(refused.exception or refused.result)


def test_status_follows_builds_bronze_and_table_services(spark, tmp_path: Path):
    lines = FIXTURE.read_text().splitlines()
    first = land_batch(spark, tmp_path, "first", lines[:4])
    assert dbt_invoke("run", "--select", "actor").success

    (status,) = collect(spark, "silver", ["actor"])
    bronze_newest = spark.sql("select max(_hoodie_commit_time) from bronze.pagila_public_actor").first()[0]
    state_newest = spark.sql(f"select max(_hoodie_commit_time) from {STATE}").first()[0]
    assert (status.table, status.sources) == (STATE, ["bronze.pagila_public_actor"])
    assert (status.watermark, status.bronze_newest_commit, status.behind_bronze_seconds) == (
        bronze_newest, bronze_newest, 0.0)
    assert status.last_commit == state_newest
    files = latest_base_files(spark)
    assert (status.file_groups, status.base_files_bytes) == (len(files), sum(p.stat().st_size for p in files.values()))
    assert status.newest_source_change == newest_source_time(first)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    assert 0 <= status.behind_source_seconds <= (now - status.newest_source_change).total_seconds()
    assert status.pending_services == [] and not status.problems

    land_batch(spark, tmp_path, "second", lines[4:])
    (behind,) = collect(spark, "silver", ["actor"])
    bronze_second = spark.sql("select max(_hoodie_commit_time) from bronze.pagila_public_actor").first()[0]
    assert bronze_second > bronze_newest
    assert behind.watermark == bronze_newest and behind.bronze_newest_commit == bronze_second
    assert behind.behind_bronze_seconds == (instant(bronze_second) - instant(bronze_newest)).total_seconds() > 0
    assert "actor" in render([behind]) and json.loads(to_json([behind]))["tables"][0]["watermark"] == bronze_newest

    assert dbt_invoke("run", "--select", "actor").success
    assert_time_travel(spark, tmp_path, status.last_commit)
    # scheduled now, whatever the table's every-N-delta-commits trigger says
    spark.sql(f"call run_compaction(op => 'schedule', table => '{STATE}', "
              "options => 'hoodie.compact.inline.max.delta.commits=1')").collect()
    scheduled = requested_compactions(spark)
    assert len(scheduled) == 1, scheduled
    (waiting,) = collect(spark, "silver", ["actor"])
    assert waiting.behind_bronze_seconds == 0.0 and waiting.log_files > 0
    assert waiting.pending_services == [f"compaction requested {scheduled[0]}"]

    spark.sql(f"call run_compaction(op => 'run', table => '{STATE}')").collect()
    (compacted,) = collect(spark, "silver", ["actor"])
    assert compacted.pending_services == [] and compacted.last_commit == scheduled[0]
