"""MariaDB (Debian 10.11) in ``$CDC_STACK_DIR/mariadb``, with ``movies_db.movies``.

Its own datadir (mariadb-install-db), its own my.cnf (--defaults-file), 127.0.0.1 only,
binlog in ROW format with FULL row images. The admin account is ``root``@localhost by
unix_socket authentication for the OS user running the stack (no password anywhere);
the Debezium user connects over TCP with a password from the credentials.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from .credentials import Credentials, check_identifier
from .errors import StackError
from .proc import (
    current_user,
    pid_alive,
    port_open,
    read_pid,
    run,
    start_detached,
    stop_pid,
    wait_until,
    write_pid,
)
from .settings import HOST, Settings
from .templates import render

SERVICE = "mariadb"
DATABASE = "movies_db"
# A handful of rows written for this project.
MOVIES = (
    (1, "The Lighthouse Keeper's Ledger", 1998),
    (2, "Seven Bridges at Dawn", 2004),
    (3, "A Quiet Orbit", 2011),
    (4, "Paper Boats in July", 2016),
    (5, "The Cartographer's Daughter", 2019),
    (6, "Static on Channel Nine", 2022),
)


def _binary(name: str) -> str:
    path = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
    if path is None:
        raise StackError(
            SERVICE,
            f"{name} not found: MariaDB is not installed (`make setup` installs Debian's mariadb-server)",
        )
    return path


class MariaDB:
    """One MariaDB server of the stack."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.base = settings.stack_dir / "mariadb"
        self.data_dir = self.base / "data"
        self.run_dir = self.base / "run"
        self.socket = self.run_dir / "mariadb.sock"
        self.cnf = self.base / "my.cnf"
        self.log_file = settings.log_file(SERVICE)
        self.pid_file = settings.pid_file(SERVICE)
        self.port = settings.mariadb_port
        self.os_user = current_user()

    def pid(self) -> int | None:
        pid = read_pid(self.pid_file)
        return pid if pid_alive(pid, str(self.cnf)) else None

    def running(self) -> bool:
        return self.pid() is not None and port_open(self.port)

    def _render(self) -> None:
        for folder in (self.base, self.run_dir, self.settings.logs_dir):
            folder.mkdir(parents=True, exist_ok=True)
        render("mariadb.cnf", self.cnf, {
            "datadir": self.data_dir, "socket": self.socket, "port": self.port,
            "pid_file": self.pid_file, "log_file": self.log_file,
            "binlog": self.base / "binlog" / "mariadb-bin", "user": self.os_user,
        })
        (self.base / "binlog").mkdir(exist_ok=True)

    def init(self) -> None:
        """mariadb-install-db once (root@localhost via unix_socket for the OS user)."""
        self._render()
        if (self.data_dir / "mysql").is_dir():
            return
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)  # a half-done install
        run(
            [
                _binary("mariadb-install-db"), f"--defaults-file={self.cnf}",
                f"--datadir={self.data_dir}", f"--user={self.os_user}",
                "--auth-root-authentication-method=socket",
                f"--auth-root-socket-user={self.os_user}", "--skip-test-db",
            ],
            SERVICE, "mariadb-install-db", self.log_file, timeout=300,
        )

    def start(self) -> None:
        """Start mariadbd detached unless it already runs; wait until it answers."""
        if self.running():
            return
        if port_open(self.port):
            raise StackError(SERVICE, f"port {self.port} is in use by another process (set CDC_MARIADB_PORT)", self.log_file)
        self.init()
        stale = read_pid(self.pid_file)
        if stale and not pid_alive(stale):
            self.pid_file.unlink(missing_ok=True)
        pid = start_detached([_binary("mariadbd"), f"--defaults-file={self.cnf}"], self.log_file, cwd=self.base)
        write_pid(self.pid_file, pid)
        wait_until(self._ready, 90, "mariadb-admin ping", SERVICE, self.log_file,
                   alive=lambda: pid_alive(pid))

    def _admin(self, *args: str, check: bool = True) -> int:
        result = run(
            [_binary("mariadb-admin"), f"--defaults-file={self.cnf}", "-u", self.os_user, *args],
            SERVICE, f"mariadb-admin {' '.join(args)}", self.log_file, check=check, timeout=120,
        )
        return result.returncode

    def _ready(self) -> bool:
        return port_open(self.port) and self._admin("--connect-timeout=2", "ping", check=False) == 0

    def stop(self) -> None:
        """mariadb-admin shutdown, then SIGTERM/SIGKILL if it lingers (safe when nothing runs)."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return
        self._admin("--connect-timeout=5", "shutdown", check=False)
        try:
            wait_until(lambda: not pid_alive(pid), 60, "shutdown", SERVICE, self.log_file)
        except StackError:
            stop_pid(pid, SERVICE, 30, self.log_file)
        self.pid_file.unlink(missing_ok=True)

    def sql(self, sql: str, database: str | None = None) -> list[tuple[str | None, ...]]:
        """Run ``sql`` as the admin over the socket; return rows as text (NULL -> None)."""
        cmd = [
            _binary("mariadb"), f"--defaults-file={self.cnf}", "-u", self.os_user,
            "--batch", "--skip-column-names", "--raw",
        ]
        if database:
            cmd.append(f"--database={database}")
        result = run(cmd, SERVICE, "mariadb", self.log_file, input_text=sql)
        rows: list[tuple[str | None, ...]] = []
        for line in result.stdout.splitlines():
            rows.append(tuple(None if v == "NULL" else v for v in line.split("\t")))
        return rows

    def prepare(self, credentials: Credentials) -> None:
        """movies_db.movies with a few rows (when first created) and the Debezium user (idempotent)."""
        user, password = credentials.mariadb_user, credentials.mariadb_password
        check_identifier(SERVICE, "CDC_MARIADB_USER", user)
        exists = self.sql(
            "select count(*) from information_schema.tables "
            f"where table_schema = '{DATABASE}' and table_name = 'movies'"
        )[0][0] != "0"
        if not exists:
            values = ", ".join(f"({i}, '{t.replace(chr(39), chr(39) * 2)}', {y})" for i, t, y in MOVIES)
            self.sql(
                f"""
                create database if not exists {DATABASE};
                create table {DATABASE}.movies (
                    movie_id int primary key,
                    title varchar(200),
                    release_year int
                );
                insert into {DATABASE}.movies (movie_id, title, release_year) values {values};
                """
            )
        # The grants Debezium's MariaDB connector documents (BINLOG MONITOR is MariaDB's
        # name for REPLICATION CLIENT since 10.5; LOCK TABLES for snapshot locking).
        self.sql(
            f"""
            create user if not exists '{user}'@'{HOST}' identified by '{password}';
            alter user '{user}'@'{HOST}' identified by '{password}';
            grant select, reload, show databases, replication slave, binlog monitor, lock tables
              on *.* to '{user}'@'{HOST}';
            flush privileges;
            """
        )

    def admin_connect_args(self) -> dict[str, Any]:
        """PyMySQL-style arguments: the admin (unix_socket auth) over the socket."""
        return {"unix_socket": str(self.socket), "user": self.os_user, "database": DATABASE}

    def debezium_connect_args(self, credentials: Credentials) -> dict[str, Any]:
        """PyMySQL-style arguments: the Debezium user over 127.0.0.1."""
        return {
            "host": HOST, "port": self.port, "user": credentials.mariadb_user,
            "password": credentials.mariadb_password, "database": DATABASE,
        }
