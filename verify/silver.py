"""The silver side, through Spark: the relation readers see, the newest event silver
applied to each table, and which source table each bronze change log came from."""

from __future__ import annotations

from dataclasses import dataclass

from verify.canonical import SparkDialect
from verify.errors import SilverError
from verify.positions import Lsn, Reached, parse_cdc_order
from verify.source import MARIADB, POSTGRESQL, SourceTable
from verify.tables import TableSpec, check_identifier

DIALECT = SparkDialect()
# Debezium's `source.connector` -> the engine verify reads it with
CONNECTORS = {"postgresql": POSTGRESQL, "mariadb": MARIADB}
SNAPSHOT_OP = "r"


def _quoted(schema: str, table: str) -> str:
    return f"{DIALECT.quote(schema)}.{DIALECT.quote(table)}"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class SilverTable:
    """A silver model in the lakehouse: `relation` (what readers query) and where its
    latest events are kept, deleted keys included (`positions`: the state table when the
    model has one)."""

    spec: TableSpec
    relation: str
    positions: str
    bronze: str


class Silver:
    def __init__(self, spark, silver_schema: str = "silver", bronze_schema: str = "bronze"):
        self.spark = spark
        self.silver_schema = check_identifier("silver schema", silver_schema)
        self.bronze_schema = check_identifier("bronze schema", bronze_schema)

    def run(self, sql: str) -> list[tuple]:
        try:
            return [tuple(row) for row in self.spark.sql(sql).collect()]
        except Exception as exc:  # noqa: BLE001 - Spark's errors come as Py4J / analysis exceptions
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SilverError(f"Spark: {message}") from None

    def table(self, spec: TableSpec) -> SilverTable:
        catalog = self.spark.catalog
        if not catalog.tableExists(f"{self.silver_schema}.{spec.model}"):
            raise SilverError(f"{self.silver_schema}.{spec.model} does not exist: build it first (dbt build)")
        if not catalog.tableExists(f"{self.bronze_schema}.{spec.bronze}"):
            raise SilverError(f"{self.bronze_schema}.{spec.bronze} does not exist: its change log is needed to "
                              "tell which source table silver mirrors")
        state = f"{spec.model}__cdc_state"
        positions = state if catalog.tableExists(f"{self.silver_schema}.{state}") else spec.model
        return SilverTable(spec, _quoted(self.silver_schema, spec.model), _quoted(self.silver_schema, positions),
                           _quoted(self.bronze_schema, spec.bronze))

    def _union(self, parts: dict[str, str]) -> dict[str, tuple]:
        """One Spark job for a query per table (each giving one row: name, values...)."""
        if not parts:
            return {}
        rows = self.run(" union all ".join(f"({sql})" for sql in parts.values()))
        return {row[0]: row[1:] for row in rows}

    def source_tables(self, tables: list[SilverTable]) -> dict[str, SourceTable | SilverError]:
        """Per model, the source table its change log's events name (Debezium's `source`
        block), or why it cannot be told."""
        found = self._union({t.spec.model: (
            f"select {_literal(t.spec.model)}, get_json_object(_source, '$.connector'), "
            "get_json_object(_source, '$.db'), get_json_object(_source, '$.schema'), "
            f"get_json_object(_source, '$.table') from {t.bronze} "
            "where get_json_object(_source, '$.table') is not null limit 1") for t in tables})
        result: dict[str, SourceTable | SilverError] = {}
        for table in tables:
            if table.spec.model not in found:
                result[table.spec.model] = SilverError(
                    f"{table.bronze} holds no event with a Debezium source block: cannot tell its source table")
                continue
            connector, database, schema, name = found[table.spec.model]
            engine = CONNECTORS.get(str(connector))
            if engine is None:
                result[table.spec.model] = SilverError(
                    f"{table.bronze}: events of a {connector!r} connector; verify reads "
                    f"{', '.join(sorted(CONNECTORS))} sources")
                continue
            try:
                result[table.spec.model] = SourceTable(engine, str(database),
                                                       str(schema) if engine == POSTGRESQL else None, str(name))
            except Exception as exc:  # noqa: BLE001 - an IdentifierError, reported for this table
                result[table.spec.model] = SilverError(f"{table.bronze}: {exc}")
        return result

    def reached(self, tables: list[SilverTable]) -> dict[str, Reached | None]:
        """Per model, the newest event silver applied (deleted keys included), None if none."""
        found = self._union({t.spec.model: (
            f"select {_literal(t.spec.model)}, max(_cdc_order), max_by(_cdc_op, _cdc_order) from {t.positions}")
            for t in tables})
        result: dict[str, Reached | None] = {}
        for table in tables:
            order, op = found.get(table.spec.model, (None, None))
            position = parse_cdc_order(order)
            result[table.spec.model] = None if position is None else Reached(position, op == SNAPSHOT_OP)
        return result

    def transaction_at(self, table: SilverTable, position: Lsn) -> int | None:
        """The source transaction id of the event at `position` (PostgreSQL), from bronze."""
        rows = self.run(f"select max(try_cast(_source_tx_id as bigint)) from {table.bronze} "
                        f"where _source_lsn = {int(position.value)}")
        return None if not rows or rows[0][0] is None else int(rows[0][0])
