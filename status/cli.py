"""`python -m status`: per silver table, the last commit, the watermark, how far it is
behind bronze and behind its source, its files, and the table services waiting to run.

    python -m status                      # every silver table
    python -m status --model actor --json status.json
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Sequence

from status.collect import collect
from status.errors import StatusError
from status.render import render, to_json

log = logging.getLogger("status")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


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
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    from ingestion.spark import get_session

    try:
        statuses = collect(get_session(None if args.target == "none" else args.target), args.schema, args.model)
    except StatusError as exc:
        log.error("%s", exc)
        return EXIT_FAILURE
    print(render(statuses), flush=True)
    if args.json:
        args.json.write_text(to_json(statuses))
    return EXIT_OK
