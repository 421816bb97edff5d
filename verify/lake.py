"""Verify a lakehouse: for each source database, one snapshot; for each of its tables, a
comparison with silver and where silver stands against the snapshot's position."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from verify.canonical import Dialect, SourceType, can_compare, parse_type
from verify.compare import reconcile
from verify.errors import VerifyError
from verify.positions import Gap, Lsn, Position, Reached, decide
from verify.report import Report, SourceReport, TableReport
from verify.sides import SqlSide, TableSql
from verify.silver import DIALECT as SPARK, Silver, SilverTable
from verify.source import SourceDatabase, SourceTable, connect
from verify.tables import TableSpec, load_tables, select_tables

log = logging.getLogger("verify")


@dataclass(frozen=True)
class Options:
    project_dir: Path
    tables: list[str] = field(default_factory=list)
    silver_schema: str = "silver"
    bronze_schema: str = "bronze"
    fanout: int = 16
    leaf_rows: int = 256
    max_rows: int = 20_000
    show_values: bool = False


Connect = Callable[[str, str], SourceDatabase]


def _texts(spec: TableSpec, dialect: Dialect, source_types: Mapping[str, SourceType] | None,
           not_compared: dict[str, str]) -> dict[str, str]:
    """Canonical-text SQL per compared column; columns that cannot be compared go to `not_compared`."""
    texts = {}
    for column in spec.columns:
        declared = parse_type(column.data_type)
        source_type = source_types.get(column.name) if source_types is not None else None
        if column.data_type is None:
            not_compared[column.name] = "no data_type declared"
            continue
        if not can_compare(SPARK, declared, None):
            not_compared[column.name] = f"{column.data_type} has no canonical text in {SPARK.name}"
            continue
        if source_types is not None and source_type is None:
            # declared before the source has it (ALTER TABLE ADD COLUMN to come): NULL there
            texts[column.name] = dialect.null_text()
            continue
        if not can_compare(dialect, declared, source_type):
            not_compared[column.name] = f"{column.data_type} has no canonical text in {dialect.name}"
            continue
        texts[column.name] = dialect.value(dialect.quote(column.name), declared, source_type)
    return texts


def _compare(silver_table: SilverTable, silver: Silver, source_table: SourceTable,
             database: SourceDatabase, options: Options, report: TableReport) -> None:
    spec = silver_table.spec
    source_types = database.column_types(source_table)
    not_compared: dict[str, str] = {}
    source_texts = _texts(spec, database.dialect, source_types, not_compared)
    silver_texts = _texts(spec, SPARK, None, {})
    for column in [k for k in spec.key if k not in source_texts]:
        raise VerifyError(f"{spec.model}: key column {column} cannot be compared "
                          f"({not_compared.get(column, 'the source table lacks it')})")
    silver_texts = {name: sql for name, sql in silver_texts.items() if name in source_texts}
    report.not_compared = not_compared
    integer_key = len(spec.key) == 1 and parse_type(spec.column(spec.key[0]).data_type).kind == "integer"
    report.integer_key = tuple(parse_type(spec.column(k).data_type).kind == "integer" for k in spec.key)
    source_side = SqlSide(TableSql(database.dialect, source_table.qualified(database.dialect), spec.key,
                                   source_texts, integer_key), database.run)
    silver_side = SqlSide(TableSql(SPARK, silver_table.relation, spec.key, silver_texts, integer_key), silver.run)
    report.comparison = reconcile(source_side, silver_side, options.fanout, options.leaf_rows, options.max_rows)


def verify_lake(spark, options: Options, connect_source: Connect = connect) -> Report:
    """Compare every selected silver table with its source table (the package's docstring)."""
    started = time.monotonic()
    specs, skipped = select_tables(load_tables(options.project_dir), options.tables)
    report = Report(skipped=skipped, show_values=options.show_values)
    silver = Silver(spark, options.silver_schema, options.bronze_schema)
    present: list[tuple[SilverTable, TableReport]] = []
    for spec in specs:
        table_report = TableReport(model=spec.model, key=spec.key)
        report.tables.append(table_report)
        try:
            present.append((silver.table(spec), table_report))
        except VerifyError as exc:
            table_report.error = str(exc)
    sources = silver.source_tables([t for t, _ in present])
    reached_by_model = silver.reached([t for t, _ in present])
    groups: dict[tuple[str, str], list[tuple[SilverTable, SourceTable, TableReport]]] = {}
    for silver_table, table_report in present:
        source_table = sources[silver_table.spec.model]
        if isinstance(source_table, VerifyError):
            table_report.error = str(source_table)
            continue
        table_report.source = str(source_table)
        groups.setdefault((source_table.engine, source_table.database), []).append(
            (silver_table, source_table, table_report))
    for (engine, database_name), members in groups.items():
        source_report = SourceReport(engine, database_name)
        report.sources.append(source_report)
        try:
            with connect_source(engine, database_name) as database:
                snapshot = database.open()
                source_report.snapshot = str(snapshot)
                gap, reached = _gap(silver, database, snapshot, members, reached_by_model)
                source_report.reached = str(reached.position) if reached is not None else None
                source_report.log = (
                    "silver holds no event of these tables" if reached is None else
                    "the snapshot is at or before silver's position" if gap is None else
                    f"log after silver's position read: {sum(gap.changes.values())} change(s) to the compared tables"
                    if gap.inspected else f"log not read: {gap.reason}")
                for silver_table, source_table, table_report in members:
                    table_started = time.monotonic()
                    try:
                        _compare(silver_table, silver, source_table, database, options, table_report)
                        table_report.verdict = decide(silver_table.spec.model, snapshot,
                                                      reached.position if reached else None, gap)
                    except VerifyError as exc:
                        table_report.error = str(exc)
                    table_report.seconds = time.monotonic() - table_started
                    log.info("%s: %s (%.1fs)", silver_table.spec.model, table_report.status, table_report.seconds)
        except VerifyError as exc:
            source_report.error = str(exc)
            for *_, table_report in members:
                if table_report.comparison is None and table_report.error is None:
                    table_report.error = f"not compared: {exc}"
    report.seconds = time.monotonic() - started
    return report


def _gap(silver: Silver, database: SourceDatabase, snapshot: Position,
         members: list[tuple[SilverTable, SourceTable, TableReport]],
         reached_by_model: Mapping[str, Reached | None]) -> tuple[Gap | None, Reached | None]:
    """Silver's newest event over the source's compared tables, and, when the snapshot is
    past it, what the source's log holds in between (None when it is not past it)."""
    known = [(reached, silver_table) for silver_table, _, _ in members
             if (reached := reached_by_model.get(silver_table.spec.model)) is not None
             and type(reached.position) is type(snapshot)]
    if not known:
        return None, None
    reached, holder = max(known, key=lambda item: item[0].position)
    if snapshot <= reached.position:
        return None, reached
    # a snapshot read's transaction is the connector's own, not one silver's changes belong to
    xid = None if reached.snapshot or not isinstance(reached.position, Lsn) else silver.transaction_at(
        holder, reached.position)
    tables = {silver_table.spec.model: source_table for silver_table, source_table, _ in members}
    return database.gap(reached, xid, tables), reached


def lock_path() -> Path:
    """The lakehouse's run lock, as the runner takes it (runner/cli.py)."""
    return Path(os.environ.get("CDC_LAKEHOUSE_DIR", "lakehouse")).resolve() / "run.lock"
