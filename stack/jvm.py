"""What the stack's long-running JVMs (Kafka, Kafka Connect) share: the java command,
their JVM options, their files, and how a pid is recognised as theirs."""

from __future__ import annotations

import os

from .errors import StackError
from .proc import cmdline, pid_alive, read_pid
from .settings import CONFIG_TEMPLATES, Settings

JAVA = os.environ.get("JAVA", "java")
# The stack's services carry a developer's or a test's trickle of changes on a shared
# 2-core machine: the JIT's first tier and the serial collector keep their start and
# snapshot from taking CPU the Spark drivers need (docs/decisions/stack-service-jvms.md).
SERVICE_JVM = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def java_opts(settings: Settings, service: str) -> list[str]:
    """JVM options every long-running stack JVM gets (log4j2 config, markers for ps)."""
    return [
        *SERVICE_JVM, "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={CONFIG_TEMPLATES / 'log4j2.properties'}",
        "-Djava.util.logging.manager=org.apache.logging.log4j.jul.LogManager",
        f"-Dcdc.log.file={settings.log_file(service)}",
        f"-Dkafka.logs.dir={settings.logs_dir}",
        f"-Dcdc.stack.service={service}",
        f"-Dcdc.stack.dir={settings.stack_dir}",
    ]


class JvmService:
    """One JVM of the stack: its folder, log files, pid file, and errors that name them."""

    service: str  # set by each subclass

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.base = settings.stack_dir / self.service
        self.log_file = settings.log_file(self.service)
        self.stdout_log = settings.logs_dir / f"{self.service}.stdout.log"
        self.pid_file = settings.pid_file(self.service)
        self.marker = f"-Dcdc.stack.dir={settings.stack_dir}"

    def error(self, message: str) -> StackError:
        return StackError(self.service, message, self.log_file, (self.stdout_log,))

    def pid(self) -> int | None:
        """The pid from the pid file if that process is this stack's JVM of this service."""
        pid = read_pid(self.pid_file)
        if pid and pid_alive(pid, self.marker) and f"-Dcdc.stack.service={self.service}" in cmdline(pid):
            return pid
        return None
