"""Where the stack lives and which ports it uses: everything comes from the environment.

| variable | default |
| --- | --- |
| ``CDC_STACK_DIR`` | ``<repo>/build/stack`` (data, logs, pid files, generated configs) |
| ``CDC_STACK_JARS`` | ``<repo>/.jars`` (``kafka/`` and ``connect-plugins/`` from ``make setup``) |
| ``PAGILA_DIR`` | ``<repo>/../shared/datasets/pagila`` |
| ``CDC_PG_PORT`` | 25432 |
| ``CDC_MARIADB_PORT`` | 23306 |
| ``CDC_KAFKA_PORT`` / ``CDC_KAFKA_CONTROLLER_PORT`` | 29092 / 29093 |
| ``CDC_CONNECT_PORT`` | 28083 |
| ``CDC_S3_PORT`` | 29000 (S3Proxy, ``stack/s3.py``) |
| ``CDC_REGISTRY_PORT`` | 28081 (Apicurio Registry, ``stack/registry.py``) |
| ``CDC_SPARK_MASTER_PORT`` / ``CDC_SPARK_MASTER_UI_PORT`` | 27077 / 28480 (``stack/spark_cluster.py``) |
| ``CDC_SPARK_WORKER_UI_PORT`` | 28481 (the second worker: one above) |
| ``CDC_THRIFT_PORT`` | 20000 (the Spark Thrift Server) |
| ``CDC_PG_BINDIR`` | the newest ``/usr/lib/postgresql/<n>/bin`` |
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import StackError

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIR = Path(__file__).resolve().parent
CONFIG_TEMPLATES = PACKAGE_DIR / "config"
CONNECTOR_CONFIGS = PACKAGE_DIR / "connectors"

HOST = "127.0.0.1"

KAFKA_VERSION = "4.1.1"
DEBEZIUM_VERSION = "3.5.0.Final"
APICURIO_VERSION = "2.6.13.Final"


# Below Linux's ephemeral port range (32768-60999): a port in it can be taken as the
# source port of an outgoing connection, e.g. the Kafka controller's own client dialling
# its port before it listens (TCP self-connect); the bind then fails ("Address already in
# use" for 59103 in a make test at 5712b63).
DEFAULT_PORTS = {
    "CDC_PG_PORT": 25432,
    "CDC_MARIADB_PORT": 23306,
    "CDC_KAFKA_PORT": 29092,
    "CDC_KAFKA_CONTROLLER_PORT": 29093,
    "CDC_CONNECT_PORT": 28083,
    "CDC_S3_PORT": 29000,
    "CDC_REGISTRY_PORT": 28081,
    # The Spark standalone cluster and its Thrift Server (stack/spark_cluster.py); the second
    # worker's UI listens one above CDC_SPARK_WORKER_UI_PORT.
    "CDC_SPARK_MASTER_PORT": 27077,
    "CDC_SPARK_MASTER_UI_PORT": 28480,
    "CDC_SPARK_WORKER_UI_PORT": 28481,
    "CDC_THRIFT_PORT": 20000,
}


def ports_above_defaults(offset: int) -> dict[str, str]:
    """Every port variable `offset` above its default: a second stack (the tests', the
    bench's) beside a developer's `make cdc-up` one."""
    return {name: str(port + offset) for name, port in DEFAULT_PORTS.items()}


def _port(name: str) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return DEFAULT_PORTS[name]
    try:
        value = int(raw)
    except ValueError:
        raise StackError("settings", f"{name}={raw!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise StackError("settings", f"{name}={value} is out of range")
    return value


def _pg_bindir() -> Path:
    raw = os.environ.get("CDC_PG_BINDIR", "").strip()
    if raw:
        return Path(raw)
    root = Path("/usr/lib/postgresql")
    candidates = sorted(
        (p for p in root.glob("*/bin") if (p / "postgres").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not candidates:
        raise StackError(
            "postgres",
            "no PostgreSQL server found under /usr/lib/postgresql/<version>/bin "
            "(install Debian's postgresql package or set CDC_PG_BINDIR)",
        )
    return candidates[-1]


@dataclass(frozen=True)
class Settings:
    """Resolved locations and ports of one stack instance."""

    repo: Path
    stack_dir: Path
    jars_dir: Path
    pagila_dir: Path
    pg_port: int
    mariadb_port: int
    kafka_port: int
    controller_port: int
    connect_port: int
    s3_port: int
    registry_port: int

    @property
    def logs_dir(self) -> Path:
        return self.stack_dir / "logs"

    @property
    def run_dir(self) -> Path:
        """Pid files live here."""
        return self.stack_dir / "logs"

    def log_file(self, service: str) -> Path:
        return self.logs_dir / f"{service}.log"

    def pid_file(self, service: str) -> Path:
        return self.run_dir / f"{service}.pid"

    @property
    def credentials_file(self) -> Path:
        return self.stack_dir / "credentials.env"

    @property
    def kafka_bootstrap(self) -> str:
        return f"{HOST}:{self.kafka_port}"

    @property
    def connect_url(self) -> str:
        return f"http://{HOST}:{self.connect_port}"

    @property
    def kafka_classpath(self) -> str:
        return str(self.jars_dir / "kafka" / "*")

    @property
    def plugin_dir(self) -> Path:
        return self.jars_dir / "connect-plugins"

    @property
    def pg_bindir(self) -> Path:
        return _pg_bindir()

    def check_jars(self, service: str) -> None:
        """Fail loudly when ``make setup`` has not fetched the stack's jars."""
        missing = [
            str(p)
            for p in (
                self.jars_dir / "kafka" / f"kafka_2.13-{KAFKA_VERSION}.jar",
                self.jars_dir / "kafka" / f"connect-runtime-{KAFKA_VERSION}.jar",
                self.plugin_dir / "debezium-connector-postgres"
                / f"debezium-connector-postgres-{DEBEZIUM_VERSION}.jar",
                self.plugin_dir / "debezium-connector-mariadb"
                / f"debezium-connector-mariadb-{DEBEZIUM_VERSION}.jar",
            )
            if not p.exists()
        ]
        if missing:
            raise StackError(
                service,
                "the stack's jars are missing (run `make setup`, which fetches "
                "jvm/stack/pom.xml into .jars/): " + ", ".join(missing),
            )


def load_settings() -> Settings:
    """Read the settings from the environment (see the module docstring)."""
    stack_dir = Path(os.environ.get("CDC_STACK_DIR") or REPO / "build" / "stack")
    jars_dir = Path(os.environ.get("CDC_STACK_JARS") or REPO / ".jars")
    pagila_dir = Path(os.environ.get("PAGILA_DIR") or REPO.parent / "shared" / "datasets" / "pagila")
    return Settings(
        repo=REPO,
        stack_dir=stack_dir.resolve(),
        jars_dir=jars_dir.resolve(),
        pagila_dir=pagila_dir.resolve(),
        pg_port=_port("CDC_PG_PORT"),
        mariadb_port=_port("CDC_MARIADB_PORT"),
        kafka_port=_port("CDC_KAFKA_PORT"),
        controller_port=_port("CDC_KAFKA_CONTROLLER_PORT"),
        connect_port=_port("CDC_CONNECT_PORT"),
        s3_port=_port("CDC_S3_PORT"),
        registry_port=_port("CDC_REGISTRY_PORT"),
    )
