"""The source side: one snapshot transaction per source database, its log position, its
column types, and what its log holds after silver's position.

Connections come from the environment only, the variables the local stack uses
(stack/README.md, "Credentials"):

| engine | variables | defaults |
| --- | --- | --- |
| PostgreSQL | `CDC_PG_HOST`, `CDC_PG_PORT`, `CDC_PG_USER`, `CDC_PG_PASSWORD` | 127.0.0.1, 25432 |
| MariaDB | `CDC_MARIADB_HOST`, `CDC_MARIADB_PORT`, `CDC_MARIADB_USER`, `CDC_MARIADB_PASSWORD` | 127.0.0.1, 23306 |

A user or password left unset is read from the file the stack writes,
`$CDC_STACK_DIR/credentials.env` (default `build/stack/credentials.env`). The database
comes from the change events (Debezium's `source.db`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from verify.canonical import Dialect, MariaDBDialect, PostgresDialect, SourceType
from verify.errors import SourceError
from verify.positions import (
    BinlogEvent, BinlogPosition, Gap, Lsn, Position, Reached, Relation, WalRecord, binlog_changes, wal_changes,
)
from verify.tables import check_identifier

POSTGRESQL = "postgresql"
MARIADB = "mariadb"
ENGINES = (POSTGRESQL, MARIADB)
DEFAULTS = {POSTGRESQL: ("CDC_PG", "25432"), MARIADB: ("CDC_MARIADB", "23306")}
# WAL read before silver's position, for transactions that began before it and committed after
WAL_LOOKBACK_BYTES = 16 * 1024 * 1024
# Beyond this distance the log is not read: silver counts as behind
MAX_LOG_BYTES = 1024 * 1024 * 1024
MAX_BINLOG_EVENTS = 1_000_000
BINLOG_PAGE = 10_000
# The WAL records that commit a transaction or change a table's rows (pg_walinspect)
WAL_RECORDS = """
    select start_lsn::text, xid::text::bigint, resource_manager, record_type, description, coalesce(block_ref, '')
    from pg_get_wal_records_info(%s::pg_lsn, least(%s::pg_lsn, pg_current_wal_flush_lsn()))
    where (resource_manager = 'Transaction' and record_type in ('COMMIT', 'COMMIT_PREPARED'))
       or (resource_manager = 'Heap' and record_type = 'TRUNCATE')
       or (resource_manager in ('Heap', 'Heap2') and record_type ~ '^(INSERT|UPDATE|HOT_UPDATE|DELETE|MULTI_INSERT)')"""


@dataclass(frozen=True)
class SourceTable:
    """Where a silver table's rows come from, as Debezium names it."""

    engine: str
    database: str
    schema: str | None  # PostgreSQL schema; None for MariaDB, whose database is the namespace
    table: str

    def __post_init__(self) -> None:
        check_identifier("source database", self.database)
        check_identifier("source table", self.table)
        if self.schema is not None:
            check_identifier("source schema", self.schema)

    def qualified(self, dialect: Dialect) -> str:
        namespace = self.schema if self.engine == POSTGRESQL else self.database
        return f"{dialect.quote(namespace)}.{dialect.quote(self.table)}"

    def __str__(self) -> str:
        return f"{self.engine} {self.database}." + (f"{self.schema}." if self.schema else "") + self.table


def _stack_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    folder = Path(environ.get("CDC_STACK_DIR") or Path(__file__).resolve().parent.parent / "build" / "stack")
    path = folder / "credentials.env"
    values: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and not key.startswith("#"):
                values[key.strip()] = value.strip()
    return values


def connection_settings(engine: str, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Host, port, user and password of `engine` from the environment (the module's table)."""
    prefix, port = DEFAULTS[engine]
    stored = _stack_credentials(environ)
    user = environ.get(f"{prefix}_USER") or stored.get(f"{prefix}_USER")
    password = environ.get(f"{prefix}_PASSWORD") or stored.get(f"{prefix}_PASSWORD")
    if not user or password is None:
        raise SourceError(f"{engine}: set {prefix}_USER and {prefix}_PASSWORD (or run the stack, which writes them "
                          f"to $CDC_STACK_DIR/credentials.env)")
    raw_port = environ.get(f"{prefix}_PORT") or port
    if not raw_port.isdigit():
        raise SourceError(f"{prefix}_PORT={raw_port!r} is not a port number")
    return {"host": environ.get(f"{prefix}_HOST") or "127.0.0.1", "port": int(raw_port), "user": user,
            "password": password}


class SourceDatabase:
    """One source database, read in one snapshot transaction opened by `open`."""

    engine = "abstract"
    dialect: Dialect

    def __init__(self, database: str):
        self.database = check_identifier("source database", database)
        self.position: Position | None = None

    def run(self, sql: str, params: tuple | None = None) -> list[tuple]:
        raise NotImplementedError

    def open(self) -> Position:
        raise NotImplementedError

    def column_types(self, table: SourceTable) -> dict[str, SourceType]:
        raise NotImplementedError

    def gap(self, reached: Reached, reached_xid: int | None, tables: Mapping[str, SourceTable]) -> Gap:
        """What the source's log holds between silver's newest event (`reached`; its
        transaction id `reached_xid` when known) and this snapshot, for `tables` (by model)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> SourceDatabase:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class PostgresDatabase(SourceDatabase):
    engine = POSTGRESQL
    dialect = PostgresDialect()

    def __init__(self, database: str, environ: Mapping[str, str] = os.environ):
        super().__init__(database)
        import psycopg

        settings = connection_settings(POSTGRESQL, environ)
        try:
            self.conn = psycopg.connect(dbname=database, connect_timeout=30, application_name="cdc-verify", **settings)
        except psycopg.Error as exc:
            raise SourceError(f"postgresql {settings['host']}:{settings['port']}/{database}: {exc}") from None
        self.conn.read_only = True
        self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ

    def run(self, sql: str, params: tuple | None = None) -> list[tuple]:
        import psycopg

        try:
            if self.position is None:  # the statement that opens the snapshot transaction
                return self.conn.execute(sql, params).fetchall()
            # a savepoint: a statement that fails leaves the snapshot usable for the next tables
            with self.conn.transaction(), self.conn.cursor() as cursor:
                cursor.execute(sql, params)  # no params: the SQL is taken as is
                return cursor.fetchall()
        except psycopg.Error as exc:
            raise SourceError(f"postgresql {self.database}: {exc}".strip()) from None

    def open(self) -> Position:
        # The first statement takes the transaction's snapshot; the position read with it
        # covers every commit the snapshot sees.
        self.position = Lsn.parse(self.run("select pg_current_wal_lsn()::text")[0][0])
        return self.position

    def column_types(self, table: SourceTable) -> dict[str, SourceType]:
        rows = self.run("""
            select a.attname,
                   format_type(coalesce(nullif(t.typbasetype, 0), a.atttypid),
                               case when t.typbasetype <> 0 then t.typtypmod else a.atttypmod end),
                   coalesce(b.typtype, t.typtype) = 'r',
                   format_type(r.rngsubtype, null)
            from pg_attribute a
            join pg_type t on t.oid = a.atttypid
            left join pg_type b on b.oid = nullif(t.typbasetype, 0)
            left join pg_range r on r.rngtypid = coalesce(nullif(t.typbasetype, 0), a.atttypid)
            where a.attrelid = to_regclass(%s) and a.attnum > 0 and not a.attisdropped""",
            (table.qualified(self.dialect),))
        if not rows:
            raise SourceError(f"{table}: no such table (or no right to read it)")
        return {name: SourceType(type_name, bool(is_range), subtype) for name, type_name, is_range, subtype in rows}

    def _relations(self, tables: Mapping[str, SourceTable]) -> tuple[int, dict[str, Relation]]:
        database_oid = int(self.run("select oid from pg_database where datname = current_database()")[0][0])
        relations = {}
        for name, table in tables.items():
            qualified = table.qualified(self.dialect)
            # the table itself, and its partitions when it is partitioned (they hold its rows)
            rows = self.run("""
                select coalesce(pg_relation_filenode(oid), 0), oid from pg_class where oid = to_regclass(%s)
                union
                select coalesce(pg_relation_filenode(relid), 0), relid::oid from pg_partition_tree(to_regclass(%s))""",
                (qualified, qualified))
            relations[name] = Relation(frozenset(int(n) for n, _ in rows if n), frozenset(int(o) for _, o in rows))
        return database_oid, relations

    def gap(self, reached_event: Reached, reached_xid: int | None, tables: Mapping[str, SourceTable]) -> Gap:
        reached = reached_event.position
        if not isinstance(reached, Lsn) or not isinstance(self.position, Lsn):
            return Gap(False, reason="silver's position is not a PostgreSQL LSN")
        if self.position.value - reached.value > MAX_LOG_BYTES:
            return Gap(False, reason=f"the WAL in between is over {MAX_LOG_BYTES:,} bytes, not read")
        allowed = self.run("""
            select p.oid is not null and has_function_privilege(p.oid, 'execute')
            from (select to_regprocedure('pg_get_wal_records_info(pg_lsn, pg_lsn)') as oid) as p""")[0][0]
        if not allowed:
            return Gap(False, reason=(
                "the WAL cannot be read (pg_walinspect is not installed in this database, or this role may not "
                "execute pg_get_wal_records_info: docs/how-to/verify-the-lake.md)"))
        database_oid, relations = self._relations(tables)
        storeless = [name for name, relation in relations.items() if not relation.file_nodes]
        if storeless:
            return Gap(False, reason=f"no storage found for {', '.join(storeless)} in the source")
        segment = int(self.run("select setting from pg_settings where name = 'wal_segment_size'")[0][0])
        # From before silver's position (transactions that began earlier), else from its WAL
        # segment's start, else from the position itself: a checkpoint recycles older WAL.
        starts = sorted({Lsn(max(reached.value - WAL_LOOKBACK_BYTES, 0)),
                         Lsn(reached.value - reached.value % segment), reached})
        failure: SourceError | None = None
        for start in starts:
            try:
                rows = self.run(WAL_RECORDS, (str(start), str(self.position)))
                break
            except SourceError as exc:
                failure = exc
        else:
            return Gap(False, reason=f"the WAL could not be read ({failure})")
        records = [WalRecord(Lsn.parse(lsn), int(xid), rm, kind, description or "", block_ref)
                   for lsn, xid, rm, kind, description, block_ref in rows]
        return Gap(True, wal_changes(records, reached, reached_xid, database_oid, relations))

    def close(self) -> None:
        try:
            self.conn.rollback()
        finally:
            self.conn.close()


class MariaDBDatabase(SourceDatabase):
    engine = MARIADB
    dialect = MariaDBDialect()

    def __init__(self, database: str, environ: Mapping[str, str] = os.environ):
        super().__init__(database)
        import pymysql

        settings = connection_settings(MARIADB, environ)
        try:
            self.conn = pymysql.connect(charset="utf8mb4", autocommit=False, connect_timeout=30, **settings)
        except pymysql.Error as exc:
            raise SourceError(f"mariadb {settings['host']}:{settings['port']}: {exc}") from None

    def run(self, sql: str, params: tuple | None = None) -> list[tuple]:
        import pymysql

        try:
            with self.conn.cursor() as cursor:
                cursor.execute(sql, params or None)
                return list(cursor.fetchall())
        except pymysql.Error as exc:
            raise SourceError(f"mariadb {self.database}: {exc}") from None

    def open(self) -> Position:
        self.run("set session time_zone = '+00:00'")
        self.run("set session transaction isolation level repeatable read")
        self.run("start transaction with consistent snapshot, read only")
        # MariaDB's binlog position of this very snapshot (InnoDB tables)
        status = dict(self.run("show status like 'binlog_snapshot_%'"))
        if not status.get("Binlog_snapshot_file"):
            raise SourceError("mariadb: the server writes no binlog (log_bin is off): no position to compare with")
        self.position = BinlogPosition(status["Binlog_snapshot_file"], int(status["Binlog_snapshot_position"]))
        return self.position

    def column_types(self, table: SourceTable) -> dict[str, SourceType]:
        rows = self.run("select column_name, column_type from information_schema.columns "
                        "where table_schema = %s and table_name = %s", (table.database, table.table))
        if not rows:
            raise SourceError(f"{table}: no such table (or no right to read it)")
        return {name: SourceType(str(kind)) for name, kind in rows}

    def gap(self, reached_event: Reached, reached_xid: int | None, tables: Mapping[str, SourceTable]) -> Gap:
        reached = reached_event.position
        if not isinstance(reached, BinlogPosition) or not isinstance(self.position, BinlogPosition):
            return Gap(False, reason="silver's position is not a binlog position")
        end = self.position
        try:
            files = [row[0] for row in self.run("show binary logs")]
        except SourceError as exc:
            return Gap(False, reason=f"the binlog cannot be listed ({exc})")
        if reached.file not in files or end.file not in files:
            return Gap(False, reason=f"binlog file {reached.file} is no longer on the server")
        events: list[BinlogEvent] = []
        for file in files[files.index(reached.file):files.index(end.file) + 1]:
            pos = reached.pos if file == reached.file else 4
            while True:
                try:
                    page = self.run(f"show binlog events in %s from {int(pos)} limit {BINLOG_PAGE}", (file,))
                except SourceError as exc:
                    return Gap(False, reason=f"the binlog could not be read from {file}:{pos} ({exc})")
                done = False
                for log_name, at, kind, _server, end_pos, info in page:
                    if file == end.file and int(at) >= end.pos:
                        done = True
                        break
                    events.append(BinlogEvent(log_name, int(at), kind, int(end_pos), info or ""))
                if len(events) > MAX_BINLOG_EVENTS:
                    return Gap(False, reason=f"over {MAX_BINLOG_EVENTS:,} binlog events in between, not read")
                if done or len(page) < BINLOG_PAGE:
                    break
                pos = int(page[-1][4])
        names = {f"{t.database}.{t.table}": name for name, t in tables.items()}
        return Gap(True, binlog_changes(events, names, in_transaction=not reached_event.snapshot))

    def close(self) -> None:
        try:
            self.conn.rollback()
        finally:
            self.conn.close()


def connect(engine: str, database: str, environ: Mapping[str, str] = os.environ) -> SourceDatabase:
    if engine == POSTGRESQL:
        return PostgresDatabase(database, environ)
    if engine == MARIADB:
        return MariaDBDatabase(database, environ)
    raise SourceError(f"source engine {engine!r} is not supported (only {', '.join(ENGINES)})")
