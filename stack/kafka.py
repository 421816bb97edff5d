"""Apache Kafka 4.1.1, one node in KRaft mode (broker + controller), from ``.jars/kafka``.

The storage in ``$CDC_STACK_DIR/kafka/data`` is formatted once with a random cluster id;
the broker runs as ``java -Xmx512m -cp '.jars/kafka/*' kafka.Kafka server.properties``.
The Kafka tools (GetOffsetShell, TopicCommand) run the same way, briefly.
"""

from __future__ import annotations

import base64
import re
import subprocess
import uuid
from collections.abc import Sequence

from .errors import StackError
from .proc import pid_alive, port_open, run, start_detached, stop_pid, wait_until, write_pid
from .jvm import JAVA, SERVICE_JVM, JvmService, java_opts
from .settings import CONFIG_TEMPLATES, Settings
from .templates import render

SERVICE = "kafka"
# short-lived tools: small heap, quick start
TOOL_JVM = ["-Xmx256m", *SERVICE_JVM, "-Xshare:auto"]


def random_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class Kafka(JvmService):
    """The single-node Kafka of the stack."""

    service = SERVICE

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.data_dir = self.base / "data"
        self.props = self.base / "server.properties"

    def running(self) -> bool:
        return self.pid() is not None and port_open(self.settings.kafka_port)

    def run_tool(self, main_class: str, args: Sequence[str], what: str, timeout: float = 120,
                 check: bool = True) -> subprocess.CompletedProcess:
        """Run a Kafka tool class with the stack's classpath (a short-lived JVM)."""
        return run(
            [
                JAVA, *TOOL_JVM,
                f"-Dlog4j2.configurationFile={CONFIG_TEMPLATES / 'tools-log4j2.properties'}",
                "-cp", self.settings.kafka_classpath, main_class, *args,
            ],
            SERVICE, what, self.log_file, timeout=timeout, check=check,
        )

    def tool(self, main_class: str, args: Sequence[str], what: str, timeout: float = 120,
             check: bool = True) -> str:
        """Run a Kafka tool class; return its stdout."""
        return self.run_tool(main_class, args, what, timeout, check).stdout

    def format(self) -> None:
        """Render server.properties; format the storage once with a random cluster id."""
        self.settings.check_jars(SERVICE)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        render("kafka-server.properties", self.props, {
            "port": self.settings.kafka_port,
            "controller_port": self.settings.controller_port,
            "log_dirs": self.data_dir,
        })
        if (self.data_dir / "meta.properties").exists():
            return
        cluster_id_file = self.base / "cluster.id"
        if not cluster_id_file.exists():
            cluster_id_file.write_text(random_cluster_id() + "\n")
        cluster_id = cluster_id_file.read_text().strip()
        self.tool(
            "kafka.tools.StorageTool",
            # `--cluster-id=<id>`: an id may start with '-', which argparse would take for an option
            ["format", f"--cluster-id={cluster_id}", "-c", str(self.props), "--ignore-formatted"],
            "kafka-storage format",
        )

    def start(self) -> None:
        """Start the broker unless it already runs; wait until it accepts connections."""
        if self.running():
            return
        for port in (self.settings.kafka_port, self.settings.controller_port):
            if port_open(port):
                raise self.error(
                    f"port {port} is in use by another process "
                    "(set CDC_KAFKA_PORT / CDC_KAFKA_CONTROLLER_PORT)"
                )
        self.format()
        pid = start_detached(
            [JAVA, "-Xms512m", "-Xmx512m", *java_opts(self.settings, SERVICE),
             "-cp", self.settings.kafka_classpath, "kafka.Kafka", str(self.props)],
            self.stdout_log, cwd=self.base,
        )
        write_pid(self.pid_file, pid)
        try:
            wait_until(lambda: port_open(self.settings.kafka_port), 120, f"port {self.settings.kafka_port}",
                       SERVICE, self.log_file, alive=lambda: pid_alive(pid))
            wait_until(self._ready, 120, "the broker to answer metadata requests", SERVICE,
                       self.log_file, interval=1, alive=lambda: pid_alive(pid))
        except StackError as exc:
            raise self.error(str(exc).split("\n", 1)[0]) from None

    def _ready(self) -> bool:
        out = self.run_tool(
            "org.apache.kafka.tools.TopicCommand", ["--bootstrap-server", self.settings.kafka_bootstrap, "--list"],
            "kafka-topics --list", timeout=60, check=False,
        )
        return out.returncode == 0

    def stop(self) -> None:
        """SIGTERM (controlled shutdown), SIGKILL after 60 s; safe when nothing runs."""
        pid = self.pid()
        if pid is not None:
            stop_pid(pid, SERVICE, 60, self.log_file)
        self.pid_file.unlink(missing_ok=True)

    # --- topics -------------------------------------------------------------------
    def end_offsets(self, topic_regex: str) -> dict[tuple[str, int], int]:
        """Latest offset of every partition of the topics matching ``topic_regex`` (full match)."""
        result = self.run_tool(
            "org.apache.kafka.tools.GetOffsetShell",
            ["--bootstrap-server", self.settings.kafka_bootstrap, "--topic", topic_regex,
             "--time", "-1", "--exclude-internal-topics"],
            "GetOffsetShell", timeout=120, check=False,
        )
        if result.returncode != 0:
            if "Could not match any topic-partitions" in result.stdout + result.stderr:
                return {}  # no topic matches (yet)
            raise self.error(
                f"GetOffsetShell --topic {topic_regex!r} failed (exit {result.returncode}):\n"
                + (result.stdout[-2000:] + result.stderr[-2000:]).strip()
            )
        out = result.stdout
        offsets: dict[tuple[str, int], int] = {}
        for line in out.splitlines():
            parts = line.strip().rsplit(":", 2)
            if len(parts) != 3:
                continue
            topic, partition, offset = parts
            if offset:
                offsets[(topic, int(partition))] = int(offset)
        return offsets

    def delete_topics(self, topic_regex: str) -> list[str]:
        """Delete the topics matching ``topic_regex``; return their names."""
        names = self.topics(topic_regex)
        if names:
            self.tool(
                "org.apache.kafka.tools.TopicCommand",
                ["--bootstrap-server", self.settings.kafka_bootstrap, "--delete",
                 "--topic", "|".join(re.escape(n) for n in names)],
                "kafka-topics --delete",
            )
        return names
