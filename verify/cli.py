"""`python -m verify`: compare silver with the source databases (docs/how-to/verify-the-lake.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

from core.cli import number, run_command
from verify.errors import UsageError, VerifyError
from verify.report import (
    EXIT_BEHIND, EXIT_DIFFERENT, EXIT_ERROR, EXIT_IN_SYNC, EXIT_LOCKED, EXIT_USAGE, Report, render, to_json,
)

EPILOG = f"""\
source connections (environment only): CDC_PG_HOST, CDC_PG_PORT, CDC_PG_USER, CDC_PG_PASSWORD and
CDC_MARIADB_HOST, CDC_MARIADB_PORT, CDC_MARIADB_USER, CDC_MARIADB_PASSWORD; a user or password
left unset is read from $CDC_STACK_DIR/credentials.env, which the local stack writes.

exit codes:
  {EXIT_IN_SYNC}  every compared table equals its source table
  {EXIT_DIFFERENT}  differences found while silver is at the source's snapshot: they are real
  {EXIT_BEHIND}  differences found, but the source changed those tables after silver's position:
     they may be lag (run again after the next build)
  {EXIT_LOCKED}  another run holds the lakehouse's lock (nothing compared)
  {EXIT_USAGE}  usage error
  {EXIT_ERROR}  a table or a source could not be compared
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m verify",
        description="Is silver in sync with the source databases? Row counts and hashed key ranges per table, "
                    "narrowed down to the keys (and columns) that differ, at one snapshot of each source.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", action="append", default=[], metavar="MODEL",
                        help="a silver model to compare, repeatable (default: every model that holds the current "
                             "state of a log-captured source table)")
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write the findings as JSON to PATH")
    parser.add_argument("--show-values", action="store_true",
                        help="print the differing values too (off by default: they are the source's data)")
    parser.add_argument("--ranges", type=number(int, minimum=2), default=16, metavar="N",
                        help="how many key ranges a differing range is split into (default 16)")
    parser.add_argument("--leaf-rows", type=number(int, minimum=1), default=256, metavar="N",
                        help="fetch and diff the rows of a differing range once it holds at most N rows (default 256)")
    parser.add_argument("--max-rows", type=number(int, minimum=1), default=20_000, metavar="N",
                        help="fetch at most N rows per table; further differing ranges are only counted "
                             "(default 20000)")
    parser.add_argument("--silver-schema", default="silver", help="schema of the silver models (default: silver)")
    parser.add_argument("--bronze-schema", default="bronze", help="schema of the bronze tables (default: bronze)")
    parser.add_argument("--project-dir", type=Path, default=None,
                        help="the dbt project whose YAML describes silver (default: this repository)")
    parser.add_argument("--target", default="local", choices=["local", "none"],
                        help="Spark session: `local` (the profile's embedded Spark, default) or `none` "
                             "(use the session spark-submit made)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def run(spark, args: argparse.Namespace) -> Report:
    """Verify with parsed arguments on `spark`; print the summary, write the JSON."""
    from core.spark import PROJECT_DIR
    from verify.lake import Options, verify_lake

    options = Options(project_dir=args.project_dir or PROJECT_DIR, tables=args.table, silver_schema=args.silver_schema,
                      bronze_schema=args.bronze_schema, fanout=args.ranges, leaf_rows=args.leaf_rows,
                      max_rows=args.max_rows, show_values=args.show_values)
    report = verify_lake(spark, options)
    print(render(report), flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(to_json(report), indent=2) + "\n")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    from core.lock import RunLockedError

    return run_command(build_parser(), argv, _run,
                       {RunLockedError: EXIT_LOCKED, UsageError: EXIT_USAGE, VerifyError: EXIT_ERROR}, "verify")


def _run(args: argparse.Namespace) -> int:
    from core.lock import exclusive
    from core.spark import get_session
    from verify.lake import lock_path

    # a build during the comparison would change silver under it
    with exclusive(lock_path()):
        # the summary is the output: no console progress bars between its lines
        spark = get_session(None if args.target == "none" else args.target,
                            {"spark.ui.showConsoleProgress": "false"})
        return run(spark, args).exit_code
