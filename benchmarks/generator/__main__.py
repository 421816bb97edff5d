"""python -m benchmarks.generator --events N --keys K --out DIR [--segment NAME:EVENTS ...]"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .sink import Layout, write_segments
from .stream import StreamConfig


def _segment(text: str) -> tuple[str, int]:
    name, _, count = text.partition(":")
    if not name or not count.isdigit():
        raise argparse.ArgumentTypeError(f"a segment is NAME:EVENTS, e.g. history:1000000 (got {text!r})")
    return name, int(count)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.generator", description=__doc__)
    ap.add_argument("--events", type=int, required=True)
    ap.add_argument("--keys", type=int, required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--delete-share", type=float, default=0.05, help="share of deletes among events on live keys")
    ap.add_argument("--row-bytes", type=int, default=200, help="length of the text column (row width)")
    ap.add_argument("--shape", choices=["envelope", "flattened"], default="envelope")
    ap.add_argument("--wrapped", action="store_true", help="JsonConverter schemas.enable=true")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--records-per-file", type=int, default=100_000)
    ap.add_argument("--segment", type=_segment, action="append", default=None,
                    help="NAME:EVENTS, repeatable, in order (default: all:<events>)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        config = StreamConfig(args.events, args.keys, args.seed, args.delete_share, args.row_bytes)
        layout = Layout(args.shape, args.wrapped, args.partitions, args.records_per_file)
    except ValueError as exc:
        ap.error(str(exc))
    started = time.monotonic()
    manifest = write_segments(config, layout, args.segment or [("all", args.events)], args.out)
    print(f"{args.out}: {manifest['counts']} ({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
