"""What a run did, per bronze table: counts, the summary a run logs and its JSON report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ingestion import extract, transform

# Quarantined lines logged per topic (the rest are counted).
SAMPLES_PER_TOPIC = 3


@dataclass
class TableSummary:
    """Counts for one bronze table. events_read counts every line (= landed + held +
    quarantined + tombstones + skipped + duplicates); landed counts the records this run
    added to bronze, held the accepted records bronze held already (a replay's), which it
    left out; skipped counts Debezium's records that are no row change (transaction
    metadata, schema changes, heartbeats: transform.STATUS_SKIPPED); duplicates: copies of
    an offset another file of the run holds with the same record
    (transform.resolve_shared_offsets)."""

    table: str  # bronze table, or `(unmappable: <topic>)`
    topic: str
    files: int = 0
    events_read: int = 0
    landed: int = 0
    quarantined: int = 0
    tombstones: int = 0
    key_checked: bool = False
    held: int = 0
    skipped: int = 0
    duplicates: int = 0
    ops: dict[str, int] = field(default_factory=dict)  # accepted records (landed + held) by Debezium op
    newest_source_ts_ms: int | None = None  # the newest source time among them

    def count_accepted(self, row: Mapping[str, Any]) -> None:
        """Adds a stats row's accepted records by op and its newest source time."""
        for op in transform.REPORTED_OPS:
            if row[f"op_{op}_count"]:
                self.ops[op] = self.ops.get(op, 0) + row[f"op_{op}_count"]
        self.newest_source_ts_ms = newest_of(self.newest_source_ts_ms, row[transform.NEWEST_SOURCE_TS])

    def as_report(self) -> dict[str, Any]:
        """The counts as a JSON-ready dict (the runner's machine-readable report)."""
        return {"table": self.table, "topic": self.topic, "files": self.files, "events_read": self.events_read,
                "landed": self.landed, "held_already": self.held, "quarantined": self.quarantined,
                "tombstones": self.tombstones, "skipped": self.skipped, "duplicates": self.duplicates,
                "accepted_by_op": dict(sorted(self.ops.items())), "newest_source_ts_ms": self.newest_source_ts_ms}


def newest_of(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


@dataclass
class RunSummary:
    tables: list[TableSummary] = field(default_factory=list)
    files_skipped: int = 0  # already in the ledger
    skipped: dict[str, int] = field(default_factory=dict)  # extract.SKIP_RULES key -> entries skipped by it
    batches: int | None = None  # Kafka runs: micro-batches processed (files are not used)
    reprocess: bool = False  # the ledger was ignored: the files were read again
    seconds: dict[str, float] = field(default_factory=dict)  # step of the run -> its duration (core.timing)

    @property
    def quarantined(self) -> int:
        return sum(t.quarantined for t in self.tables)

    @property
    def duplicates(self) -> int:
        return sum(t.duplicates for t in self.tables)

    def as_report(self) -> dict[str, Any]:
        """The run's counts as a JSON-ready dict (the runner's machine-readable report)."""
        return {"tables": [t.as_report() for t in self.tables], "files_skipped_as_ingested": self.files_skipped,
                "skipped_by_rule": dict(self.skipped), "kafka_micro_batches": self.batches,
                "reprocess": self.reprocess, "quarantined": self.quarantined,
                "seconds": {step: round(value, 3) for step, value in self.seconds.items()}}

    def table(self, name: str) -> TableSummary:
        return next(t for t in self.tables if t.table == name)

    def render(self) -> str:
        header = ("table", "files", "events read", "landed", "quarantined", "tombstones", "skipped", "key check",
                  "held already")
        kafka = self.batches is not None
        rows = [
            (t.table, "-" if kafka else str(t.files), str(t.events_read), str(t.landed), str(t.quarantined), str(t.tombstones),
             str(t.skipped), "yes" if t.key_checked else "no (not in sources yml)", str(t.held))
            for t in self.tables
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]
        held = sum(t.held for t in self.tables)
        if kafka:
            totals = f"{len(self.tables)} table(s), {self.batches} micro-batch(es) from Kafka, {self.quarantined} quarantined"
        elif self.reprocess:
            totals = (
                f"{len(self.tables)} table(s), {sum(t.files for t in self.tables)} file(s) read again (--reprocess), "
                f"{sum(t.landed for t in self.tables)} record(s) added, {held} held already, "
                f"{self.quarantined} quarantined"
            )
        else:
            totals = (
                f"{len(self.tables)} table(s), {sum(t.files for t in self.tables)} new file(s), "
                f"{self.files_skipped} file(s) skipped as already ingested, {self.quarantined} quarantined"
            )
        return "\n".join([*lines, totals, *self._skipped_line()])

    def _skipped_line(self) -> list[str]:
        """The entries skipped by a rule (extract.SKIP_RULES), counted, if any."""
        counts = [f"{self.skipped[rule]} {what}" for rule, what in extract.SKIP_RULES.items() if self.skipped.get(rule)]
        if self.duplicates:
            counts.append(f"{self.duplicates} duplicate record(s) (an offset another file of the run holds with the same record)")
        return [f"skipped by rule: {', '.join(counts)}"] if counts else []


def file_stats(splits: list) -> dict[str, dict[str, int]]:
    """Per file: its transform.STATUS_COUNTS, summed over its splits (split_stats rows)."""
    stats: dict[str, dict[str, int]] = {}
    for row in splits:
        entry = stats.setdefault(row["_source_file"], {**dict.fromkeys(transform.STATUS_COUNTS, 0),
                                                        transform.NEWEST_SOURCE_TS: None})
        for name in transform.STATUS_COUNTS:
            entry[name] += row[name]
        entry[transform.NEWEST_SOURCE_TS] = newest_of(entry[transform.NEWEST_SOURCE_TS], row[transform.NEWEST_SOURCE_TS])
    return stats


def summarize(files: list[extract.SourceFile], stats: dict, key_map: dict[str, list[str]]) -> list[TableSummary]:
    tables: dict[str, TableSummary] = {}
    for f in files:
        name = f.table or f"(unmappable: {f.topic})"
        entry = tables.setdefault(name, TableSummary(table=name, topic=f.topic, key_checked=f.topic in key_map))
        row = stats.get(f.uri)  # absent for empty files
        entry.files += 1
        if row is not None:
            entry.events_read += row["lines"]
            entry.landed += row["landed_count"]
            entry.quarantined += row["quarantined_count"]
            entry.tombstones += row["tombstone_count"]
            entry.skipped += row["skipped_count"]
            entry.count_accepted(row)
            entry.duplicates += (row["lines"] - row["landed_count"] - row["quarantined_count"] - row["tombstone_count"]
                                 - row["skipped_count"])
    return [tables[name] for name in sorted(tables)]


