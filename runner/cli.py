"""`python -m runner`: one ingestion pass, then `dbt build`, in one Spark session.

    python -m runner --once  --kafka-bootstrap-servers HOST:PORT --topic-pattern 'pagila\\.public\\..*'
    python -m runner --every 300 --input s3a://bucket/topics

A pass builds the models downstream of the bronze tables that changed since the last
build took them in, new or edited models and what failed last time
(runner/selection.py, docs/reference/what-a-pass-builds.md).
`--once` is for cron or an orchestrator (exit code says what happened); `--every N`
starts a pass N seconds after the last one ended, until SIGINT/SIGTERM, finishing the
pass in progress (also when the signal goes to the whole process group, as systemd
sends it: Spark's JVM is started with both signals ignored).
Ingestion arguments are those of `python -m ingestion` (see its --help).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from core.cli import configure_logging, number
from core.exit_codes import (EXIT_BEHIND, EXIT_DIFFERENT, EXIT_FAILURE, EXIT_LOCKED, EXIT_OK, EXIT_QUARANTINED,
                              EXIT_STALE, EXIT_USAGE)
from core.lock import RunLockedError, exclusive
from core.timing import timed
from ingestion import cli as ingestion_cli
from ingestion.errors import IngestionError, UsageError
from runner import hudi_timeline, selection, table_services
from runner.report import PassReport, dbt_section, freshness_section, ingestion_section, utc_now
from runner.report import write as write_report

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("runner")

PASSED = (EXIT_OK, EXIT_QUARANTINED)
# Passes whose build passed: a stale source means late data, not a broken lake, so the
# steps after the build (table services, verify) still run.
BUILT = (*PASSED, EXIT_STALE)
# What each exit code means, for the pass's report (--report).
OUTCOMES = {EXIT_OK: "ok", EXIT_FAILURE: "failed", EXIT_USAGE: "usage error", EXIT_QUARANTINED: "ok, records quarantined",
            EXIT_LOCKED: "locked by another run", EXIT_DIFFERENT: "silver differs from the source",
            EXIT_BEHIND: "silver behind the source", EXIT_STALE: "a source is stale"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m runner",
        description="One ingestion pass plus `dbt build`, once or every N seconds.",
        epilog="exit codes: 0 ok, 3 ok but records were quarantined, 2 usage, 4 another run holds the lock, 1 failure; "
               "with --verify also 5 silver differs from the sources, 6 it differs while behind them (may be lag); "
               "with --freshness also 7 a bronze source is past its freshness error threshold",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--once", action="store_true", help="one pass, then exit (for cron / orchestrators)")
    when.add_argument("--every", type=number(float, above=0), metavar="SECONDS",
                      help="a pass, then SECONDS of rest, again until stopped")
    parser.add_argument(
        "--max-failures", type=number(int, above=0), default=3, metavar="N",
        help="with --every: stop after N failed passes in a row (default 3)",
    )
    parser.add_argument(
        "--dbt-arg", action="append", default=[], metavar="ARG",
        help="extra argument for `dbt build`, repeatable (e.g. --dbt-arg=--select --dbt-arg=+silver)",
    )
    parser.add_argument(
        "--build-always", action="store_true",
        help="build every model on every pass; by default a pass builds what changed since the last "
             "build (docs/reference/what-a-pass-builds.md) and skips dbt when nothing did",
    )
    parser.add_argument(
        "--state-dir", type=Path, metavar="PATH",
        help="where the runner keeps what the last build took in (default: runner-state in the "
             "lakehouse folder, CDC_LAKEHOUSE_DIR); remove it to build every model on the next pass",
    )
    parser.add_argument(
        "--report", type=Path, metavar="PATH",
        help="after every pass, write its machine-readable report (JSON) to PATH, replacing the last "
             "(docs/reference/runner-report.md)",
    )
    parser.add_argument(
        "--freshness", action="store_true",
        help="after the build, run `dbt source freshness` on the bronze sources and report it; "
             f"exit {EXIT_STALE} when a source is past its error threshold",
    )
    parser.add_argument(
        "--table-services", action="store_true",
        help="the runner runs Hudi's table services (compaction, cleaning, archival) on every Hudi table "
             "after a passing pass, instead of each write cleaning and archiving as it commits "
             "(docs/how-to/schedule-table-services.md)",
    )
    parser.add_argument(
        "--table-services-every", type=number(float, above=0), default=3600.0, metavar="SECONDS",
        help="with --table-services and --every: at most once per SECONDS (default 3600); --once runs them every pass",
    )
    parser.add_argument(
        "--compaction-budget", type=number(float, above=0), default=60.0, metavar="SECONDS",
        help="with --table-services: the builds never compact; after each pass the runner compacts the "
             f"merge-on-read tables with {table_services.COMPACT_AFTER} or more delta commits since their last "
             "compaction, starting none after SECONDS (default 60); the rest wait for the next pass",
    )
    parser.add_argument(
        "--retain-commits", type=number(int, above=0), default=table_services.DEFAULT_RETAIN_COMMITS, metavar="N",
        help="with --table-services: the commits each table keeps, hence how far back time travel and "
             f"incremental reads reach (default {table_services.DEFAULT_RETAIN_COMMITS}, Hudi's own)",
    )
    parser.add_argument(
        "--verify", action="store_true",
        help="after a passing pass, compare silver with the source databases (python -m verify, "
             "docs/how-to/verify-the-lake.md); its exit code when they differ",
    )
    parser.add_argument(
        "--verify-arg", action="append", default=[], metavar="ARG",
        help="extra argument for the --verify step, repeatable (e.g. --verify-arg=--json --verify-arg=out.json)",
    )
    return parser


def verify_step(code: int, verify_args: argparse.Namespace, target: str | None) -> int:
    """`python -m verify` on the pass's Spark session, after a pass that passed: its exit
    code when silver differs from the sources or cannot be compared, else the pass's."""
    from core.spark import get_session
    from verify import cli as verify_cli
    from verify.errors import VerifyError

    if code not in BUILT:
        return code
    try:
        found = verify_cli.run(get_session(target), verify_args).exit_code
    except VerifyError as exc:
        log.error("verify failed: %s", exc)
        return EXIT_FAILURE
    return found or code


def table_services_step(code: int, target: str | None, retention: table_services.Retention,
                        report: PassReport, compaction_budget: float | None = None) -> int:
    """After a pass that passed: the table services, or with `compaction_budget` only the
    compactions due within that many seconds (table_services.compact_due), reported;
    EXIT_FAILURE when one failed on some table (the others are still serviced)."""
    from core.spark import get_session

    if code not in BUILT:
        return code
    step = "table_services" if compaction_budget is None else "compaction"
    with timed(report.seconds, step):
        if compaction_budget is None:
            results = table_services.run(get_session(target), retention)
            report.table_services = [result.as_report() for result in results]
        else:
            done = table_services.compact_due(get_session(target), compaction_budget)
            results = done.results
            report.compaction = done.as_report()
    return EXIT_FAILURE if any(result.error for result in results) else code


def _write_report(path: Path | None, report: PassReport, code: int, error: str | None = None) -> None:
    """The pass's report at `path` (--report), if asked; a report that cannot be written
    is logged, never the reason a pass fails."""
    if path is None:
        return
    report.finish(code, OUTCOMES.get(code, "unknown"))
    report.error = report.error or error
    try:
        write_report(report, path)
    except OSError as exc:
        log.error("could not write the report to %s: %s", path, exc)


def _lock_path() -> Path:
    return Path(os.environ.get("CDC_LAKEHOUSE_DIR", "lakehouse")).resolve() / "run.lock"


@contextmanager
def _stop_signals_held() -> Iterator[None]:
    """Around the start of Spark's JVM: SIGTERM ignored and blocked, so the JVM inherits it
    ignored (pyspark does the same for SIGINT) and a SIGTERM sent to the whole process
    group stops the runner after its pass instead of killing Spark under it. Blocked, a
    SIGTERM that comes meanwhile stays pending and reaches the runner's handler after."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


@dataclass
class LoopState:
    """What a pass leaves the next in the same process: whether bronze holds nothing that
    this process's last `dbt build` has not seen (a pass clears it when it starts, so a
    pass that fails part-way, some tables landed and no build, leaves it cleared), and
    the missing bronze tables already named in the log (each is named once a process)."""

    built: bool = False
    named_missing: set[str] = field(default_factory=set)


def _flag_value(args: list[str], flag: str) -> str | None:
    """The value of `flag` in `args` (`--flag V` or `--flag=V`), the last one given."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def _project_dir(dbt_args: list[str]) -> Path:
    """The dbt project the pass builds: this one, unless `--dbt-arg=--project-dir` names another."""
    from core.spark import PROJECT_DIR

    given = _flag_value(dbt_args, "--project-dir")
    return Path(given).resolve() if given else PROJECT_DIR


def _dbt_common_args(dbt_args: list[str]) -> list[str]:
    from core.spark import PROJECT_DIR

    # the project's own profiles/ unless the user points dbt elsewhere (as `make` does)
    profiles = [] if "--profiles-dir" in dbt_args or os.environ.get("DBT_PROFILES_DIR") else [
        "--profiles-dir", str(PROJECT_DIR / "profiles")]
    project = [] if _flag_value(dbt_args, "--project-dir") else ["--project-dir", str(PROJECT_DIR)]
    return [*project, *profiles]


SELECTION_FLAGS = ("--select", "-s", "--exclude", "--selector")
# Arguments with which the user decides what the build covers: the pass then builds it as
# given instead of what changed (runner/selection.py).
USER_SCOPE_FLAGS = (*SELECTION_FLAGS, "--models", "-m", "--full-refresh", "--state", "--defer")


def _user_scoped(dbt_args: list[str]) -> bool:
    return any(arg.split("=", 1)[0] in USER_SCOPE_FLAGS for arg in dbt_args)


def _state_dir(given: Path | None) -> Path:
    return given if given is not None else _lock_path().parent / "runner-state"


def _selection(dbt_args: list[str]) -> list[str]:
    """The selection flags of the build's arguments and their values: freshness then
    checks the sources of the models the pass builds."""
    kept, keep = [], False
    for arg in dbt_args:
        if arg.startswith("-"):
            flag = arg.split("=", 1)[0]
            keep = flag in SELECTION_FLAGS and "=" not in arg
            if flag in SELECTION_FLAGS:
                kept.append(arg)
        elif keep:
            kept.append(arg)
    return kept


# dbt's flags that change what `dbt parse` reads: a pass parses with the build's ones.
PARSE_FLAGS = ("--vars", "--target", "-t", "--profile", "--project-dir", "--profiles-dir", "--target-path")


def _parse_args(dbt_args: list[str]) -> list[str]:
    """The flags of the build's arguments that `dbt parse` needs too, with their values."""
    kept = []
    for i, arg in enumerate(dbt_args):
        if arg.split("=", 1)[0] in PARSE_FLAGS:
            kept.extend([arg] if "=" in arg else dbt_args[i:i + 2])
    return kept


def _missing_sources(spark: SparkSession, schema: str, target: Path, report: PassReport,
                     named: set[str] | None = None,
                     build: selection.Plan | None = None) -> list[selection.MissingSource]:
    """The bronze sources (of the manifest in `target`) whose table does not exist yet,
    reported and logged with the topic to land and the models left out, unless in
    `named` (the tables this process named already, which it extends). The catalog
    listing is the `build` plan's when there is one."""
    tables = build.tables if build is not None else hudi_timeline.catalog_tables(spark, schema)
    missing = selection.missing_sources(selection.read_manifest(target), schema, tables)
    for source in missing:
        if named is None or source.table not in named:
            log.warning("%s", source.reason())
    if named is not None:
        named.update(source.table for source in missing)
    report.missing_bronze = [{"table": m.table, "topic": m.topic, "models_left_out": list(m.models)}
                             for m in missing]
    return missing


def _excluded(missing: Sequence[selection.MissingSource]) -> list[str]:
    return [arg for source in missing for arg in ("--exclude", source.exclude)]


def freshness_step(code: int, dbt_args: list[str], report: PassReport, excluded: Sequence[str] = ()) -> int:
    """`dbt source freshness` on the bronze sources the build selects, reported;
    EXIT_STALE when one is past its error threshold (or cannot be read) and the pass was
    otherwise fine."""
    from dbt.cli.main import dbtRunner

    with timed(report.seconds, "freshness"):
        result = dbtRunner().invoke(["source", "freshness", *_dbt_common_args(dbt_args), *_selection(dbt_args),
                                     *excluded])
    if result.result is None:
        log.error("dbt source freshness failed: %s", result.exception)
        return EXIT_FAILURE
    report.freshness = freshness_section(result.result.results)
    late = [s for s in report.freshness if s["status"] != "pass"]
    if late:
        log.warning("freshness: %s", ", ".join(f"{s['source']} {s['status']}" for s in late))
    if any(s["status"] != "warn" for s in late) and code in PASSED:
        return EXIT_STALE
    return code


def one_pass(ingest_args: argparse.Namespace, dbt_args: list[str], target: str | None,
             state: LoopState | None = None, build_always: bool = False, report: PassReport | None = None,
             freshness: bool = False, inline_services: bool = True, state_dir: Path | None = None) -> int:
    """Ingest, then build; returns an exit code. dbt runs in-process on the same session.
    The build covers what changed (runner/selection.py: the models downstream of the
    bronze tables with commits the last build did not take in, new or edited models, and
    what failed or was skipped then; every model before a first build), kept in
    `state_dir`, and is skipped when nothing did. `build_always` builds every model on
    every pass; selection flags in `dbt_args` build that selection as given, and then a
    pass that lands nothing after a passing build in this process (`state`) skips it.
    `report` is filled with what the pass did; `freshness` runs freshness_step after the
    build. Without `inline_services` the pass's writes neither clean nor archive (the
    runner's table services do)."""
    from dbt.cli.main import dbtRunner

    from core.spark import get_session

    report = report if report is not None else PassReport()
    run_ingestion = ingestion_cli.make_run(ingest_args)  # raises UsageError before Spark starts
    with _stop_signals_held():
        spark = get_session(target)
    for key, value in ({} if inline_services else table_services.INLINE_OFF).items():
        spark.conf.set(key, value)
    state = state or LoopState()
    built, state.built = state.built, False
    started = time.monotonic()
    summary = run_ingestion(spark)
    print(summary.render(), flush=True)
    ingested = time.monotonic()
    report.seconds["ingestion"] = ingested - started
    report.ingestion = ingestion_section(summary.as_report(), utc_now())
    code = EXIT_QUARANTINED if summary.quarantined else EXIT_OK
    project_dir = _project_dir(dbt_args)
    build: selection.Plan | None = None
    if not build_always and not _user_scoped(dbt_args):
        build = selection.plan(spark, ingest_args.bronze_schema, _state_dir(state_dir), project_dir)
        report.seconds["selection"] = time.monotonic() - ingested
        report.selection = build.as_report()
        skip_reason = build.skip_reason
    elif built and not build_always and not any(t.landed for t in summary.tables):
        skip_reason = "nothing landed since the last dbt build, which passed"
    else:
        skip_reason = None
    if skip_reason:
        state.built = True
        log.info("%s: dbt build skipped", skip_reason)
        log.info("ingestion %.1fs, dbt build %.1fs: %s", ingested - started, 0.0, "ok")
        report.dbt = dbt_section(None, True, skipped_reason=skip_reason)
        if not freshness:
            return code
        # the sources a skipped build would leave out, from the manifest of the last one
        last = _state_dir(state_dir) if (_state_dir(state_dir) / "manifest.json").exists() else \
            selection.target_dir(dbt_args, project_dir)
        missing = _missing_sources(spark, ingest_args.bronze_schema, last, report, state.named_missing, build)
        return freshness_step(code, dbt_args, report, _excluded(missing))
    parsed = dbtRunner().invoke(["parse", *_dbt_common_args(dbt_args), *_parse_args(dbt_args)])
    if not parsed.success:
        log.error("dbt parse failed: %s", parsed.exception or "see the dbt log above")
        report.dbt = dbt_section(None, False)
        return EXIT_FAILURE
    missing = _missing_sources(spark, ingest_args.bronze_schema, selection.target_dir(dbt_args, project_dir), report,
                               state.named_missing, build)
    if build is not None:
        log.info("dbt build of %s", "every model (a first build)" if build.state is None else
                 "what changed: " + (", ".join(f"bronze.{t}" for t in sorted(build.changed)) or "no bronze table")
                 + " and the nodes new, edited, failed or skipped since the last build")
    # dbt unit tests check the models' SQL, not the data: CI runs them, a scheduled pass need not
    selects_types = any(arg in ("--resource-type", "--exclude-resource-type") for arg in dbt_args)
    types = [] if selects_types else ["--exclude-resource-type", "unit_test"]
    selected = build.args if build is not None else []
    if selected and not any(arg.startswith("--warn-error-options") for arg in dbt_args):
        # the pass's state and result selectors mostly match nothing: dbt's warning for
        # each of them says nothing about the pass
        selected = [*selected, "--warn-error-options", json.dumps({"silence": ["NoNodesForSelectionCriteria"]})]
    excluded = _excluded(missing)
    # the parse's manifest: the build need not parse the project again
    with timed(report.seconds, "dbt_build"):
        result = dbtRunner(manifest=parsed.result).invoke(
            ["build", *_dbt_common_args(dbt_args), *types, *selected, *excluded, *dbt_args])
    results = getattr(result.result, "results", None)
    report.dbt = dbt_section(results, result.success)
    if build is not None and results is not None:
        statuses = {r.node.unique_id: str(r.status) for r in results}
        selection.record(build, ingest_args.bronze_schema, _state_dir(state_dir),
                         selection.target_dir(dbt_args, project_dir), statuses, [m.table for m in missing])
    log.info("ingestion %.1fs, dbt build %.1fs: %s", ingested - started, time.monotonic() - ingested,
             "ok" if result.success else "failed")
    if not result.success:
        log.error("dbt build failed: %s", result.exception or "see the dbt log above")
        return EXIT_FAILURE
    state.built = True
    return freshness_step(code, dbt_args, report, excluded) if freshness else code


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, rest = parser.parse_known_args(argv)
        ingest_parser = ingestion_cli.build_parser()
        ingest_parser.prog = parser.prog  # a mistyped option is reported under the command typed
        ingest_args = ingest_parser.parse_args(rest)
        if args.verify:
            from verify import cli as verify_cli

            verify_args = verify_cli.build_parser().parse_args(args.verify_arg)
    except SystemExit as exc:
        return int(exc.code or 0)
    configure_logging(ingest_args.verbose)
    target = None if ingest_args.target == "none" else ingest_args.target
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    failures = 0
    state = LoopState()
    retention = table_services.Retention(args.retain_commits)
    services_due = 0.0  # monotonic time the next table services are due at
    while True:
        report = PassReport()
        try:
            with exclusive(_lock_path()):
                code = one_pass(ingest_args, args.dbt_arg, target, state, args.build_always, report, args.freshness,
                                inline_services=not args.table_services, state_dir=args.state_dir)
                if args.table_services and time.monotonic() >= services_due:
                    code = table_services_step(code, target, retention, report)
                    if "table_services" in report.seconds:
                        services_due = time.monotonic() + args.table_services_every
                elif args.table_services:
                    code = table_services_step(code, target, retention, report, args.compaction_budget)
                if args.verify:
                    with timed(report.seconds, "verify"):
                        code = verify_step(code, verify_args, target)
        except UsageError as exc:
            log.error("%s", exc)
            _write_report(args.report, report, EXIT_USAGE, str(exc))
            return EXIT_USAGE
        except RunLockedError as exc:
            log.warning("%s", exc)
            code = EXIT_LOCKED
            report.error = str(exc)
        except (IngestionError, selection.SelectionError) as exc:
            log.error("%s", exc)
            code = EXIT_FAILURE
            report.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a scheduled pass reports any crash and goes on
            log.exception("pass failed")
            code = EXIT_FAILURE
            report.error = f"{type(exc).__name__}: {exc}"
        _write_report(args.report, report, code)
        if args.once:
            return code
        failures = failures + 1 if code == EXIT_FAILURE else 0
        if failures >= args.max_failures:
            log.error("%d failed passes in a row: stopping", failures)
            return EXIT_FAILURE
        if stop.wait(args.every):
            log.info("stopped by signal")
            return code
