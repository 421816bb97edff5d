"""A Hive metastore that several processes share: a database in the stack's PostgreSQL.

Spark's own Hive client talks to the database directly (no metastore service), so the
ingestion, `dbt build` and a reader can run at the same time on one lakehouse, which
the embedded Derby default refuses. ``prepare`` creates the role ``CDC_METASTORE_USER``
and the database ``metastore`` it owns, and writes ``hive-site.xml`` (mode 600: it holds
the password) into ``$CDC_STACK_DIR/spark-conf``. A Spark process started with
``SPARK_CONF_DIR`` there and ``CDC_METASTORE=shared`` (``spark_env``) uses it; the first
one creates the metastore's tables (``datanucleus.schema.autoCreateAll``).

The role's password is ``CDC_METASTORE_PASSWORD`` when set, else generated once and kept
in ``$CDC_STACK_DIR/metastore-credentials.env`` (mode 600, never committed).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from .credentials import check_identifier, check_plain, read_private, write_private, write_private_text
from .errors import StackError
from .postgres import Postgres
from .settings import HOST, Settings

SERVICE = "metastore"
# Hive's metastore classes, read from the package.jdo of the hive-metastore jar PySpark
# ships (Spark's built-in client). DataNucleus registers them when the metastore starts,
# so it creates every table it lacks then, before any transaction: left to first use, it
# creates a table on a second connection while the first holds locks on the tables that
# one references, and PostgreSQL makes the creation wait for ever.
MODEL_JAR_GLOB = "hive-metastore-*.jar"
DATABASE = "metastore"
USER_KEY = "CDC_METASTORE_USER"
PASSWORD_KEY = "CDC_METASTORE_PASSWORD"
DEFAULT_USER = "cdc_metastore"


@dataclass(frozen=True)
class MetastoreCredentials:
    user: str
    password: str

    def __repr__(self) -> str:  # keep the password out of reprs and test logs
        return f"MetastoreCredentials(user={self.user!r}, password=***)"


def load_metastore_credentials(path: Path) -> MetastoreCredentials:
    """The environment's CDC_METASTORE_USER / CDC_METASTORE_PASSWORD, else what ``path``
    keeps (generated on first use)."""
    stored = read_private(path)
    if not stored.get(PASSWORD_KEY):
        stored = {USER_KEY: DEFAULT_USER, PASSWORD_KEY: secrets.token_urlsafe(24)}
        write_private(path, stored)
    user = os.environ.get(USER_KEY) or stored.get(USER_KEY) or DEFAULT_USER
    password = os.environ.get(PASSWORD_KEY) or stored[PASSWORD_KEY]
    return MetastoreCredentials(check_identifier(SERVICE, USER_KEY, user), check_plain(PASSWORD_KEY, password))


def model_classes() -> list[str]:
    """The persistent classes of Hive's metastore model, from PySpark's hive-metastore jar."""
    spec = importlib.util.find_spec("pyspark")
    jars = sorted(Path(spec.submodule_search_locations[0], "jars").glob(MODEL_JAR_GLOB)) if spec else []
    if not jars:
        raise StackError(SERVICE, f"no {MODEL_JAR_GLOB} among PySpark's jars: run `make setup`")
    with zipfile.ZipFile(jars[-1]) as jar:
        metadata = ElementTree.fromstring(jar.read("package.jdo"))
    return [f"{package.get('name')}.{cls.get('name')}"
            for package in metadata.iter("package") for cls in package.iter("class")]


class Metastore:
    """The metastore database in the stack's PostgreSQL and the Spark settings that use it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.postgres = Postgres(settings)
        self.conf_dir = settings.stack_dir / "spark-conf"
        self.credentials = load_metastore_credentials(settings.stack_dir / "metastore-credentials.env")

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{HOST}:{self.settings.pg_port}/{DATABASE}"

    def prepare(self) -> None:
        """Role, database and hive-site.xml (idempotent; PostgreSQL must run)."""
        user = self.credentials.user
        self.postgres.ensure_role(user, self.credentials.password)
        if self.postgres.scalar(f"select 1 from pg_database where datname = '{DATABASE}'", db="postgres") != "1":
            self.postgres.psql(f'create database {DATABASE} owner "{user}"', db="postgres")
        self.write_hive_site()

    def write_hive_site(self) -> Path:
        properties = {
            "javax.jdo.option.ConnectionURL": self.jdbc_url,
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": self.credentials.user,
            "javax.jdo.option.ConnectionPassword": self.credentials.password,
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
            "datanucleus.autoStartMechanism": "Classes",
            "datanucleus.autoStartClassNames": ",".join(model_classes()),
        }
        body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                       for k, v in properties.items())
        target = self.conf_dir / "hive-site.xml"
        write_private_text(target, '<?xml version="1.0"?>\n<!-- written by `python -m stack`: holds a password -->\n'
                                   f"<configuration>\n{body}</configuration>\n")
        return target

    def spark_env(self) -> dict[str, str]:
        """The environment a Spark process of this project needs to use this metastore
        (profiles/profiles.yml reads CDC_METASTORE; spark-submit puts SPARK_CONF_DIR on
        the driver's class path, where Hive finds hive-site.xml)."""
        return {"CDC_METASTORE": "shared", "SPARK_CONF_DIR": str(self.conf_dir)}
