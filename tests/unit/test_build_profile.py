"""tools.build_profile on dbt logs: JSON ones written here event by event, and real text
and JSON logs of dbt 1.11 kept as fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.build_profile.__main__ import invocation, last_invocation, main, profile, read_events, statement_kind

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
    ("insert into silver.actor__cdc_state (`actor_id`) select 1", "insert into state"),
    ("insert into silver.actor__cdc_recent(`actor_id`) select 1", "insert into recent"),
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


def test_a_file_that_is_no_dbt_log_is_refused_with_what_to_give(tmp_path, capsys):
    path = tmp_path / "dbt.log"
    path.write_text("08:00:00  Running with dbt=1.11.6\n")
    assert main([str(path)]) == 2
    assert "logs/dbt.log" in capsys.readouterr().err


def test_picks_an_invocation_by_its_number(tmp_path, capsys):
    log = [*_statement("first", "00.0", "show databases", 1.0, None, "MainThread"),
           *_statement("second", "10.0", "show databases", 2.0, None, "MainThread"),
           *_statement("third", "20.0", "show databases", 3.0, None, "MainThread")]
    events = read_events(log)
    assert [profile(invocation(events, n)).seconds_by_kind["show databases"] for n in (1, 2, 3, -1, -2, -3)] == [
        1.0, 2.0, 3.0, 3.0, 2.0, 1.0]
    path = tmp_path / "dbt.log"
    path.write_text("\n".join(log) + "\n")
    assert main([str(path), "--invocation", "4"]) == 2
    assert "holds 3 invocation(s)" in capsys.readouterr().err


def test_a_recorded_text_log_of_a_build():
    """A real dbt 1.11 text log (dbt's default file log, level debug), cut from the third
    build of `python -m benchmarks.sample_build`: the banner, then the lines of one
    thread for the incremental build of `language` and for one data test. The figures
    below were read off the file with grep."""
    path = FIXTURES / "build-language-text.log"
    result = profile(last_invocation(path.read_text().splitlines()))

    assert sum(result.count_by_kind.values()) == 19  # `SQL status` lines; ROLLBACK and Close are none
    assert sum(result.seconds_by_kind.values()) == pytest.approx(2.513, abs=0.0005)
    assert result.seconds_by_kind["create batch"] == pytest.approx(1.193)
    assert result.seconds_by_kind["insert into state"] == pytest.approx(0.788)
    assert result.seconds_by_kind["insert into recent"] == pytest.approx(0.139)
    assert dict(result.count_by_model) == {"language": 18, "unique_category_category_id": 1}
    # Began / Finished running node: 20:22:14.131028 -> 20:22:16.867745, 20:22:30.864544 -> 20:22:31.852926
    assert result.node_seconds_by_type["model"] == pytest.approx(2.736717)
    assert result.node_seconds_by_type["test"] == pytest.approx(0.988382)
    assert dict(result.node_count_by_type) == {"model": 1, "test": 1}


def test_the_text_log_of_two_threads_and_two_invocations(tmp_path):
    """Each status line belongs to its own thread's query, a query's SQL runs over several
    lines, and a time before the last one by more than an hour is past midnight."""
    reset = "\x1b[0m"
    lines = [
        "============================== 23:59:58.000000 | 11111111-1111-1111-1111-111111111111 ====",
        f"{reset}23:59:58.100000 [debug] [MainThread]: On list_schemas: show databases",
        f"{reset}23:59:58.200000 [debug] [MainThread]: SQL status: OK in 0.100 seconds",
        "============================== 23:59:59.000000 | 22222222-2222-2222-2222-222222222222 ====",
        f"{reset}23:59:59.000000 [debug] [Thread-1 ]: Began running node model.p.a",
        f"{reset}23:59:59.100000 [debug] [Thread-1 ]: On model.p.a: /* {{\"app\": \"dbt\"}} */",
        "create table silver.a__cdc_batch",
        "  using parquet as select 1",
        f"{reset}23:59:59.200000 [debug] [Thread-2 ]: Began running node test.p.not_null_a_id.abc",
        f"{reset}23:59:59.300000 [debug] [Thread-2 ]: On test.p.not_null_a_id.abc: select count(*) from a",
        f"{reset}00:00:01.100000 [debug] [Thread-1 ]: SQL status: OK in 2.000 seconds",
        f"{reset}00:00:01.200000 [debug] [Thread-2 ]: SQL status: OK in 0.250 seconds",
        f"{reset}00:00:01.300000 [debug] [Thread-2 ]: On test.p.not_null_a_id.abc: ROLLBACK",
        f"{reset}00:00:01.500000 [debug] [Thread-2 ]: Finished running node test.p.not_null_a_id.abc",
        f"{reset}00:00:02.000000 [debug] [Thread-1 ]: Finished running node model.p.a",
    ]
    path = tmp_path / "dbt.log"
    path.write_text("\n".join(lines) + "\n")

    result = profile(last_invocation(path.read_text().splitlines()))

    assert dict(result.seconds_by_kind) == {"create batch": 2.0, "select count": 0.25}
    assert dict(result.seconds_by_model) == {"a": 2.0, "not_null_a_id": 0.25}
    assert result.node_seconds_by_type["model"] == pytest.approx(3.0)
    assert result.node_seconds_by_type["test"] == pytest.approx(2.3)
    assert result.wall_seconds == pytest.approx(3.0)
    first = profile(invocation(read_events(path.read_text().splitlines()), 1))
    assert dict(first.seconds_by_kind) == {"show databases": 0.1}


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


def test_a_text_log_whose_sql_has_a_line_starting_with_a_brace_is_read_as_text(tmp_path):
    """Its banners mark it as dbt's text log: a statement's line that starts with `{` is
    part of the statement, not a JSON event."""
    reset = "\x1b[0m"
    path = tmp_path / "dbt.log"
    path.write_text("\n".join([
        "============================== 08:00:00.000000 | 33333333-3333-3333-3333-333333333333 ====",
        f"{reset}08:00:00.100000 [debug] [Thread-1 ]: On model.p.a: select named_struct(",
        "{ not json } as x",
        f"{reset}08:00:01.600000 [debug] [Thread-1 ]: SQL status: OK in 1.500 seconds",
    ]) + "\n")
    result = profile(last_invocation(path.read_text().splitlines()))
    assert dict(result.seconds_by_kind) == {"select named_struct": 1.5}
    assert dict(result.seconds_by_model) == {"a": 1.5}
