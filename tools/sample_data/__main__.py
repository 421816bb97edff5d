"""python -m tools.sample_data --pagila-dir DIR --out DIR [--seed N]"""

from __future__ import annotations

import argparse
import sys

from . import DEFAULT_SEED, generate
from .pagila import PagilaNotFound


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.sample_data", description=__doc__)
    ap.add_argument("--pagila-dir", required=True, help="folder with pagila-schema.sql and pagila-data.sql")
    ap.add_argument("--out", required=True, help="output folder (batches/ is replaced)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = ap.parse_args(argv)
    try:
        m = generate(args.pagila_dir, args.out, args.seed)
    except PagilaNotFound as error:
        # A newcomer's first `make demo` lands here when the sample is elsewhere: say where to point.
        print(error, file=sys.stderr)
        return 2
    for b, info in m["batches"].items():
        total = sum(f["records"] for f in info["files"])
        print(f"batch {b}: {len(info['files'])} files, {total} records "
              + ", ".join(f"{t}={sum(v for k, v in c.items() if k != 'tombstones')}"
                          for t, c in info["events"].items()))
    print(f"wrote {args.out}/manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
