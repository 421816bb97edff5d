"""What `python -m status` reports of a table, and the pure arithmetic on Hudi instants."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

INSTANT_FORMAT = "%Y%m%d%H%M%S%f"
# Table services whose instants wait on the timeline until they run.
SERVICES = {"compaction": "compaction", "logcompaction": "log compaction", "clean": "cleaning",
            "clustering": "clustering", "replacecommit": "clustering", "rollback": "rollback",
            "indexing": "indexing", "restore": "restore"}


@dataclass
class TableStatus:
    """One silver table: its Hudi table, the build that last wrote it and how far behind
    its bronze change logs and its source it is."""

    model: str
    table: str  # the Hudi table that holds it (`<schema>.<model>__cdc_state`, or the history table)
    last_commit: str | None = None  # instant time of the last completed write
    last_commit_action: str | None = None
    watermark: str | None = None  # the newest bronze commit applied
    sources: list[str] = field(default_factory=list)  # bronze tables (`cdc.sources`)
    bronze_newest_commit: str | None = None  # the newest commit among them
    behind_bronze_seconds: float | None = None  # 0 when every bronze commit is applied
    newest_source_change: datetime | None = None  # the newest source time silver holds
    behind_source_seconds: float | None = None  # how old that change is now
    file_groups: int = 0
    base_files_bytes: int = 0
    log_files: int = 0
    log_files_bytes: int = 0
    pending_services: list[str] = field(default_factory=list)  # "<service> <state> <instant>"
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.newest_source_change is not None:
            data["newest_source_change"] = self.newest_source_change.isoformat()
        return data


def instant_time(instant: str) -> datetime:
    """A Hudi instant (`yyyyMMddHHmmssSSS`, the writer's clock) as a naive datetime."""
    if not instant.isdigit() or len(instant) < 14:
        raise ValueError(f"{instant!r} is not a Hudi instant time")
    return datetime.strptime(instant[:14] + instant[14:17].ljust(6, "0"), INSTANT_FORMAT)


def seconds_between(older: str, newer: str) -> float:
    """Seconds from instant `older` to instant `newer`, never below 0 (both are on one
    clock, so the time zone Hudi writes them in does not matter)."""
    return max(0.0, (instant_time(newer) - instant_time(older)).total_seconds())


def newest_instant(instants: list[str | None]) -> str | None:
    known = [i for i in instants if i]
    return max(known, key=int) if known else None


def age_seconds(moment: datetime, now: datetime | None = None) -> float:
    """Seconds from `moment` (naive = UTC, as the session's time zone) to now."""
    now = now or datetime.now(timezone.utc)
    moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    return round((now - moment).total_seconds(), 3)


def pending(timeline: list[dict[str, Any]]) -> list[str]:
    """The table services a timeline (`call show_timeline` rows) holds requested or in
    flight, oldest first."""
    waiting = [row for row in timeline if row["state"] != "COMPLETED" and row["action"] in SERVICES]
    return [f"{SERVICES[row['action']]} {row['state'].lower()} {row['instant_time']}"
            for row in sorted(waiting, key=lambda row: int(row["instant_time"]))]
