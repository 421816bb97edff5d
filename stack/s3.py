"""An S3-compatible object store on 127.0.0.1: S3Proxy 3.0.0 over a local folder.

Started as ``java -jar .jars/s3proxy/s3proxy.jar --properties s3proxy.properties`` with
the jclouds ``filesystem`` provider: each bucket is a folder of
``$CDC_STACK_DIR/s3/data``. It checks AWS signatures (V2 or V4) against one access key
and secret, taken from ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` when set, else
generated once and kept in ``$CDC_STACK_DIR/s3-credentials.env`` (mode 600, never
committed). Those are the names Hadoop's s3a client reads from the environment, so a
Spark process given them and ``CDC_S3_ENDPOINT`` reads and writes the store.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from .credentials import read_private, write_private
from .jvm import JAVA, JvmService, java_opts
from .proc import pid_alive, port_open, start_detached, stop_pid, wait_until, write_pid
from .settings import HOST, Settings

SERVICE = "s3"
S3PROXY_VERSION = "3.0.0"
ACCESS_KEY = "AWS_ACCESS_KEY_ID"
SECRET_KEY = "AWS_SECRET_ACCESS_KEY"
# S3's rules for bucket names, kept to what every S3 client accepts in a path-style URL.
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class S3Credentials:
    access_key: str
    secret_key: str

    def as_env(self) -> dict[str, str]:
        return {ACCESS_KEY: self.access_key, SECRET_KEY: self.secret_key}

    def __repr__(self) -> str:  # keep the secret out of reprs and test logs
        return f"S3Credentials(access_key={self.access_key!r}, secret_key=***)"


def load_s3_credentials(path: Path) -> S3Credentials:
    """The environment's AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, else the pair kept in
    ``path`` (generated on first use)."""
    if os.environ.get(ACCESS_KEY) and os.environ.get(SECRET_KEY):
        return S3Credentials(os.environ[ACCESS_KEY], os.environ[SECRET_KEY])
    stored = read_private(path)
    if not (stored.get(ACCESS_KEY) and stored.get(SECRET_KEY)):
        stored = {ACCESS_KEY: "cdc" + secrets.token_hex(8), SECRET_KEY: secrets.token_urlsafe(24)}
        write_private(path, stored)
    return S3Credentials(stored[ACCESS_KEY], stored[SECRET_KEY])


def validate_bucket(name: str) -> str:
    if not BUCKET_NAME.match(name) or ".." in name:
        raise ValueError(f"bucket name {name!r} must match {BUCKET_NAME.pattern}")
    return name


class S3Server(JvmService):
    """The stack's S3Proxy: start, stop, and the endpoint and bucket Spark is given."""

    service = SERVICE

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.data_dir = self.base / "data"
        self.props = self.base / "s3proxy.properties"
        self.jar = settings.jars_dir / "s3proxy" / "s3proxy.jar"

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.settings.s3_port}"

    @property
    def credentials(self) -> S3Credentials:
        return load_s3_credentials(self.settings.stack_dir / "s3-credentials.env")

    def running(self) -> bool:
        return self.pid() is not None and port_open(self.settings.s3_port)

    def create_bucket(self, name: str) -> None:
        """A bucket of the filesystem provider is a folder of its data directory."""
        (self.data_dir / validate_bucket(name)).mkdir(parents=True, exist_ok=True)

    def start(self, buckets: tuple[str, ...] = ()) -> None:
        """Start S3Proxy unless it runs, with ``buckets`` created; wait until it answers."""
        for bucket in buckets:
            self.create_bucket(bucket)
        if self.running():
            return
        if not self.jar.exists():
            raise self.error(f"{self.jar} is missing: run `make setup` (jvm/stack/pom.xml fetches S3Proxy)")
        if port_open(self.settings.s3_port):
            raise self.error(f"port {self.settings.s3_port} is in use by another process (set CDC_S3_PORT)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        creds = self.credentials
        # Written with the secret, so readable by this user only (the folder is git-ignored).
        self.props.touch(mode=0o600, exist_ok=True)
        self.props.chmod(0o600)
        self.props.write_text("\n".join([
            f"s3proxy.endpoint={self.endpoint}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={creds.access_key}",
            f"s3proxy.credential={creds.secret_key}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={self.data_dir}",
        ]) + "\n")
        pid = start_detached(
            [JAVA, "-Xms64m", "-Xmx256m", *java_opts(self.settings, SERVICE), "-jar", str(self.jar),
             "--properties", str(self.props)],
            self.stdout_log, cwd=self.base,
        )
        write_pid(self.pid_file, pid)
        wait_until(lambda: port_open(self.settings.s3_port), 60, f"port {self.settings.s3_port}", SERVICE,
                   self.stdout_log, alive=lambda: pid_alive(pid))

    def stop(self) -> None:
        pid = self.pid()
        if pid is not None:
            stop_pid(pid, SERVICE, 30, self.stdout_log)
        self.pid_file.unlink(missing_ok=True)

    def spark_env(self) -> dict[str, str]:
        """The environment a Spark process of this project needs to use the store
        (profiles/profiles.yml reads CDC_S3_*; Hadoop's s3a client the AWS_* pair)."""
        return {**self.credentials.as_env(), "CDC_S3_ENDPOINT": self.endpoint, "CDC_S3_PATH_STYLE_ACCESS": "true"}
