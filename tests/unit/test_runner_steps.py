"""Which runner passes go on to the steps after the build (--table-services, --verify),
and the exit code each pass ends with. The steps' own work (Hudi calls, the reconciliation)
is replaced here; tests/runner_loop and tests/e2e/test_verify.py run them for real."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

import core.spark
from runner import cli, table_services
from runner.report import PassReport
from verify import cli as verify_cli
from verify.report import EXIT_BEHIND, EXIT_DIFFERENT

# code the pass ended with -> whether the steps after the build run
PASSES = {cli.EXIT_OK: True, cli.EXIT_QUARANTINED: True, cli.EXIT_STALE: True,
          cli.EXIT_FAILURE: False, cli.EXIT_LOCKED: False, cli.EXIT_USAGE: False}


@pytest.fixture
def calls(monkeypatch) -> list[str]:
    made: list[str] = []
    monkeypatch.setattr(core.spark, "get_session", lambda target=None: object())
    return made


@pytest.mark.parametrize("code", PASSES)
@pytest.mark.parametrize("failed_table", [False, True])
def test_table_services_run_after_every_pass_whose_build_passed(monkeypatch, calls, code, failed_table):
    def services(spark, retention):
        calls.append("services")
        return [table_services.ServiceResult("silver.actor", "MERGE_ON_READ", error="boom" if failed_table else None)]

    monkeypatch.setattr(table_services, "run", services)
    report = PassReport()
    ended = cli.table_services_step(code, None, table_services.Retention(), report)

    assert calls == (["services"] if PASSES[code] else [])
    if not PASSES[code]:
        assert ended == code and report.table_services is None
    else:
        assert report.table_services[0]["table"] == "silver.actor"
        assert ended == (cli.EXIT_FAILURE if failed_table else code)


@pytest.mark.parametrize("code", PASSES)
@pytest.mark.parametrize("failed_table", [False, True])
def test_between_services_a_pass_that_passed_runs_the_compactions_due(monkeypatch, calls, code, failed_table):
    def compact(spark, budget):
        calls.append(f"compact {budget}")
        result = table_services.ServiceResult("silver.actor__cdc_state", "MERGE_ON_READ", compactions=["1"],
                                              error="boom" if failed_table else None)
        return table_services.Compactions(results=[result], deferred=["silver.film__cdc_state"])

    monkeypatch.setattr(table_services, "compact_due", compact)
    report = PassReport()
    ended = cli.table_services_step(code, None, table_services.Retention(), report, compaction_budget=30.0)

    assert calls == (["compact 30.0"] if PASSES[code] else [])
    assert report.table_services is None
    if not PASSES[code]:
        assert ended == code and report.compaction is None
    else:
        assert report.compaction["deferred"] == ["silver.film__cdc_state"]
        assert report.compaction["tables"][0]["compactions"] == ["1"] and "compaction" in report.seconds
        assert ended == (cli.EXIT_FAILURE if failed_table else code)


@pytest.mark.parametrize("code", PASSES)
@pytest.mark.parametrize("found", [0, EXIT_DIFFERENT, EXIT_BEHIND])
def test_verify_runs_after_every_pass_whose_build_passed(monkeypatch, calls, code, found):
    def verify(spark, args):
        calls.append("verify")
        return SimpleNamespace(exit_code=found)

    monkeypatch.setattr(verify_cli, "run", verify)
    ended = cli.verify_step(code, argparse.Namespace(), None)

    assert calls == (["verify"] if PASSES[code] else [])
    # a difference the verify finds outranks a stale source; a clean verify keeps the pass's code
    assert ended == (found or code if PASSES[code] else code)
