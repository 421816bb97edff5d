"""python -m tools.record_fixtures --out tests/fixtures/debezium

Starts the CDC stack in its own folder and ports (default /tmp/fixture-stack, ports
55452/53326/59112/59113/58103), records the four connectors' output for the scripted
workload (tools/record_fixtures/workload.py), writes <out>/<connector>/<topic>.jsonl,
<out>/workload.json and <out>/README.md, and stops and deletes that stack."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .recorder import DEFAULT_PORTS, DEFAULT_STACK_DIR, record
from .readme import write_readme


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.record_fixtures", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="fixture folder (its connector folders are replaced)")
    ap.add_argument("--stack-dir", type=Path, default=DEFAULT_STACK_DIR,
                    help=f"the recorder's own stack folder, purged before and after (default {DEFAULT_STACK_DIR})")
    for name, port in DEFAULT_PORTS.items():
        ap.add_argument("--" + name[4:].lower().replace("_", "-"), type=int, default=port, dest=name,
                        help=f"sets {name} (default {port})")
    ap.add_argument("--keep-stack", action="store_true", help="leave the stack running (debugging)")
    args = ap.parse_args(argv)
    ports = {name: getattr(args, name) for name in DEFAULT_PORTS}
    recording = record(args.out, args.stack_dir.resolve(), ports, keep_stack=args.keep_stack)
    write_readme(recording)
    for name, count in sorted(recording.counts.items()):
        print(f"  {name}: {count} records")
    print(f"recorded in {recording.seconds['total']:.1f}s into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
