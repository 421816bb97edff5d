"""Where a `dbt build` spent its time, from dbt's log file: seconds and count per kind of
statement, per model, and each kind of node's time from its start to its finish.

    dbt build                                                   # writes logs/dbt.log (text, debug)
    python -m tools.build_profile logs/dbt.log                  # the last invocation in it
    python -m tools.build_profile logs/dbt.log --invocation 3   # the third (-2: the one before the last)

Reads dbt's default text log and its JSON one (`--log-format-file json`). A statement's
seconds are dbt's own (`SQL status: ... in N seconds`); with `threads: 2` two statements
run at once, so the sums exceed the wall time (docs/reference/build-cost.md). A query that
returns rows (a data test's, a model's look-ups) is timed there before its rows are
fetched: the nodes' start-to-finish seconds include the fetch, and dbt's own work.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

# A query's leading `/* {...} */` comment, which dbt adds to every statement.
_COMMENT = re.compile(r"^\s*/\*.*?\*/\s*", re.S)
_WORK_TABLE = re.compile(r"^create table \S+__(?:cdc|hudi)_([a-z]+)\s+using\s+(\w+)", re.I)
_TARGET = re.compile(r"^(insert into|merge into)\s", re.I)
_INTO_WORK_TABLE = re.compile(r"^insert into (?:table )?\S+__(?:cdc|hudi)_([a-z]+)[\s(]", re.I)
# The text log: a banner opens each invocation, then `HH:MM:SS.micros [level] [thread]: message`
# lines (after a colour reset), a query's SQL running on over the lines below its own.
_BANNER = re.compile(r"^=+ (\d\d:\d\d:\d\d\.\d+) \| ([0-9a-f-]{36}) =+$")
_LINE = re.compile(r"^(?:\x1b\[0m)?(\d\d:\d\d:\d\d\.\d+) \[\s*\w+\s*\] \[([^\]]*?)\s*\]: (.*)$")
_TEXT_QUERY = re.compile(r"^On (\S+): (.*)$", re.S)
_TEXT_STATUS = re.compile(r"^SQL status: .* in ([\d.]+) seconds$")
_TEXT_NODE = re.compile(r"^(Began|Finished) running node (\S+)$")
_NOT_A_QUERY = {"ROLLBACK", "COMMIT", "Close", "BEGIN"}
_JSON_KINDS = {"SQLQuery": "query", "SQLQueryStatus": "status", "NodeStart": "node_start",
               "NodeFinished": "node_end"}


@dataclass(frozen=True)
class Event:
    """One line of the log that the profile reads, the same from either format."""
    invocation: str
    kind: str  # query, status, node_start, node_end or other
    thread: str
    ts: datetime
    sql: str = ""
    elapsed: float = 0.0
    node: str = ""  # the node's unique id, `model.project.name`


@dataclass
class Profile:
    """Seconds and statement counts by kind and by model, node seconds by resource type
    (start to finish, summed over threads), and the invocation's wall time."""
    seconds_by_kind: Counter = field(default_factory=Counter)
    count_by_kind: Counter = field(default_factory=Counter)
    seconds_by_model: Counter = field(default_factory=Counter)
    count_by_model: Counter = field(default_factory=Counter)
    node_seconds_by_type: Counter = field(default_factory=Counter)
    node_count_by_type: Counter = field(default_factory=Counter)
    wall_seconds: float = 0.0


def statement_kind(sql: str) -> str:
    """A statement's kind: its first two words, the work table a `create table` writes
    (`create batch`), the model's table behind its view that an insert writes (`insert
    into state`, `insert into recent`), or the write into the model's own table (`insert
    into`)."""
    text = " ".join(_COMMENT.sub("", sql).split())
    work = _WORK_TABLE.match(text)
    if work:
        return f"create {work.group(1)}"
    into_work = _INTO_WORK_TABLE.match(text)
    if into_work:
        return f"insert into {into_work.group(1).lower()}"
    target = _TARGET.match(text)
    if target:
        return target.group(1).lower()
    return " ".join(re.split(r"[\s(]+", text.lower())[:2])


def _json_events(lines: Iterable[str]) -> Iterator[Event]:
    for line in lines:
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        info, data = event["info"], event.get("data", {})
        yield Event(info["invocation_id"], _JSON_KINDS.get(info["name"], "other"), info["thread"],
                    datetime.fromisoformat(info["ts"].replace("Z", "+00:00")), sql=data.get("sql", ""),
                    elapsed=float(data.get("elapsed", 0.0)),
                    node=(data.get("node_info") or {}).get("unique_id", ""))


def _text_event(invocation: str, thread: str, ts: datetime, message: str) -> Event:
    if status := _TEXT_STATUS.match(message):
        return Event(invocation, "status", thread, ts, elapsed=float(status.group(1)))
    if node := _TEXT_NODE.match(message):
        return Event(invocation, "node_start" if node.group(1) == "Began" else "node_end", thread, ts,
                     node=node.group(2))
    query = _TEXT_QUERY.match(message)
    if query and query.group(2).strip() not in _NOT_A_QUERY:
        return Event(invocation, "query", thread, ts, sql=query.group(2), node=query.group(1))
    return Event(invocation, "other", thread, ts)


def _text_events(lines: Iterable[str]) -> Iterator[Event]:
    # The text log's times carry no date: a time more than an hour before the last one is
    # the next day's.
    invocation, days, last = "", 0, None
    pending: tuple[str, datetime, str] | None = None  # the line being read: thread, time, message
    for line in lines:
        line = line.rstrip("\n")
        banner, head = _BANNER.match(line), _LINE.match(line)
        if (banner or head) and pending:
            yield _text_event(invocation, *pending)
            pending = None
        if banner:
            invocation = banner.group(2)
        elif head:
            ts = datetime.strptime(head.group(1), "%H:%M:%S.%f") + timedelta(days=days)
            if last and ts < last - timedelta(hours=1):
                days += 1
                ts += timedelta(days=1)
            last = ts
            pending = (head.group(2), ts, head.group(3))
        elif pending:
            pending = (pending[0], pending[1], pending[2] + "\n" + line)
    if pending:
        yield _text_event(invocation, *pending)


def read_events(lines: Iterable[str]) -> list[Event]:
    """The log's events in order, from dbt's text log (told by its invocation banners: a
    line of SQL there may start with `{` too) or its JSON one."""
    lines = list(lines)
    if any(_BANNER.match(line.rstrip("\n")) for line in lines):
        return [e for e in _text_events(lines) if e.invocation]
    return list(_json_events(lines))


def invocation(events: list[Event], number: int = -1) -> list[Event]:
    """The events of one dbt invocation (a log file collects many): `number` counts from 1,
    or from the end when negative."""
    ids = list(dict.fromkeys(e.invocation for e in events))
    if not ids:
        raise ValueError("no dbt invocation found: is this dbt's log file (logs/dbt.log, level debug)?")
    if not (1 <= number <= len(ids) or -len(ids) <= number <= -1):
        raise ValueError(f"--invocation {number}: the log holds {len(ids)} invocation(s)")
    chosen = ids[number - 1 if number > 0 else number]
    return [e for e in events if e.invocation == chosen]


def last_invocation(lines: Iterable[str]) -> list[Event]:
    """The events of the log's last dbt invocation."""
    return invocation(read_events(lines))


def _node_name(unique_id: str) -> str:
    """`model.project.actor` -> `actor`, `test.project.unique_actor_id.1a2b` -> `unique_actor_id`."""
    parts = unique_id.split(".")
    return parts[2] if len(parts) >= 3 else (unique_id or "-")


def profile(events: list[Event]) -> Profile:
    """Sum each statement's elapsed seconds by kind and by model (`-` outside a model), and
    each node's seconds from start to finish by resource type."""
    result = Profile()
    pending: dict[str, Event] = {}  # thread -> the statement it runs
    started: dict[str, datetime] = {}  # node -> its start
    for event in events:
        if event.kind == "query":
            pending[event.thread] = event
        elif event.kind == "status":
            query = pending.pop(event.thread, None)
            kind = statement_kind(query.sql if query else "")
            model = _node_name((query.node if query else "") or event.node)
            result.seconds_by_kind[kind] += event.elapsed
            result.count_by_kind[kind] += 1
            result.seconds_by_model[model] += event.elapsed
            result.count_by_model[model] += 1
        elif event.kind == "node_start":
            started[event.node] = event.ts
        elif event.kind == "node_end" and event.node in started:
            resource = event.node.split(".", 1)[0]
            result.node_seconds_by_type[resource] += (event.ts - started.pop(event.node)).total_seconds()
            result.node_count_by_type[resource] += 1
    if events:
        result.wall_seconds = (max(e.ts for e in events) - min(e.ts for e in events)).total_seconds()
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
    if result.node_count_by_type:
        lines += ["", "seconds  count  nodes, start to finish (fetch and dbt's own work included)"]
        for resource, seconds in result.node_seconds_by_type.most_common():
            lines.append(f"{seconds:7.1f}  {result.node_count_by_type[resource]:5d}  {resource}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.build_profile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", type=Path, help="dbt's log file (logs/dbt.log), text or JSON")
    ap.add_argument("--invocation", type=int, default=-1,
                    help="which dbt invocation in the log: 1 the first, -1 the last (default)")
    ap.add_argument("--top", type=int, default=15, help="rows per table (default 15)")
    args = ap.parse_args(argv)
    try:
        with args.log.open(errors="replace") as f:
            events = invocation(read_events(f), args.invocation)
    except (OSError, ValueError) as err:
        print(f"{args.log}: {err}", file=sys.stderr)
        return 2
    print(render(profile(events), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
