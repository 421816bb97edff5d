"""Run in a fresh process after the crash runs: write bronze's event coordinates and
silver.actor as JSON to the file named by the first argument, read through a new Spark session on the crash test's lakehouse
(`CDC_LAKEHOUSE_DIR`), so only committed Hudi data is seen."""

from __future__ import annotations

import json
import sys

from core.spark import get_session


def main() -> int:
    spark = get_session("local")
    bronze = [list(r) for r in spark.sql(
        "select _partition, _offset from bronze.pagila_public_actor order by 1, 2").collect()]
    silver = [
        {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.asDict().items()}
        for r in spark.sql(
            "select actor_id, first_name, last_name, last_update from silver.actor order by actor_id").collect()
    ]
    with open(sys.argv[1], "w", encoding="utf-8") as out:  # stdout carries JVM warnings
        json.dump({"bronze": bronze, "silver": silver}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
