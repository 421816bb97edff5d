"""A reader of silver in its own process, as a dashboard or an ad-hoc query is: one Spark
session on the shared metastore reading `silver.actor` again and again until the file
named by the second argument exists, each read's rows (or its error) appended as a JSON
line to the file named by the first. tests/crash/test_atomic_reads.py compares them
with the oracle."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from core.spark import get_session

READ_PAUSE = 2.0  # seconds between reads: the builds share two cores with the readers and the other worker
QUERY = "select actor_id, first_name, last_name, last_update from silver.actor order by actor_id"


def main() -> int:
    out, stop = Path(sys.argv[1]), Path(sys.argv[2])
    spark = get_session("local")
    with out.open("a", encoding="utf-8") as lines:
        while not stop.exists():
            started = time.time()
            try:
                rows = [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.asDict().items()}
                        for r in spark.sql(QUERY).collect()]
                read = {"started": started, "rows": rows}
            except Exception as exc:  # noqa: BLE001 - a failed read is the finding, recorded
                read = {"started": started, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:500]}"}
            lines.write(json.dumps(read) + "\n")
            lines.flush()
            time.sleep(READ_PAUSE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
