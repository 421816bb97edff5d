"""The generator's sink files again as the S3 sink's AvroFormat writes them, so ingestion
from JSON and from Avro can be timed on the same events.

    python -m benchmarks.generator --events N --keys K --shape flattened --wrapped --out DIR
    python -m benchmarks.avro_sink --input DIR/all/topics --out AVRO/topics

Needs the JsonConverter schema in every record (`--wrapped`) and no tombstones (the
flattened shape has none; Avro files cannot hold a null value). Each `.json` file
becomes the `.avro` file of the same start offset, its records under the Avro schema
AvroData derives from their Connect schema (testdata/sink_formats.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from testdata.sink_formats import write_avro


def convert(source: Path, out: Path, codec: str) -> int:
    """Every `.json` sink file under `source` as an `.avro` file under `out`; the records written."""
    written = 0
    for path in sorted(source.rglob("*.json")):
        values = [json.loads(line) for line in path.read_text().splitlines()]
        if any(v is None or "schema" not in v for v in values):
            raise ValueError(f"{path}: every record needs its JsonConverter schema and none may be a tombstone")
        target = out / path.relative_to(source).with_suffix(".avro")
        write_avro(target, values, block_records=4096, codec=codec)
        written += len(values)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.avro_sink", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", type=Path, required=True, help="the JSON sink files' topics folder")
    ap.add_argument("--out", type=Path, required=True, help="the Avro sink files' topics folder")
    ap.add_argument("--codec", default="null", help="avro.codec: null (the sink's default), deflate, bzip2")
    args = ap.parse_args(argv)
    print(f"{args.out}: {convert(args.input, args.out, args.codec)} record(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
