"""The silver designs benchmark bounds the model's batch statement to one bronze window."""

from __future__ import annotations

import pytest

from benchmarks.silver_designs import batch_statement

BATCH = """create table silver.orders__cdc_batch
        using parquet
        as with
current_state as (
    select * from (with
    cdc_change_log as (
        select * from bronze.bench_public_orders
    ),
    cdc_window as (
        select * from cdc_change_log
        where true
    ),
    cdc_resets as (select 1)
    select * from cdc_resets) as cdc_batch
)
select * from current_state"""


def test_the_window_is_bounded_by_two_commits_and_nothing_else_changes():
    statement = batch_statement(BATCH, "20261202134451319", "20261202134510002")
    assert statement.startswith("with\ncurrent_state as (")
    assert ("where _hoodie_commit_time <= '20261202134510002' and _hoodie_commit_time > '20261202134451319'\n"
            in statement)
    assert statement.count("_hoodie_commit_time") == 2
    assert statement.replace("_hoodie_commit_time <= '20261202134510002' and _hoodie_commit_time > "
                             "'20261202134451319'", "true") == BATCH[BATCH.index(" as with") + 4:]


def test_the_first_window_has_no_lower_bound():
    statement = batch_statement(BATCH, None, "20261202134451319")
    assert "where _hoodie_commit_time <= '20261202134451319'\n" in statement


def test_a_statement_without_the_window_stage_is_refused():
    with pytest.raises(SystemExit, match="no cdc_window stage"):
        batch_statement("select 1", None, "1")
