"""python -m benchmarks.generator --events N --keys K (--out DIR | --kafka HOST:PORT) [--segment NAME:EVENTS ...]

Writes the stream in the Kafka Connect S3-sink layout under --out, or produces it to the
topic on --kafka (the same records, partitions and offsets), or both."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .sink import Layout, check_segments, write_segments
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
    ap.add_argument("--snapshot", action="store_true", help="start with an initial snapshot: every key read once (op r)")
    ap.add_argument("--row-bytes", type=int, default=200, help="length of the text column (row width)")
    ap.add_argument("--shape", choices=["envelope", "flattened"], default="envelope")
    ap.add_argument("--wrapped", action="store_true", help="JsonConverter schemas.enable=true")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--records-per-file", type=int, default=100_000)
    ap.add_argument("--segment", type=_segment, action="append", default=None,
                    help="NAME:EVENTS, repeatable, in order (default: all:<events>)")
    ap.add_argument("--out", type=Path, help="write the S3-sink layout here")
    ap.add_argument("--kafka", metavar="HOST:PORT", help="produce to the topic on this Kafka bootstrap server")
    ap.add_argument("--produce", metavar="NAME", action="append", default=None,
                    help="with --kafka: produce only these segments (repeatable; consecutive; default all)")
    args = ap.parse_args(argv)
    if args.out is None and args.kafka is None:
        ap.error("give --out DIR (S3-sink files), --kafka HOST:PORT (a Kafka topic), or both")
    if args.produce and args.kafka is None:
        ap.error("--produce needs --kafka")
    segments = args.segment or [("all", args.events)]
    try:
        config = StreamConfig(args.events, args.keys, args.seed, args.delete_share, args.row_bytes, snapshot=args.snapshot)
        layout = Layout(args.shape, args.wrapped, args.partitions, args.records_per_file)
        check_segments(config, segments)
    except ValueError as exc:
        ap.error(str(exc))
    if args.out is not None:
        started = time.monotonic()
        manifest = write_segments(config, layout, segments, args.out)
        print(f"{args.out}: {manifest['counts']} ({time.monotonic() - started:.1f}s)")
    return 0 if args.kafka is None else _produce(config, layout, segments, args.kafka, args.produce)


def _produce(config: StreamConfig, layout: Layout, segments: list[tuple[str, int]], bootstrap: str,
             only: list[str] | None) -> int:
    from .kafka import KafkaProduceError, produce_segments  # needs confluent-kafka (the dev extras)

    started = time.monotonic()
    try:
        produced = produce_segments(config, layout, segments, bootstrap, only)
    except KafkaProduceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{bootstrap} {produced['topic']}: {produced['counts']}, end offsets {produced['end_offsets']} "
          f"({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
