"""The stack's Python API: start, stop, inspect, register connectors, wait for Debezium.

Every function reads the settings from the environment (``stack.settings``) and is
safe to call from another process than the one that started the stack: state lives
in ``$CDC_STACK_DIR`` (pid files, data, logs) and in Kafka (connectors, offsets).
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .connect import Connect
from .credentials import Credentials, load_credentials
from .errors import StackError
from .kafka import Kafka
from .mariadb import MariaDB
from .metastore import Metastore
from .postgres import Postgres
from .registry import COMPATIBILITY, SchemaRegistry
from .s3 import S3Server
from .proc import stack_processes
from .settings import (
    APICURIO_VERSION, CONNECTOR_CONFIGS, DEBEZIUM_VERSION, HOST, KAFKA_VERSION, Settings, load_settings,
)
from .templates import render_text

# `metastore`: a Hive metastore database in the stack's PostgreSQL (stack/metastore.py), which
# starts the server without loading Pagila unless `postgres` is asked for too.
COMPONENTS = ("postgres", "mariadb", "kafka", "connect", "s3", "registry", "metastore")
# The bucket `up` creates in the object store (sink files and lakehouses on s3a://).
S3_BUCKET = "lakehouse"
PG_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"


@dataclass(frozen=True, kw_only=True)
class StackInfo:
    """What a caller needs to talk to the running stack.

    The ``pg_dsn`` / ``mariadb_connect_args`` accounts are the databases' admins over
    their unix sockets (no password; read, write, DDL): use them for test workloads and
    for reading the source tables. The ``*_debezium_*`` ones are the connectors' own
    accounts over TCP (replication + SELECT only; they carry the password).
    """

    stack_dir: Path
    logs_dir: Path
    components: tuple[str, ...]
    credentials: Credentials
    pg_host: str
    pg_port: int
    pg_socket_dir: Path
    pg_dsn: str
    """libpq URI: superuser ``postgres`` over the unix socket, database pagila."""
    pg_debezium_dsn: str = field(repr=False)
    """libpq URI: the Debezium role over 127.0.0.1 (contains the password: do not log)."""
    mariadb_host: str
    mariadb_port: int
    mariadb_socket: Path
    mariadb_connect_args: dict[str, Any]
    """``pymysql.connect(**args)``: the admin over the unix socket, database movies_db."""
    mariadb_debezium_connect_args: dict[str, Any] = field(repr=False)
    """``pymysql.connect(**args)``: the Debezium user over 127.0.0.1 (password inside)."""
    kafka_bootstrap: str
    connect_url: str
    s3_endpoint: str
    s3_bucket: str
    s3_env: dict[str, str] = field(repr=False)
    """What a Spark process needs to use the object store (contains the secret: do not log)."""
    registry_url: str
    """The schema registry's Confluent-compatible API (``CDC_SCHEMA_REGISTRY_URL``)."""
    metastore_env: dict[str, str] = field(default_factory=dict)
    """What a Spark process needs to share the stack's metastore (empty without it)."""
    versions: dict[str, str] = field(default_factory=dict)


def _settings() -> tuple[Settings, Credentials]:
    settings = load_settings()
    return settings, load_credentials(settings.credentials_file)


def _normalize(components: Iterable[str] | None) -> tuple[str, ...]:
    if components is None:
        return COMPONENTS
    wanted = {c.strip().lower() for c in components if c.strip()}
    unknown = wanted - set(COMPONENTS)
    if unknown:
        raise StackError("stack", f"unknown component(s) {sorted(unknown)}; choose from {COMPONENTS}")
    if "connect" in wanted:
        wanted.add("kafka")  # Connect keeps its state in Kafka
    return tuple(c for c in COMPONENTS if c in wanted)


def info(components: Iterable[str] | None = None) -> StackInfo:
    """The ports, DSNs and credentials of the stack (started or not)."""
    settings, creds = _settings()
    pg, maria, s3 = Postgres(settings), MariaDB(settings), S3Server(settings)
    wanted = _normalize(components)
    return StackInfo(
        stack_dir=settings.stack_dir,
        logs_dir=settings.logs_dir,
        components=wanted,
        credentials=creds,
        pg_host=HOST,
        pg_port=settings.pg_port,
        pg_socket_dir=pg.socket_dir,
        pg_dsn=pg.superuser_dsn(),
        pg_debezium_dsn=pg.dsn(creds),
        mariadb_host=HOST,
        mariadb_port=settings.mariadb_port,
        mariadb_socket=maria.socket,
        mariadb_connect_args=maria.admin_connect_args(),
        mariadb_debezium_connect_args=maria.debezium_connect_args(creds),
        kafka_bootstrap=settings.kafka_bootstrap,
        connect_url=settings.connect_url,
        s3_endpoint=s3.endpoint,
        s3_bucket=S3_BUCKET,
        # Only for a stack with the store: reading its keys generates them when unset.
        s3_env=s3.spark_env() if "s3" in wanted else {},
        registry_url=SchemaRegistry(settings).ccompat_url,
        metastore_env=Metastore(settings).spark_env() if "metastore" in wanted else {},
        versions={
            "kafka": KAFKA_VERSION,
            "debezium": DEBEZIUM_VERSION,
            "apicurio-registry": APICURIO_VERSION,
            "postgresql": pg.bindir.parent.name,
        },
    )


def up(components: Iterable[str] | None = None) -> StackInfo:
    """Start the stack (all of it, or ``components``); reuse what already runs.

    PostgreSQL gets Pagila and the Northwind outbox example (once), the Debezium role
    and the publications ``cdc_pagila`` and ``cdc_northwind``;
    MariaDB gets ``movies_db.movies`` and the Debezium user; Kafka is formatted once;
    Connect runs in distributed mode with the credentials in its environment.
    Raises StackError (service, log file, its last lines) when something cannot start.
    """
    settings, creds = _settings()
    wanted = _normalize(components)
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    pg = Postgres(settings)
    if "postgres" in wanted or "metastore" in wanted:
        pg.start()
    if "metastore" in wanted:
        Metastore(settings).prepare()
    if "postgres" in wanted:
        pg.load_pagila()
        pg.load_northwind()
        pg.prepare_cdc(creds)
    if "mariadb" in wanted:
        maria = MariaDB(settings)
        maria.start()
        maria.prepare(creds)
    if "kafka" in wanted:
        Kafka(settings).start()
    if "registry" in wanted:
        # before Connect, so an Avro connector registered next finds it
        SchemaRegistry(settings).start()
    if "connect" in wanted:
        Connect(settings).start(creds)
    if "s3" in wanted:
        S3Server(settings).start((S3_BUCKET,))
    return info(wanted)


def down(purge: bool = False) -> None:
    """Stop everything the stack started (safe when nothing runs); ``purge`` deletes its dir."""
    settings = load_settings()
    errors: list[str] = []
    for service in (S3Server(settings), Connect(settings), SchemaRegistry(settings), Kafka(settings), MariaDB(settings), Postgres(settings)):
        try:
            service.stop()
        except StackError as exc:
            errors.append(str(exc))
    left = leftover_processes()
    if left:
        errors.append("processes still running after down: " + "; ".join(f"{p} {c}" for p, c in left))
    if errors:
        raise StackError("stack", "down did not stop everything:\n" + "\n".join(errors))
    if purge and settings.stack_dir.exists():
        shutil.rmtree(settings.stack_dir)


def leftover_processes() -> list[tuple[int, str]]:
    """Live server processes of this stack (pid, command line); empty after down()."""
    return stack_processes(load_settings().stack_dir)


def status() -> dict[str, Any]:
    """Which services run (pid, port, log) and the state of every registered connector."""
    settings = load_settings()
    result: dict[str, Any] = {"stack_dir": str(settings.stack_dir)}
    pg, maria, kafka, connect = Postgres(settings), MariaDB(settings), Kafka(settings), Connect(settings)
    ports = {
        "postgres": settings.pg_port, "mariadb": settings.mariadb_port,
        "kafka": settings.kafka_port, "connect": settings.connect_port, "s3": settings.s3_port,
        "registry": settings.registry_port,
    }
    for name, service in (("postgres", pg), ("mariadb", maria), ("kafka", kafka), ("connect", connect),
                          ("s3", S3Server(settings)), ("registry", SchemaRegistry(settings))):
        pid = service.pid()
        result[name] = {
            "running": pid is not None and service.running(),
            "pid": pid,
            "port": ports[name],
            "log": str(settings.log_file(name)),
        }
    connectors: dict[str, Any] = {}
    if result["connect"]["running"]:
        for name in connect.connectors():
            st = connect.status(name) or {}
            connectors[name] = {
                "state": st.get("connector", {}).get("state"),
                "tasks": [t.get("state") for t in st.get("tasks", [])],
            }
    result["connectors"] = connectors
    return result


# --- connectors ----------------------------------------------------------------------
def connector_names() -> list[str]:
    """The connector configs shipped in ``stack/connectors``."""
    return sorted(p.stem for p in CONNECTOR_CONFIGS.glob("*.json"))


def connector_config(name: str) -> dict[str, str]:
    """``stack/connectors/<name>.json`` with its ports filled in (``${env:...}`` kept)."""
    path = CONNECTOR_CONFIGS / f"{name}.json"
    if not path.exists():
        raise StackError("connect", f"no connector config {path}; known: {connector_names()}")
    settings = load_settings()
    text = render_text(path.read_text(), {
        "pg_port": settings.pg_port,
        "mariadb_port": settings.mariadb_port,
        "kafka_bootstrap": settings.kafka_bootstrap,
        "registry_url": SchemaRegistry(settings).url,
    }, str(path))
    document = json.loads(text)
    config = document.get("config", document)
    return {str(k): str(v) for k, v in config.items()}


def _running_connect() -> Connect:
    connect = Connect(load_settings())
    if not connect.running():
        raise connect.error("Kafka Connect is not running: call stack.up() first")
    return connect


def register(name: str, timeout: float = 180, overrides: dict[str, str] | None = None,
             template: str | None = None) -> dict[str, Any]:
    """PUT the connector's config and wait until it and its task are RUNNING.

    ``overrides`` replace or add config entries for this registration only (e.g.
    ``{"snapshot.mode": "no_data"}``); the file in ``stack/connectors`` is unchanged.
    ``template`` registers ``name`` with the config of another file (e.g. a scratch
    connector made from ``pagila-avro`` with its own prefix, slot and tables).
    Raises StackError with the connector's trace when it FAILED.
    """
    connect = _running_connect()
    config = {**connector_config(template or name), **{str(k): str(v) for k, v in (overrides or {}).items()}}
    connect.call("PUT", f"/connectors/{name}/config", config)
    return connect.wait_running(name, timeout)


def unregister(name: str, reset: bool = True) -> None:
    """Delete the connector. With ``reset`` (default) also forget where it was, so a later
    register() snapshots again: its Connect offsets are deleted, a PostgreSQL
    connector's replication slot is dropped, a MariaDB connector's schema history topic
    is deleted. Its data topics are kept (see delete_topics())."""
    connect = _running_connect()
    config = connector_config(name) if (CONNECTOR_CONFIGS / f"{name}.json").exists() else None
    if name in connect.connectors():
        config = connect.config(name)
        if reset:
            connect.call("PUT", f"/connectors/{name}/stop")
            deadline = time.monotonic() + 60
            while (connect.status(name) or {}).get("connector", {}).get("state") != "STOPPED":
                if time.monotonic() > deadline:
                    raise connect.error(f"connector {name} did not stop")
                time.sleep(0.5)
            connect.call("DELETE", f"/connectors/{name}/offsets")
        connect.call("DELETE", f"/connectors/{name}")
    if not reset or config is None:
        return
    settings = load_settings()
    if config.get("connector.class") == PG_CONNECTOR and config.get("slot.name"):
        Postgres(settings).drop_slot(config["slot.name"])
    history = config.get("schema.history.internal.kafka.topic")
    if history:
        Kafka(settings).delete_topics(re.escape(history))


def restart_connect(timeout: float = 180) -> None:
    """Stop the Connect worker and start it again; wait for REST and every connector RUNNING."""
    settings, creds = _settings()
    connect = Connect(settings)
    names = connect.connectors() if connect.running() else []
    connect.stop()
    connect.start(creds)
    for name in names or connect.connectors():
        connect.wait_running(name, timeout)


# --- Kafka ------------------------------------------------------------------------------
def end_offsets(topic_regex: str) -> dict[tuple[str, int], int]:
    """End offset of every partition of the topics whose name fully matches ``topic_regex``."""
    return Kafka(load_settings()).end_offsets(topic_regex)


def delete_topics(topic_regex: str) -> list[str]:
    """Delete the topics whose name fully matches ``topic_regex``; return their names."""
    return Kafka(load_settings()).delete_topics(topic_regex)


def _snapshot_done(offsets: list[dict[str, Any]]) -> bool:
    """True once the connector's committed source offset is past its initial snapshot."""
    if not offsets:
        return False
    for entry in offsets:
        offset = entry.get("offset") or {}
        snapshot = offset.get("snapshot")
        if snapshot not in (None, False, "false", "FALSE") and not offset.get("snapshot_completed"):
            return False
    return True


def wait_caught_up(topic_regex: str, quiet_seconds: float = 5, timeout: float = 600) -> dict[tuple[str, int], int]:
    """Return once Debezium has published everything committed before this call.

    For every registered connector: it and its task are RUNNING and its committed offset
    is past the initial snapshot. PostgreSQL connectors: their slot's confirmed_flush_lsn
    has reached pg_current_wal_lsn() as read at call time (a ``cdc-stack`` logical
    decoding message is committed right after reading it, so the slots can get there
    even when the last WAL is not captured; the connectors skip that message). Then the
    end offsets of the topics matching ``topic_regex`` must stay unchanged for
    ``quiet_seconds`` (for MariaDB that is the only signal). Returns those end offsets.
    """
    settings = load_settings()
    connect = _running_connect()
    names = connect.connectors()
    configs = {n: connect.config(n) for n in names}
    pg_slots = [c["slot.name"] for c in configs.values()
                if c.get("connector.class") == PG_CONNECTOR and c.get("slot.name")]
    pg = Postgres(settings)
    target = pg.current_wal_lsn() if pg_slots else None
    if target is not None:
        # WAL written after the last captured commit (other tables, checkpoints,
        # running-xacts records) never reaches Debezium, so its slot would stay below
        # pg_current_wal_lsn() forever. A logical-decoding message committed now is
        # decoded after everything before it; the connectors skip it
        # (message.prefix.exclude.list) but its COMMIT moves their offset, which the
        # next heartbeat commits and Debezium confirms to the slot.
        pg.emit_marker()
    kafka = Kafka(settings)
    deadline = time.monotonic() + timeout
    last: dict[tuple[str, int], int] | None = None
    stable_since = time.monotonic()
    waiting: list[str] = []
    while True:
        waiting = []
        for name in names:
            st = connect.status(name)
            if st is None:
                raise connect.error(f"connector {name} disappeared while waiting")
            for item in [st["connector"], *st.get("tasks", [])]:
                if item.get("state") == "FAILED":
                    raise connect.error(f"connector {name} FAILED:\n{str(item.get('trace', ''))[:4000]}")
            if not _snapshot_done(connect.offsets(name)):
                waiting.append(f"{name}: snapshot not finished")
        if target is not None:
            for slot, reached in pg.slots_reached(pg_slots, target).items():
                if not reached:
                    waiting.append(f"slot {slot}: confirmed_flush_lsn < {target}")
        offsets = kafka.end_offsets(topic_regex)
        now = time.monotonic()
        if offsets != last:
            last, stable_since = offsets, now
        if not waiting and now - stable_since >= quiet_seconds:
            return offsets
        if now >= deadline:
            raise connect.error(
                f"timed out after {timeout:.0f}s waiting for {topic_regex!r} to catch up: "
                + ("; ".join(waiting) or f"end offsets still moving: {offsets}")
            )
        time.sleep(1)


# --- SQL helpers ------------------------------------------------------------------------
def psql(sql: str, db: str = "pagila") -> list[tuple[str | None, ...]]:
    """Run SQL on the stack's PostgreSQL as the superuser; rows as text tuples (NULL -> None)."""
    return Postgres(load_settings()).psql(sql, db)


def mariadb(sql: str, database: str | None = "movies_db") -> list[tuple[str | None, ...]]:
    """Run SQL on the stack's MariaDB as its admin; rows as text tuples (NULL -> None)."""
    return MariaDB(load_settings()).sql(sql, database)


def load_pagila() -> bool:
    """Load Pagila into the running PostgreSQL unless it is there; True if it loaded now."""
    pg = Postgres(load_settings())
    if not pg.running():
        raise StackError("postgres", "PostgreSQL is not running: call stack.up() first", pg.log_file)
    return pg.load_pagila()


__all__ = [
    "COMPONENTS", "StackInfo", "info", "up", "down", "status", "leftover_processes",
    "connector_names", "connector_config", "register", "unregister", "restart_connect",
    "end_offsets", "delete_topics", "wait_caught_up", "psql", "mariadb", "load_pagila",
]


# Debezium's Avro type (the non-null branch) for a PostgreSQL column type, as
# information_schema.columns.data_type names it; types left out are not compared.
_PG_AVRO_TYPES = {
    "smallint": "int", "integer": "int", "bigint": "long", "real": "float", "double precision": "double",
    "boolean": "boolean", "text": "string", "character varying": "string", "character": "string",
    "numeric": "bytes", "bytea": "bytes", "date": "int", "uuid": "string", "json": "string", "jsonb": "string",
    "timestamp without time zone": "long", "timestamp with time zone": "string",
}
# Avro's promotions: a reader of the new type reads data written with the old one.
_AVRO_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
                    ("float", "double"), ("string", "bytes"), ("bytes", "string")}
_SAFE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")


def _avro_type(field_type: Any) -> str | None:
    """The non-null branch of a field's type, by name (`long`, `string`, a record's name...)."""
    branches = field_type if isinstance(field_type, list) else [field_type]
    for branch in branches:
        if branch != "null":
            return branch.get("type") if isinstance(branch, dict) else str(branch)
    return None


def _registry_latest_value_fields(subject: str) -> dict[str, str]:
    """column -> Avro type of the `after` record of the latest schema registered under `subject`."""
    subject_path = urllib.parse.quote(subject, safe="")
    url = f"{SchemaRegistry(load_settings()).ccompat_url}/subjects/{subject_path}/versions/latest"
    with urllib.request.urlopen(url, timeout=10) as answer:
        envelope = json.loads(json.load(answer)["schema"])
    # `before` defines the row record, `after` names it
    record = next(b for f in envelope["fields"] if f["name"] in ("before", "after")
                  for b in (f["type"] if isinstance(f["type"], list) else [f["type"]]) if isinstance(b, dict))
    return {f["name"]: _avro_type(f["type"]) for f in record["fields"]}


def type_changes(registered: dict[str, str | None], columns: list[tuple[str, str]],
                 decimal_mode: str = "precise") -> list[tuple[str, str, str, str]]:
    """(column, registered Avro type, Avro type now, data_type now) for each PostgreSQL
    column (`columns`: name, information_schema data_type) whose type now maps to an Avro
    type the registered one does not promote to. Columns added or dropped, and types not
    mapped, are left out (those changes are compatible, or not known here)."""
    mapping = {**_PG_AVRO_TYPES, "numeric": {"double": "double", "string": "string"}.get(decimal_mode, "bytes")}
    changes = []
    for column, data_type in columns:
        old, new = registered.get(column), mapping.get(data_type)
        if old and new and old != new and (old, new) not in _AVRO_PROMOTIONS:
            changes.append((column, old, new, data_type))
    return changes


def refused_subject(trace: str) -> tuple[str, str] | None:
    """(subject, the registry's causes) when a task's trace is Apicurio's converter
    refused by a compatibility rule, else None."""
    refused = re.search(r"RuleViolationException: Incompatible artifact: (\S+) \[(\w+)\].*?Causes: ([^\n]*)", trace)
    return (refused.group(1), refused.group(3)) if refused else None


def _changed_columns(config: dict[str, str], topic: str, subject: str) -> list[str]:
    """`column: old -> new (now <type> in <schema>.<table>)` for a PostgreSQL connector's
    table (type_changes: the latest registered schema against the table's columns now)."""
    if config.get("connector.class") != PG_CONNECTOR:
        return []
    schema, table = topic.split(".")[-2:]
    if not (_SAFE_NAME.match(schema) and _SAFE_NAME.match(table)):
        return []  # never put a name SQL could misread into a query
    registered = _registry_latest_value_fields(subject)
    rows = psql("select column_name, data_type from information_schema.columns"
                f" where table_schema = '{schema}' and table_name = '{table}' order by ordinal_position",
                db=config.get("database.dbname", "pagila"))
    return [f"{column}: {old} -> {new} (now {data_type} in {schema}.{table})" for column, old, new, data_type
            in type_changes(registered, [(str(c), str(t)) for c, t in rows],
                            config.get("decimal.handling.mode", "precise"))]


def connector_problem(name: str) -> str | None:
    """Why a registered connector's task FAILED, for a person: None when it runs.

    When the schema registry refused a new schema (an incompatible change under the
    registry's compatibility rule), the message names the connector, the topic and
    subject, the columns whose type changed (PostgreSQL connectors: the latest
    registered schema against the table's columns now), and what to do; otherwise the
    first line of the task's trace."""
    connect = _running_connect()
    state = connect.status(name) or {}
    failed = [t for t in state.get("tasks", []) if t.get("state") == "FAILED"]
    if not failed:
        return None
    trace = str(failed[0].get("trace", ""))
    refused = refused_subject(trace)
    if not refused:
        return f"connector {name}: task {failed[0].get('id')} FAILED: {trace.splitlines()[0] if trace else '?'}"
    subject, causes = refused
    topic = re.sub(r"-(value|key)$", "", subject)
    config = connect.config(name)
    try:
        changed = _changed_columns(config, topic, subject)
    except Exception as exc:  # noqa: BLE001 - the message stands without the column list
        changed = [f"(could not compare the table with the registry: {type(exc).__name__}: {exc})"]
    settings = load_settings()
    rules = f"{SchemaRegistry(settings).url}/apis/registry/v2/groups/default/artifacts/{subject}/rules"
    what = ("; ".join(changed) if changed else
            f"the registry's diff: {causes}")
    return (
        f"connector {name} stopped: the schema registry refused the new schema of {subject} (topic {topic}): "
        f"it is not {COMPATIBILITY} compatible with the latest registered version. Changed: {what}. "
        f"The tables of connector {name} stop at the change (nothing after it reaches Kafka); other connectors "
        f"go on. What to do: either undo the change in the source table (if no row was written with it) and restart "
        f"the task, or accept it for this subject only: "
        f"POST {rules} {{\"type\": \"COMPATIBILITY\", \"config\": \"NONE\"}}, restart the task "
        f"(POST {settings.connect_url}/connectors/{name}/tasks/{failed[0].get('id')}/restart), once it runs "
        f"DELETE {rules}/COMPATIBILITY (the subject is checked against the global rule again), then declare the "
        f"new data_type in the silver model's YAML (a type every stored value converts to, such as string, "
        f"rebuilds the table on the next build; any other needs dbt build --full-refresh --select <model>)."
    )
