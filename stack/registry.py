"""A schema registry on 127.0.0.1: Apicurio Registry 2.6.13.Final (Quarkus app).

Started as ``java -jar .jars/apicurio-registry/apicurio-registry-app-<v>-runner.jar``
with its default storage, an in-memory H2 database: schemas live as long as the
process. Debezium's Avro converter registers them through Apicurio's own API; the
ingestion reads them by id through the Confluent-compatible API
(``/apis/ccompat/v7/schemas/ids/<id>``), which answers with the content id the
converter writes when it is told ``apicurio.registry.as-confluent=true``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from .jvm import JAVA, SERVICE_JVM, JvmService
from .proc import pid_alive, port_open, start_detached, stop_pid, wait_until, write_pid
from .settings import APICURIO_VERSION, HOST, Settings

SERVICE = "registry"
CCOMPAT_PATH = "/apis/ccompat/v7"


# The global compatibility rule every subject gets unless it has a rule of its own.
COMPATIBILITY = "BACKWARD"


class SchemaRegistry(JvmService):
    """The stack's Apicurio Registry: start, stop, and the URLs clients are given."""

    service = SERVICE

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.home = settings.jars_dir / "apicurio-registry"
        self.jar = self.home / f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar"

    @property
    def url(self) -> str:
        """Base URL of the registry (Apicurio's own API lives under ``/apis/registry/v2``)."""
        return f"http://{HOST}:{self.settings.registry_port}"

    @property
    def ccompat_url(self) -> str:
        """The Confluent-compatible API: what ``CDC_SCHEMA_REGISTRY_URL`` points at."""
        return self.url + CCOMPAT_PATH

    def running(self) -> bool:
        return self.pid() is not None and port_open(self.settings.registry_port)

    def ready(self) -> bool:
        """True once the health check says UP and the ccompat API answers a listing."""
        try:
            with urllib.request.urlopen(self.url + "/health/ready", timeout=5) as response:
                if json.loads(response.read()).get("status") != "UP":
                    return False
            with urllib.request.urlopen(self.ccompat_url + "/subjects", timeout=5) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            # refused while Quarkus starts, 503 while a check is DOWN, a cut-off body
            return False

    def start(self, timeout: float = 120) -> None:
        """Start the registry unless it runs; wait until it is ready."""
        if self.running():
            wait_until(self.ready, timeout, "GET /health/ready", SERVICE, self.log_file)
            return
        if not self.jar.exists():
            raise self.error(f"{self.jar} is missing: run `make setup` (jvm/stack/pom.xml fetches Apicurio)")
        if port_open(self.settings.registry_port):
            raise self.error(
                f"port {self.settings.registry_port} is in use by another process (set CDC_REGISTRY_PORT)")
        self.base.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        pid = start_detached(
            [JAVA, "-Xms64m", "-Xmx384m", *SERVICE_JVM, "-Djava.awt.headless=true",
             f"-Dcdc.stack.service={SERVICE}", f"-Dcdc.stack.dir={self.settings.stack_dir}",
             f"-Dquarkus.http.host={HOST}", f"-Dquarkus.http.port={self.settings.registry_port}",
             "-Dquarkus.log.console.enable=false", "-Dquarkus.log.file.enable=true",
             f"-Dquarkus.log.file.path={self.log_file}",
             # As in the reference setup: a new schema version must read data written with
             # the latest one, or the registry refuses it (docs/decisions/schema-evolution.md).
             f"-Dregistry.rules.global.compatibility={COMPATIBILITY}",
             "-jar", str(self.jar)],
            self.stdout_log, cwd=self.base,
        )
        write_pid(self.pid_file, pid)
        wait_until(self.ready, timeout, f"GET {self.url}/health/ready", SERVICE, self.log_file,
                   alive=lambda: pid_alive(pid))

    def stop(self) -> None:
        pid = self.pid()
        if pid is not None:
            stop_pid(pid, SERVICE, 30, self.log_file)
        self.pid_file.unlink(missing_ok=True)
