"""Where a `dbt build` spent its time, from dbt's JSON log: seconds and count per kind of
statement and per model.

    dbt run --log-format-file json --log-level-file debug      # writes logs/dbt.log
    python -m tools.build_profile logs/dbt.log                  # the last invocation in it

A statement's seconds are dbt's own (`SQLQueryStatus.elapsed`); with `threads: 2` two
statements run at once, so the sums exceed the wall time (docs/reference/build-cost.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

# A query's leading `/* {...} */` comment, which dbt adds to every statement.
_COMMENT = re.compile(r"^\s*/\*.*?\*/\s*", re.S)
_WORK_TABLE = re.compile(r"^create table \S+__(?:cdc|hudi)_([a-z]+)\s+using\s+(\w+)", re.I)
_TARGET = re.compile(r"^(insert into|merge into)\s", re.I)


@dataclass
class Profile:
    """Seconds and statement counts by kind and by model, and the invocation's wall time."""
    seconds_by_kind: Counter = field(default_factory=Counter)
    count_by_kind: Counter = field(default_factory=Counter)
    seconds_by_model: Counter = field(default_factory=Counter)
    count_by_model: Counter = field(default_factory=Counter)
    wall_seconds: float = 0.0


def statement_kind(sql: str) -> str:
    """A statement's kind: its first two words, the work table a `create table` writes
    (`create batch`), or the write into the model's own table (`insert into`)."""
    text = " ".join(_COMMENT.sub("", sql).split())
    work = _WORK_TABLE.match(text)
    if work:
        return f"create {work.group(1)}"
    target = _TARGET.match(text)
    if target:
        return target.group(1).lower()
    return " ".join(re.split(r"[\s(]+", text.lower())[:2])


def last_invocation(lines: Iterable[str]) -> list[dict]:
    """The JSON events of the log's last dbt invocation (a log file collects many)."""
    events = [json.loads(line) for line in lines if line.startswith("{")]
    if not events:
        raise ValueError("no JSON log events: run dbt with --log-format-file json --log-level-file debug")
    last = events[-1]["info"]["invocation_id"]
    return [e for e in events if e["info"]["invocation_id"] == last]


def profile(events: list[dict]) -> Profile:
    """Sum each statement's elapsed seconds by kind and by model (`-` outside a model)."""
    result = Profile()
    pending: dict[str, str] = {}  # thread -> the statement it runs
    for event in events:
        name, thread = event["info"]["name"], event["info"]["thread"]
        if name == "SQLQuery":
            pending[thread] = event["data"]["sql"]
        elif name == "SQLQueryStatus":
            kind = statement_kind(pending.pop(thread, ""))
            model = (event["data"].get("node_info", {}).get("unique_id", "") or "-").rsplit(".", 1)[-1]
            seconds = float(event["data"].get("elapsed", 0.0))
            result.seconds_by_kind[kind] += seconds
            result.count_by_kind[kind] += 1
            result.seconds_by_model[model] += seconds
            result.count_by_model[model] += 1
    stamps = [datetime.fromisoformat(e["info"]["ts"].replace("Z", "+00:00")) for e in events]
    result.wall_seconds = (max(stamps) - min(stamps)).total_seconds()
    return result


def render(result: Profile, top: int) -> str:
    total = sum(result.seconds_by_kind.values())
    lines = [f"wall {result.wall_seconds:.1f} s; statements {sum(result.count_by_kind.values())}, "
             f"{total:.1f} s summed over threads", "", "seconds  count  share  statement"]
    for kind, seconds in result.seconds_by_kind.most_common(top):
        lines.append(f"{seconds:7.1f}  {result.count_by_kind[kind]:5d}  {seconds / total:5.0%}  {kind}")
    lines += ["", "seconds  count  model"]
    for model, seconds in result.seconds_by_model.most_common(top):
        lines.append(f"{seconds:7.1f}  {result.count_by_model[model]:5d}  {model}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.build_profile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", type=Path, help="dbt's JSON log file (logs/dbt.log)")
    ap.add_argument("--top", type=int, default=15, help="rows per table (default 15)")
    args = ap.parse_args(argv)
    try:
        with args.log.open() as f:
            events = last_invocation(f)
    except (OSError, ValueError) as err:
        print(f"{args.log}: {err}", file=sys.stderr)
        return 2
    print(render(profile(events), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
