"""Kafka Connect 4.1.1 in distributed mode with the Debezium 3.5.0.Final plugins.

Started as ``java -Xmx768m -cp '.jars/kafka/*' org.apache.kafka.connect.cli.ConnectDistributed``
with the CDC_* credentials in its environment (EnvVarConfigProvider). Connector
configs, offsets and statuses live in Kafka topics, so they survive a restart.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from .credentials import Credentials
from .errors import StackError
from .jvm import JAVA, JvmService, java_opts
from .proc import pid_alive, port_open, read_pid, start_detached, stop_pid, wait_until, write_pid
from .settings import Settings
from .templates import render

SERVICE = "connect"


class Connect(JvmService):
    """The Kafka Connect worker of the stack and a small REST client for it."""

    service = SERVICE

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.props = self.base / "connect-distributed.properties"

    def running(self) -> bool:
        return self.pid() is not None and self._rest_ready()

    # --- process ----------------------------------------------------------------
    def start(self, credentials: Credentials, timeout: float = 180) -> None:
        """Start the worker unless it runs; wait until its REST API lists connectors."""
        if self.running():
            return
        if self.pid() is None and port_open(self.settings.connect_port):
            raise self.error(f"port {self.settings.connect_port} is in use by another process (set CDC_CONNECT_PORT)")
        self.settings.check_jars(SERVICE)
        if self.pid() is None:
            render("connect-distributed.properties", self.props, {
                "bootstrap": self.settings.kafka_bootstrap,
                "port": self.settings.connect_port,
                "plugin_path": self.settings.plugin_dir,
            })
            env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_")}
            env.update(credentials.as_env())
            started = start_detached(
                [JAVA, "-Xms256m", "-Xmx768m", *java_opts(self.settings, SERVICE),
                 "-cp", self.settings.kafka_classpath,
                 "org.apache.kafka.connect.cli.ConnectDistributed", str(self.props)],
                self.stdout_log, env=env, cwd=self.base,
            )
            write_pid(self.pid_file, started)
        worker = read_pid(self.pid_file)
        try:
            wait_until(self._rest_ready, timeout, "the REST API (GET /connectors)", SERVICE,
                       self.log_file, interval=1, alive=lambda: pid_alive(worker))
        except StackError as exc:
            raise self.error(str(exc).split("\n", 1)[0]) from None

    def stop(self) -> None:
        """SIGTERM (tasks stop, offsets are committed), SIGKILL after 60 s; safe when idle."""
        pid = self.pid()
        if pid is not None:
            stop_pid(pid, SERVICE, 60, self.log_file)
        self.pid_file.unlink(missing_ok=True)

    # --- REST -----------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        """One REST call; returns (status, parsed JSON or None). Connection errors raise."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.settings.connect_url + path, data=data, method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw) if raw else None
            except json.JSONDecodeError:
                return exc.code, raw.decode(errors="replace")

    def _rest_ready(self) -> bool:
        try:
            status, _ = self.request("GET", "/connectors", timeout=5)
        except (urllib.error.URLError, OSError, TimeoutError):
            return False
        return status == 200

    def call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201, 202, 204),
             retries: int = 30) -> Any:
        """A REST call that retries while the worker rebalances (409) and raises otherwise."""
        for _ in range(retries):
            try:
                status, payload = self.request(method, path, body)
            except (urllib.error.URLError, OSError) as exc:
                raise self.error(f"{method} {path}: {exc}") from None
            if status in ok:
                return payload
            if status == 409 or status >= 500 and "rebalanc" in json.dumps(payload).lower():
                time.sleep(1)
                continue
            raise self.error(f"{method} {path} -> HTTP {status}: {payload}")
        raise self.error(f"{method} {path}: the worker kept rebalancing")

    def connectors(self) -> list[str]:
        return list(self.call("GET", "/connectors"))

    def config(self, name: str) -> dict[str, str]:
        return dict(self.call("GET", f"/connectors/{urllib.parse.quote(name)}/config"))

    def status(self, name: str) -> dict[str, Any] | None:
        status, payload = self.request("GET", f"/connectors/{urllib.parse.quote(name)}/status")
        return payload if status == 200 else None

    def offsets(self, name: str) -> list[dict[str, Any]]:
        payload = self.call("GET", f"/connectors/{urllib.parse.quote(name)}/offsets")
        return list(payload.get("offsets", [])) if isinstance(payload, dict) else []

    def wait_running(self, name: str, timeout: float = 180) -> dict[str, Any]:
        """Wait until the connector and all its tasks are RUNNING; raise with the trace if FAILED."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        while True:
            pid = self.pid()
            if pid is None:
                raise self.error(f"the worker is not running (waiting for connector {name})")
            last = self.status(name)
            if last:
                states = [last["connector"]["state"]] + [t["state"] for t in last.get("tasks", [])]
                failed = [
                    item for item in [last["connector"], *last.get("tasks", [])]
                    if item.get("state") == "FAILED"
                ]
                if failed:
                    trace = "\n".join(str(item.get("trace", ""))[:4000] for item in failed)
                    raise self.error(f"connector {name} FAILED:\n{trace}")
                if last.get("tasks") and all(s == "RUNNING" for s in states):
                    return last
            if time.monotonic() >= deadline:
                raise self.error(f"timed out after {timeout:.0f}s waiting for connector {name} to run: {last}")
            time.sleep(1)
