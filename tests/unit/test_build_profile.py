"""tools.build_profile on a dbt JSON log written here event by event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.build_profile.__main__ import last_invocation, main, profile, statement_kind

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dbt-logs"


def _event(invocation: str, name: str, ts: str, thread: str = "Thread-1", **data) -> str:
    return json.dumps({"info": {"invocation_id": invocation, "name": name, "thread": thread,
                                "ts": f"2026-12-02T08:00:{ts}Z"}, "data": data})


def _statement(invocation: str, ts: str, sql: str, elapsed: float, model: str | None, thread: str) -> list[str]:
    node = {"unique_id": f"model.cdc_lakehouse.{model}"} if model else {}
    return [_event(invocation, "SQLQuery", ts, thread, sql=sql, node_info=node),
            _event(invocation, "SQLQueryStatus", ts, thread, elapsed=elapsed, node_info=node)]


@pytest.mark.parametrize("sql, kind", [
    ('/* {"app": "dbt"} */\ncreate table silver.actor__cdc_batch\n  using parquet as select 1', "create batch"),
    ("create table silver.actor__cdc_actions using parquet as select 1", "create actions"),
    ("create table gold.payment_facts__hudi_window using parquet as select 1", "create window"),
    ("insert into silver.actor (`actor_id`) select 1", "insert into"),
    ("MERGE INTO silver.actor_history as t using x on 1=1", "merge into"),
    ("call show_commits(table => 'bronze.x', limit => 1)", "call show_commits"),
    ("  show   tblproperties silver.actor", "show tblproperties"),
])
def test_statement_kinds(sql, kind):
    assert statement_kind(sql) == kind


def test_sums_the_last_invocation_by_kind_and_model(tmp_path):
    log = [
        *_statement("old", "00.0", "show databases", 9.0, None, "MainThread"),
        _event("new", "MainReportVersion", "10.0"),
        *_statement("new", "10.5", "show databases", 0.5, None, "MainThread"),
        # two threads interleaved: each status belongs to its own thread's query
        _event("new", "SQLQuery", "11.0", "Thread-1", sql="create table silver.a__cdc_batch using parquet as select 1",
               node_info={"unique_id": "model.p.a"}),
        _event("new", "SQLQuery", "11.1", "Thread-2", sql="insert into silver.b (`id`) select 1",
               node_info={"unique_id": "model.p.b"}),
        _event("new", "SQLQueryStatus", "13.0", "Thread-1", elapsed=2.0, node_info={"unique_id": "model.p.a"}),
        _event("new", "SQLQueryStatus", "14.1", "Thread-2", elapsed=3.0, node_info={"unique_id": "model.p.b"}),
        *_statement("new", "15.0", "insert into silver.a (`id`) select 1", 1.5, "a", "Thread-1"),
    ]
    path = tmp_path / "dbt.log"
    path.write_text("plain text line\n" + "\n".join(log) + "\n")

    result = profile(last_invocation(path.read_text().splitlines()))

    assert dict(result.seconds_by_kind) == {"show databases": 0.5, "create batch": 2.0, "insert into": 4.5}
    assert dict(result.count_by_kind) == {"show databases": 1, "create batch": 1, "insert into": 2}
    assert dict(result.seconds_by_model) == {"-": 0.5, "a": 3.5, "b": 3.0}
    assert result.wall_seconds == pytest.approx(5.0)


def test_a_log_without_json_events_says_how_to_write_one(tmp_path, capsys):
    path = tmp_path / "dbt.log"
    path.write_text("08:00:00  Running with dbt=1.11.6\n")
    assert main([str(path)]) == 2
    assert "--log-format-file json" in capsys.readouterr().err


def test_a_recorded_incremental_build_of_one_model():
    """A real dbt 1.11 log (`dbt run --log-format json --log-level debug`, the sample's
    batch 2, the events of `language` kept): its 21 statements as read off the log."""
    path = FIXTURES / "incremental-language.jsonl"
    result = profile(last_invocation(path.read_text().splitlines()))

    assert sum(result.count_by_kind.values()) == 21
    assert {kind: result.count_by_kind[kind] for kind in (
        "show tblproperties", "describe extended", "call show_commits", "drop table", "create batch",
        "create actions", "insert into", "alter table")} == {
        "show tblproperties": 4, "describe extended": 2, "call show_commits": 1, "drop table": 4,
        "create batch": 1, "create actions": 1, "insert into": 1, "alter table": 2}
    assert result.seconds_by_kind["create batch"] == pytest.approx(3.95, abs=0.005)
    assert result.seconds_by_kind["create actions"] == pytest.approx(0.98, abs=0.005)
    assert result.seconds_by_kind["insert into"] == pytest.approx(2.11, abs=0.005)
    assert list(result.count_by_model) == ["language"]
