"""What verify found: per table, a human summary and a machine-readable document, and
the exit code that sums it up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.exit_codes import EXIT_BEHIND, EXIT_DIFFERENT, EXIT_LOCKED, EXIT_USAGE  # noqa: F401
# verify's names for two shared codes: 0 in sync, 1 a table could not be compared
from core.exit_codes import EXIT_FAILURE as EXIT_ERROR
from core.exit_codes import EXIT_OK as EXIT_IN_SYNC
from verify.compare import CHANGED, DUPLICATE, EXTRA, MISSING, Comparison, KeyDifference
from verify.positions import AT, Verdict

IN_SYNC, DIFFERENT, ERROR = "in sync", "different", "error"
KINDS = {MISSING: "missing_in_silver", EXTRA: "extra_in_silver", CHANGED: "changed", DUPLICATE: "duplicate_keys"}
SHOWN_KEYS = 20  # keys named per kind in the human summary (the JSON has them all)
SHOWN_VALUE_CHARACTERS = 80


@dataclass
class TableReport:
    model: str
    source: str = ""
    key: tuple[str, ...] = ()
    integer_key: tuple[bool, ...] = ()
    comparison: Comparison | None = None
    verdict: Verdict | None = None
    not_compared: dict[str, str] = field(default_factory=dict)  # column -> why
    error: str | None = None
    seconds: float = 0.0

    @property
    def status(self) -> str:
        if self.error is not None or self.comparison is None:
            return ERROR
        return IN_SYNC if self.comparison.in_sync else DIFFERENT

    def key_dict(self, key: tuple[str | None, ...]) -> dict[str, Any]:
        return {name: int(value) if value is not None and flag else value
                for name, value, flag in zip(self.key, key, self.integer_key or (False,) * len(self.key))}


@dataclass
class SourceReport:
    engine: str
    database: str
    snapshot: str = ""
    reached: str | None = None
    log: str = ""  # what reading the source's log between the two gave
    error: str | None = None


@dataclass
class Report:
    tables: list[TableReport] = field(default_factory=list)
    sources: list[SourceReport] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    show_values: bool = False
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        statuses = [t.status for t in self.tables]
        if ERROR in statuses or any(s.error for s in self.sources):
            return EXIT_ERROR
        different = [t for t in self.tables if t.status == DIFFERENT]
        if any(t.verdict is not None and t.verdict.state == AT for t in different):
            return EXIT_DIFFERENT
        return EXIT_BEHIND if different else EXIT_IN_SYNC

    @property
    def result(self) -> str:
        return {EXIT_IN_SYNC: "in sync", EXIT_ERROR: "error", EXIT_DIFFERENT: "differences found",
                EXIT_BEHIND: "differences found while silver is behind the source (they may be lag)"}[self.exit_code]


def _key_text(table: TableReport, key: tuple[str | None, ...]) -> str:
    return ", ".join(f"{name}={value!r}" if isinstance(value, str) else f"{name}={value}"
                     for name, value in table.key_dict(key).items())


def _short(value: str | None) -> str:
    if value is None:
        return "NULL"
    return value if len(value) <= SHOWN_VALUE_CHARACTERS else value[:SHOWN_VALUE_CHARACTERS] + "..."


def _difference_lines(table: TableReport, kind: str, differences: list[KeyDifference], show_values: bool) -> list[str]:
    lines = []
    for difference in differences[:SHOWN_KEYS]:
        line = f"      {_key_text(table, difference.key)}"
        if kind == CHANGED:
            line += f": {', '.join(difference.columns)}"
            if show_values and difference.source is not None and difference.silver is not None:
                line += "".join(f"\n          {c}: source {_short(difference.source[c])} "
                                f"| silver {_short(difference.silver[c])}" for c in difference.columns)
        lines.append(line)
    if len(differences) > SHOWN_KEYS:
        lines.append(f"      ... and {len(differences) - SHOWN_KEYS} more (all in --json)")
    return lines


def render(report: Report) -> str:
    """The human summary."""
    lines = []
    for source in report.sources:
        where = f"{source.engine} {source.database}"
        if source.error:
            lines.append(f"{where}: {source.error}")
            continue
        lines.append(f"{where}: snapshot at {source.snapshot}, silver reached {source.reached or 'nothing'}; "
                     f"{source.log}")
    width = max([len(t.model) for t in report.tables] + [5])
    for table in report.tables:
        head = f"{table.model:<{width}}  {table.status.upper() if table.status != IN_SYNC else 'in sync':<9}"
        comparison = table.comparison
        if comparison is None:
            lines.append(f"{head}  {table.error}")
            continue
        lines.append(f"{head}  rows: source {comparison.source_rows:,}, silver {comparison.silver_rows:,}; "
                     f"{comparison.ranges_compared} range(s) compared ({table.source}, {table.seconds:.1f}s)")
        if table.status == DIFFERENT and table.verdict is not None:
            meaning = "differences are real" if table.verdict.state == AT else "differences may be lag"
            lines.append(f"    silver {'is at' if table.verdict.state == AT else 'is BEHIND'} the snapshot: "
                         f"{table.verdict.detail}; {meaning}")
        for kind in (MISSING, EXTRA, CHANGED, DUPLICATE):
            found = [d for d in comparison.differences if d.kind == kind]
            if found:
                label = {CHANGED: "changed (columns)", DUPLICATE: "key held more than once"}.get(kind, kind)
                lines.append(f"    {label}: {len(found)}")
                lines += _difference_lines(table, kind, found, report.show_values)
        if comparison.unexplored:
            rows = sum(a + b for _, a, b in comparison.unexplored)
            lines.append(f"    {len(comparison.unexplored)} more differing key range(s) ({rows:,} rows on both sides) "
                         "not fetched: raise --max-rows to name their keys")
        if table.not_compared:
            lines.append("    not compared: " + ", ".join(f"{c} ({why})" for c, why in table.not_compared.items()))
    for model, why in report.skipped.items():
        lines.append(f"{model:<{width}}  skipped    {why}")
    lines.append(f"result: {report.result} (exit {report.exit_code}, {report.seconds:.1f}s)")
    return "\n".join(lines)


def _difference_json(table: TableReport, difference: KeyDifference, show_values: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"key": table.key_dict(difference.key)}
    if difference.kind == CHANGED:
        item["columns"] = list(difference.columns)
        if show_values:
            item["source"], item["silver"] = difference.source, difference.silver
    elif show_values and difference.kind in (MISSING, EXTRA):
        item["row"] = difference.source if difference.kind == MISSING else difference.silver
    return item


def to_json(report: Report) -> dict[str, Any]:
    """The machine-readable document (`--json PATH`)."""
    tables = []
    for table in report.tables:
        entry: dict[str, Any] = {"model": table.model, "source": table.source, "status": table.status,
                                 "key": list(table.key), "seconds": round(table.seconds, 3)}
        if table.error is not None:
            entry["error"] = table.error
        if table.comparison is not None:
            comparison = table.comparison
            entry["rows"] = {"source": comparison.source_rows, "silver": comparison.silver_rows}
            entry["ranges_compared"] = comparison.ranges_compared
            entry["levels"] = comparison.levels
            entry["differences"] = {
                name: [_difference_json(table, d, report.show_values) for d in comparison.differences if d.kind == kind]
                for kind, name in KINDS.items()}
            entry["unexplored_ranges"] = [{"positions": str(r), "source_rows": a, "silver_rows": b}
                                          for r, a, b in comparison.unexplored]
        if table.verdict is not None:
            verdict = table.verdict
            entry["position"] = {"silver": verdict.state, "snapshot": verdict.snapshot, "reached": verdict.reached,
                                 "changes_after_reached": verdict.changes_after, "detail": verdict.detail}
        entry["not_compared"] = table.not_compared
        tables.append(entry)
    return {
        "result": report.result,
        "exit_code": report.exit_code,
        "seconds": round(report.seconds, 3),
        "sources": [{"engine": s.engine, "database": s.database, "snapshot": s.snapshot, "reached": s.reached,
                     "log": s.log, **({"error": s.error} if s.error else {})} for s in report.sources],
        "tables": tables,
        "skipped": report.skipped,
    }
