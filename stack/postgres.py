"""PostgreSQL 15 (Debian's server binaries) in ``$CDC_STACK_DIR/postgres``, with Pagila
and the outbox example (schema ``northwind``).

As root the server runs as the ``postgres`` OS user (PostgreSQL refuses root): initdb,
pg_ctl and the server go through ``runuser -u postgres --``; the data, socket and log
are chowned to it and every ancestor of the stack dir gets the search bit it needs.
The superuser ``postgres`` connects over the unix socket only; the Debezium role
(REPLICATION, LOGIN, SELECT) over 127.0.0.1 with a SCRAM password.
"""

from __future__ import annotations

import csv
import io
import os
import pwd
import shutil
from pathlib import Path

from .credentials import Credentials, check_identifier
from .errors import StackError
from .proc import (
    chown_tree,
    ensure_traversable,
    is_root,
    pid_alive,
    port_open,
    read_pid,
    run,
    wait_until,
    write_pid,
)
from .settings import HOST, Settings
from .templates import render

SERVICE = "postgres"
SUPERUSER = "postgres"
OS_USER = "postgres"
DATABASE = "pagila"
PUBLICATION = "cdc_pagila"
# The 14 captured tables. payment is partitioned by month: with
# publish_via_partition_root the partitions' changes are published as public.payment.
TABLES = (
    "actor", "address", "category", "city", "country", "customer", "film",
    "film_actor", "film_category", "inventory", "language", "rental", "staff", "payment",
)
# Two Pagila partitions come without the primary key their siblings have; once payment
# is published, UPDATE/DELETE of their rows would fail ("does not have a replica
# identity"). They get the same key as the other partitions (REPLICA IDENTITY stays DEFAULT).
PK_LESS_PARTITIONS = ("payment_p0000_default", "payment_p2007_07_max")
# Errors pagila-schema.sql (dumped by PostgreSQL 17) prints on 15, all harmless: the
# 17-only setting transaction_timeout, and the view films_per_customer_rental whose
# JSON_TABLE is 17-only (its CREATE fails with a syntax error, then its ALTER ... OWNER).
EXPECTED_SCHEMA_ERRORS = (
    '"transaction_timeout"',
    'syntax error at or near "AS"',
    '"public.films_per_customer_rental" does not exist',
)
LOADED_MARKER = "cdc-stack: pagila loaded"
# The outbox example: schema `northwind` in the Pagila database (so the caught-up marker,
# committed there, moves this slot too) and its own publication for the outbox table only.
NORTHWIND_SQL = Path(__file__).parent / "sql" / "northwind.sql"
OUTBOX_PUBLICATION = "cdc_northwind"
# The event log (one row per event) and the current document per order.
OUTBOX_TABLES = ("northwind.cdc_events", "northwind.order_outbox")
_NULL = "\x1fNULL\x1f"


class Postgres:
    """One PostgreSQL server of the stack."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.base = settings.stack_dir / "postgres"
        self.data_dir = self.base / "data"
        self.socket_dir = self.base / "run"
        self.log_file = settings.log_file(SERVICE)
        self.pid_file = settings.pid_file(SERVICE)
        self.port = settings.pg_port

    @property
    def bindir(self) -> Path:
        """Debian's server binaries (resolved when first needed)."""
        return self.settings.pg_bindir

    # --- processes ----------------------------------------------------------------
    def _cmd(self, *args: str) -> list[str]:
        if is_root():
            return ["runuser", "-u", OS_USER, "--", *args]
        return list(args)

    def pid(self) -> int | None:
        pid = read_pid(self.data_dir / "postmaster.pid")
        return pid if pid_alive(pid, str(self.data_dir)) else None

    def running(self) -> bool:
        return self.pid() is not None and port_open(self.port)

    def initialized(self) -> bool:
        return (self.data_dir / "PG_VERSION").exists()

    def init(self) -> None:
        """initdb once; (re)write the included config and pg_hba.conf every time."""
        for folder in (self.base, self.socket_dir, self.settings.logs_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self.log_file.touch(exist_ok=True)
        os.chmod(self.socket_dir, 0o700)
        if is_root():
            try:
                pwd.getpwnam(OS_USER)
            except KeyError:
                raise StackError(SERVICE, "running as root needs the `postgres` OS user "
                                 "(Debian's postgresql package creates it)") from None
            ensure_traversable(self.base, OS_USER)
            chown_tree(self.base, OS_USER)
            shutil.chown(self.log_file, OS_USER, OS_USER)
            # the logs folder must be traversable for the server to append its log
            os.chmod(self.settings.logs_dir, 0o755)
        if not self.initialized():
            if self.data_dir.exists():
                shutil.rmtree(self.data_dir)  # a half-done initdb
            run(
                self._cmd(
                    str(self.bindir / "initdb"), "-D", str(self.data_dir),
                    "--username", SUPERUSER, "--auth-local=trust", "--auth-host=scram-sha-256",
                    "--encoding=UTF8", "--no-locale", "--no-instructions",
                ),
                SERVICE, "initdb", self.log_file,
            )
            conf = self.data_dir / "postgresql.conf"
            with conf.open("a") as handle:
                handle.write("\n# the stack's settings (python -m stack)\ninclude_if_exists = 'cdc_stack.conf'\n")
        render("postgresql.conf", self.data_dir / "cdc_stack.conf",
               {"port": self.port, "socket_dir": self.socket_dir})
        render("pg_hba.conf", self.data_dir / "pg_hba.conf", {})
        if is_root():
            chown_tree(self.data_dir, OS_USER)

    def start(self) -> None:
        """Start the server unless it already runs; wait until it accepts connections."""
        if self.running():
            write_pid(self.pid_file, self.pid() or 0)
            return
        if port_open(self.port):
            raise StackError(SERVICE, f"port {self.port} is in use by another process (set CDC_PG_PORT)", self.log_file)
        self.init()
        # a stale postmaster.pid from a killed server is removed by pg_ctl itself
        run(
            self._cmd(
                str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file),
                "-w", "-t", "90", "start",
            ),
            SERVICE, "pg_ctl start", self.log_file, timeout=120,
        )
        wait_until(self._ready, 60, "pg_isready", SERVICE, self.log_file)
        write_pid(self.pid_file, self.pid() or 0)

    def _ready(self) -> bool:
        result = run(
            [str(self.bindir / "pg_isready"), "-q", "-U", SUPERUSER, "-h", str(self.socket_dir), "-p", str(self.port)],
            SERVICE, "pg_isready", self.log_file, check=False,
        )
        return result.returncode == 0

    def stop(self) -> None:
        """pg_ctl stop -m fast (safe when nothing runs)."""
        if self.pid() is None:
            self.pid_file.unlink(missing_ok=True)
            return
        run(
            self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop"),
            SERVICE, "pg_ctl stop", self.log_file, timeout=90,
        )
        self.pid_file.unlink(missing_ok=True)

    # --- SQL --------------------------------------------------------------------------
    def _psql_base(self, db: str) -> list[str]:
        return [
            str(self.bindir / "psql"), "-X", "-q", "-h", str(self.socket_dir), "-p", str(self.port),
            "-U", SUPERUSER, "-d", db,
        ]

    def psql(self, sql: str, db: str = DATABASE) -> list[tuple[str | None, ...]]:
        """Run ``sql`` (one or more statements) as the superuser; return the rows, as text.

        NULL comes back as None. Every statement is its own transaction unless ``sql``
        says BEGIN/COMMIT. Errors raise StackError with psql's message.
        """
        result = run(
            [*self._psql_base(db), "-v", "ON_ERROR_STOP=1", "--csv", "-t", "-P", f"null={_NULL}"],
            SERVICE, "psql", self.log_file, input_text=sql,
        )
        rows: list[tuple[str | None, ...]] = []
        for record in csv.reader(io.StringIO(result.stdout)):
            if record:
                rows.append(tuple(None if v == _NULL else v for v in record))
        return rows

    def scalar(self, sql: str, db: str = DATABASE) -> str | None:
        rows = self.psql(sql, db)
        return rows[0][0] if rows and rows[0] else None

    # --- Pagila and the Debezium prerequisites --------------------------------------
    def pagila_loaded(self) -> bool:
        value = self.scalar(
            "select shobj_description(oid, 'pg_database') from pg_database where datname = 'pagila'",
            db="postgres",
        )
        return value == LOADED_MARKER

    def load_pagila(self) -> bool:
        """Load Pagila from $PAGILA_DIR into database ``pagila`` once. True if it loaded now."""
        if self.pagila_loaded():
            return False
        pagila = self.settings.pagila_dir
        schema, data = pagila / "pagila-schema.sql", pagila / "pagila-data.sql"
        for path in (schema, data):
            if not path.is_file():
                raise StackError(SERVICE, f"Pagila file {path} is missing (set PAGILA_DIR)")
        # a half-loaded database from an interrupted run is dropped and loaded anew
        self.psql("drop database if exists pagila with (force)", db="postgres")
        self.psql("create database pagila", db="postgres")
        result = run(
            [*self._psql_base(DATABASE), "-v", "ON_ERROR_STOP=0", "-f", str(schema)],
            SERVICE, "psql -f pagila-schema.sql", self.log_file, check=False,
        )
        errors = [line for line in result.stderr.splitlines() if "ERROR:" in line]
        unexpected = [e for e in errors if not any(k in e for k in EXPECTED_SCHEMA_ERRORS)]
        if result.returncode != 0 or unexpected or len(errors) > len(EXPECTED_SCHEMA_ERRORS):
            raise StackError(
                SERVICE,
                "pagila-schema.sql failed beyond the known PostgreSQL-17-only errors:\n"
                + "\n".join(errors or [result.stderr[-2000:]]),
                self.log_file,
            )
        run(
            [*self._psql_base(DATABASE), "-v", "ON_ERROR_STOP=1", "-f", str(data)],
            SERVICE, "psql -f pagila-data.sql", self.log_file,
        )
        self.psql(f"comment on database pagila is '{LOADED_MARKER}'", db="postgres")
        return True

    def load_northwind(self) -> bool:
        """Create schema ``northwind`` (orders, items, the outbox tables ``cdc_events`` and
        ``order_outbox`` and their triggers) once, in one transaction. True if it was
        created now."""
        if self.scalar("select to_regnamespace('northwind') is not null") == "t":
            return False
        run(
            [*self._psql_base(DATABASE), "-v", "ON_ERROR_STOP=1", "-1", "-f", str(NORTHWIND_SQL)],
            SERVICE, "psql -f northwind.sql", self.log_file,
        )
        return True

    def prepare_cdc(self, credentials: Credentials) -> None:
        """Debezium role, grants, partition keys and the publication (idempotent)."""
        user, password = credentials.pg_user, credentials.pg_password
        check_identifier(SERVICE, "CDC_PG_USER", user)
        self.ensure_role(user, password, "login replication")
        tables = ", ".join(f"public.{t}" for t in TABLES)
        keys = "\n".join(
            f"""
            if to_regclass('public.{p}') is not null and not exists (
                select from pg_constraint where conrelid = 'public.{p}'::regclass and contype = 'p') then
              alter table public.{p} add constraint idx_pk_{p}_payment_id primary key (payment_id);
            end if;"""
            for p in PK_LESS_PARTITIONS
        )
        # Each outbox table joins the publication unless it is a member: a publication made
        # before a table joined the list gains it.
        outbox_members = "\n".join(
            f"""
              if to_regclass('{t}') is not null and not exists (
                  select from pg_publication_tables where pubname = '{OUTBOX_PUBLICATION}'
                  and schemaname || '.' || tablename = '{t}') then
                alter publication {OUTBOX_PUBLICATION} add table {t};
              end if;"""
            for t in OUTBOX_TABLES
        )
        self.psql(
            f"""
            do $$
            begin
              {keys}
              if not exists (select from pg_publication where pubname = '{PUBLICATION}') then
                create publication {PUBLICATION} for table {tables}
                  with (publish_via_partition_root = true);
              end if;
              if not exists (select from pg_publication where pubname = '{OUTBOX_PUBLICATION}') then
                create publication {OUTBOX_PUBLICATION};
              end if;
              {outbox_members}
            end $$;
            grant connect on database pagila to "{user}";
            grant usage on schema public to "{user}";
            grant select on all tables in schema public to "{user}";
            alter default privileges in schema public grant select on tables to "{user}";
            grant usage on schema northwind to "{user}";
            grant select on all tables in schema northwind to "{user}";
            """
        )

    def ensure_role(self, user: str, password: str, attributes: str = "login") -> None:
        """Create the role `user` with `attributes` and `password`, or set them on it
        (idempotent; `user` a checked identifier, `password` checked plain)."""
        self.psql(
            f"""
            do $$
            begin
              if not exists (select from pg_roles where rolname = '{user}') then
                create role "{user}" {attributes} password '{password}';
              else
                alter role "{user}" {attributes} password '{password}';
              end if;
            end $$;
            """,
            db="postgres",
        )

    def dsn(self, credentials: Credentials) -> str:
        """libpq URI of the Debezium role over TCP."""
        return (f"postgresql://{credentials.pg_user}:{credentials.pg_password}"
                f"@{HOST}:{self.port}/{DATABASE}")

    def superuser_dsn(self, db: str = DATABASE) -> str:
        """libpq URI of the superuser over the unix socket (no password)."""
        return f"postgresql://{SUPERUSER}@/{db}?host={self.socket_dir}&port={self.port}"

    # --- replication state ------------------------------------------------------------
    def current_wal_lsn(self) -> str:
        value = self.scalar("select pg_current_wal_lsn()")
        assert value is not None
        return value

    def emit_marker(self) -> str:
        """Commit a transactional logical-decoding message with prefix ``cdc-stack``; its LSN."""
        value = self.scalar("select pg_logical_emit_message(true, 'cdc-stack', 'caught-up')")
        assert value is not None
        return value

    def slots_reached(self, slots: list[str], target_lsn: str) -> dict[str, bool]:
        """For each slot name: has its confirmed_flush_lsn reached ``target_lsn``?"""
        if not slots:
            return {}
        names = ", ".join(f"'{s}'" for s in slots)
        rows = self.psql(
            f"select slot_name, coalesce(confirmed_flush_lsn >= '{target_lsn}'::pg_lsn, false) "
            f"from pg_replication_slots where slot_name in ({names})"
        )
        state = {s: False for s in slots}
        for name, reached in rows:
            state[str(name)] = reached == "t"
        return state

    def drop_slot(self, slot: str, timeout: float = 60) -> None:
        """Drop a replication slot once no walsender holds it (no-op if absent)."""
        def inactive() -> bool:
            rows = self.psql(f"select active from pg_replication_slots where slot_name = '{slot}'")
            return not rows or rows[0][0] == "f"
        wait_until(inactive, timeout, f"slot {slot} to be released", SERVICE, self.log_file)
        self.psql(
            f"select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = '{slot}'"
        )
