"""The runner's machine-readable report of a pass (`--report PATH`): what an
orchestrator or a dashboard reads instead of parsing the log.

One JSON object per pass, written whole (a temporary file renamed over PATH), so a
reader never sees half of one. Its fields are listed in docs/reference/runner-report.md."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# The generic test whose failures are a silver model's rejected events (macros/tests).
REJECTED_TEST = "cdc_no_rejected_events"
REPORT_VERSION = 1


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class PassReport:
    """What one pass did; filled as it goes, written when it ends."""

    started_at: datetime = field(default_factory=utc_now)
    ended_at: datetime | None = None
    exit_code: int | None = None
    outcome: str | None = None  # what the exit code means (runner.cli.OUTCOMES)
    seconds: dict[str, float] = field(default_factory=dict)  # step -> duration
    ingestion: dict[str, Any] | None = None
    selection: dict[str, Any] | None = None  # what the build covers (runner.selection.Plan.as_report)
    missing_bronze: list[dict[str, Any]] | None = None  # bronze tables not there yet, what was left out
    dbt: dict[str, Any] | None = None
    freshness: list[dict[str, Any]] | None = None
    table_services: list[dict[str, Any]] | None = None  # per Hudi table (runner.table_services)
    compaction: dict[str, Any] | None = None  # the plans run within the budget (table_services.compact_pending)
    error: str | None = None

    def finish(self, exit_code: int, outcome: str) -> None:
        self.ended_at = utc_now()
        self.exit_code, self.outcome = exit_code, outcome

    def as_dict(self) -> dict[str, Any]:
        return {
            "report_version": REPORT_VERSION,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "exit_code": self.exit_code,
            "outcome": self.outcome,
            "seconds": {step: round(value, 3) for step, value in self.seconds.items()},
            "ingestion": self.ingestion,
            "selection": self.selection,
            "missing_bronze": self.missing_bronze,
            "dbt": self.dbt,
            "freshness": self.freshness,
            "table_services": self.table_services,
            "compaction": self.compaction,
            "error": self.error,
        }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z") if moment else None


def ingestion_section(summary_report: dict[str, Any], landed_at: datetime) -> dict[str, Any]:
    """The ingestion's counts (summary.RunSummary.as_report) with each table's source
    lag: how old its newest landed change was when the pass landed it."""
    tables = []
    for table in summary_report["tables"]:
        newest = table["newest_source_ts_ms"]
        lag = None if newest is None else round(landed_at.timestamp() - newest / 1000, 3)
        tables.append({**table, "source_lag_seconds": lag})
    return {**summary_report, "tables": tables}


def dbt_section(results: Any, success: bool, skipped_reason: str | None = None) -> dict[str, Any]:
    """Per node of a `dbt build`: its status, time and failures; per silver model, the
    events it rejected (its cdc_no_rejected_events test's failures)."""
    if skipped_reason is not None:
        return {"ran": False, "skipped_because": skipped_reason, "success": True, "nodes": [], "rejected_events": {}}
    nodes, rejected = [], {}
    for result in results or []:
        node = result.node
        status = str(result.status)
        entry = {"name": node.name, "resource_type": str(node.resource_type), "status": status,
                 "seconds": round(result.execution_time or 0.0, 3)}
        if result.failures is not None:
            entry["failures"] = result.failures
        if status not in ("success", "pass"):
            entry["message"] = result.message
        nodes.append(entry)
        metadata = getattr(node, "test_metadata", None)
        if metadata is not None and metadata.name == REJECTED_TEST and node.attached_node:
            rejected[node.attached_node.rsplit(".", 1)[-1]] = result.failures or 0
    return {"ran": True, "success": success, "nodes": nodes, "rejected_events": dict(sorted(rejected.items()))}


def freshness_section(results: Any) -> list[dict[str, Any]]:
    """Per bronze source: dbt's freshness status, its newest `_ingested_at` and its age."""
    sources = []
    for result in results or []:
        node = result.node
        if str(node.resource_type) != "source":
            continue  # the project's on-run-end hook runs with `dbt source freshness` too
        entry = {"source": f"{node.source_name}.{node.name}", "status": str(result.status)}
        max_loaded_at = getattr(result, "max_loaded_at", None)
        if max_loaded_at is not None:
            entry["max_loaded_at"] = _iso(max_loaded_at.replace(tzinfo=max_loaded_at.tzinfo or timezone.utc))
            entry["age_seconds"] = round(result.age, 3)
        else:
            entry["message"] = getattr(result, "message", None)
        sources.append(entry)
    return sorted(sources, key=lambda s: s["source"])


def write(report: PassReport, path: Path) -> None:
    """The report as JSON at `path`, replacing the last pass's at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    os.replace(partial, path)
