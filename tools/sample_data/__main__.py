"""python -m tools.sample_data --pagila-dir DIR --out DIR [--seed N]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import DEFAULT_SEED, generate

PAGILA_FILES = ("pagila-schema.sql", "pagila-data.sql")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.sample_data", description=__doc__)
    ap.add_argument("--pagila-dir", required=True, help="folder with pagila-schema.sql and pagila-data.sql")
    ap.add_argument("--out", required=True, help="output folder (batches/ is replaced)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = ap.parse_args(argv)
    missing = [name for name in PAGILA_FILES if not (Path(args.pagila_dir) / name).is_file()]
    if missing:
        # A newcomer's first `make demo` lands here when the sample is elsewhere: say where to point.
        print(f"the Pagila sample is not in {args.pagila_dir}: {' and '.join(missing)} not found there; "
              "point PAGILA_DIR at the folder that holds them (make demo PAGILA_DIR=/path/to/pagila)",
              file=sys.stderr)
        return 2
    m = generate(args.pagila_dir, args.out, args.seed)
    for b, info in m["batches"].items():
        total = sum(f["records"] for f in info["files"])
        print(f"batch {b}: {len(info['files'])} files, {total} records "
              + ", ".join(f"{t}={sum(v for k, v in c.items() if k != 'tombstones')}"
                          for t, c in info["events"].items()))
    print(f"wrote {args.out}/manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
