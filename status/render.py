"""The status as a table for people and as JSON for programs."""

from __future__ import annotations

import json
from typing import Any

from status.model import TableStatus


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def render(statuses: list[TableStatus]) -> str:
    header = ("model", "last commit", "watermark", "behind bronze s", "behind source s", "file groups",
              "size", "log files", "pending services")
    rows = [(s.model, s.last_commit or "-", s.watermark or "-", _seconds(s.behind_bronze_seconds),
             _seconds(s.behind_source_seconds), str(s.file_groups), _size(s.base_files_bytes + s.log_files_bytes),
             f"{s.log_files} ({_size(s.log_files_bytes)})", ", ".join(s.pending_services) or "none")
            for s in statuses]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    lines += [f"{s.model}: {problem}" for s in statuses for problem in s.problems]
    return "\n".join(lines)


def to_json(statuses: list[TableStatus]) -> str:
    data: dict[str, Any] = {"tables": [s.as_dict() for s in statuses]}
    return json.dumps(data, indent=2, default=str) + "\n"
