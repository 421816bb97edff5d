"""How every command runs: its arguments parsed (a usage error is exit 2, `--help` 0),
one log format on stderr, each of its known errors logged in a line and mapped to its
exit code, anything else logged with its traceback as exit 1."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Callable, Mapping, Sequence, TypeVar

from core.exit_codes import EXIT_FAILURE

Number = TypeVar("Number", int, float)

# Libraries whose INFO lines say nothing about what a run did (py4j's per-connection
# callback server messages): they log at WARNING and above only.
QUIET_LOGGERS = ("py4j",)


def configure_logging(verbose: bool = False) -> None:
    """`time level logger: message` lines on stderr, at DEBUG with `verbose`, else INFO."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for name in QUIET_LOGGERS if not verbose else ():
        logging.getLogger(name).setLevel(logging.WARNING)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code argparse chose (0 for --help, 2 for a usage error)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
                body: Callable[[argparse.Namespace], int], errors: Mapping[type[BaseException], int],
                what: str) -> int:
    """Parse `argv`, set up logging (`--verbose` if the parser has it), run `body`; an
    exception of a type in `errors` (the first that matches, in order) is logged as one
    line and returns its code; any other is logged with its traceback as `what failed`.
    `what` names the command and its logger."""
    args = parse(parser, argv)
    if isinstance(args, int):
        return args
    configure_logging(getattr(args, "verbose", False))
    try:
        return body(args)
    except tuple(errors) as exc:
        logging.getLogger(what).error("%s", exc)
        return next(code for kind, code in errors.items() if isinstance(exc, kind))
    except Exception:  # noqa: BLE001 - report any crash as exit 1 with its traceback
        logging.getLogger(what).exception("%s failed", what)
        return EXIT_FAILURE


def number(kind: Callable[[str], Number], minimum: Number | None = None,
           above: Number | None = None) -> Callable[[str], Number]:
    """An argparse type: `kind(text)` (int or float), refused unless at least `minimum`
    or more than `above`, with a message that says which."""
    def convert(text: str) -> Number:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a {'whole ' if kind is int else ''}number") from None
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"must be more than {above}, got {text}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {value}")
        return value
    return convert
