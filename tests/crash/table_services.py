"""The runner's table services on silver, in a process of their own (as the runner runs
them between passes): compaction, cleaning to 2 retained commits (so that files are
removed while readers read), archival. Appends what they did to silver's state tables
as one JSON line to the file named by the first argument."""

from __future__ import annotations

import json
import sys

from core.spark import get_session
from runner.table_services import Retention, run


def main() -> int:
    results = run(get_session("local"), Retention(commits=2), schemas=("silver",))
    done = [r for r in results if r.table.endswith("__cdc_state")]
    with open(sys.argv[1], "a", encoding="utf-8") as out:  # stdout carries JVM warnings
        out.write(json.dumps({
            "compactions": sum(len(r.compactions) for r in done),
            "files_cleaned": sum(r.files_cleaned for r in done),
            "errors": [f"{r.table}: {r.error}" for r in done if r.error],
        }) + "\n")
    return 1 if any(r.error for r in done) else 0


if __name__ == "__main__":
    sys.exit(main())
