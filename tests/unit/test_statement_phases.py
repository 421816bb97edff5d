"""tools.statement_phases in the test session: each phase is timed apart, and the whole
plan runs (a check that fails only on execution fails it)."""

from __future__ import annotations

import pytest

from tools.statement_phases.__main__ import main, timed


def test_every_phase_is_timed_and_the_plan_runs(spark):
    phases = timed(spark, "select id, id * 2 as twice from range(10)")
    assert min(phases.analyze, phases.optimize, phases.plan, phases.execute) >= 0
    # analysis runs inside: an unknown table fails it
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        timed(spark, "select * from no_such_schema.no_such_table")
    # fails only when its rows are computed: the noop write ran the plan
    with pytest.raises(Exception, match="assert_true|is not true"):
        timed(spark, "select assert_true(id < 5) from range(10)")


def test_main_prints_a_row_per_run_and_file(spark, tmp_path, capsys):
    query = tmp_path / "q.sql"
    query.write_text("select count(*) from range(100)")
    assert main([str(query), "--runs", "2"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(row[0], row[1]) for row in rows] == [("1", "q.sql"), ("2", "q.sql")]
    assert all(len(row) == 7 and all(float(v) >= 0 for v in row[2:]) for row in rows), rows


@pytest.mark.parametrize("argv", [["--runs", "0"], ["--setting", "no-equals-sign"]])
def test_bad_arguments_are_refused(tmp_path, argv):
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path / "q.sql"), *argv])
    assert refused.value.code == 2
