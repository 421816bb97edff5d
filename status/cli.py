"""`python -m status`: per silver table, the last commit, the watermark, how far it is
behind bronze and behind its source, its files, and the table services waiting to run.

    python -m status                      # every silver table
    python -m status --model actor --json status.json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from core.cli import run_command
from core.exit_codes import EXIT_FAILURE, EXIT_OK
from status.collect import collect
from status.errors import StatusError
from status.render import render, to_json



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m status",
        description="Where each silver table stands: last commit, watermark, lag behind bronze and "
                    "behind the source, files, pending table services (docs/reference/status.md).")
    parser.add_argument("--model", action="append", default=[], help="a silver model, repeatable (default: all)")
    parser.add_argument("--schema", default="silver", help="the silver schema (default: silver)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the status as JSON to PATH")
    parser.add_argument("--target", default="local",
                        help="the profile target whose Spark settings to use, or `none` inside spark-submit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(build_parser(), argv, _run, {StatusError: EXIT_FAILURE}, "status")


def _run(args: argparse.Namespace) -> int:
    from core.spark import get_session

    statuses = collect(get_session(None if args.target == "none" else args.target), args.schema, args.model)
    print(render(statuses), flush=True)
    if args.json:
        args.json.write_text(to_json(statuses))
    return EXIT_OK
