"""A Spark standalone cluster on 127.0.0.1 from the pinned PySpark: a master, two
workers and a Spark Thrift Server with Hudi, all sharing the stack's metastore.

Components (``python -m stack up --only spark-master,spark-workers,thrift``):

- ``spark-master``: ``spark-class org.apache.spark.deploy.master.Master`` on
  ``CDC_SPARK_MASTER_PORT`` (UI and its ``/json`` API on ``CDC_SPARK_MASTER_UI_PORT``);
- ``spark-workers``: two ``org.apache.spark.deploy.worker.Worker`` processes, each with
  its work dir under ``$CDC_STACK_DIR/spark-worker-<n>/work`` and its UI on
  ``CDC_SPARK_WORKER_UI_PORT`` (+1 for the second);
- ``thrift``: ``spark-submit --class ...HiveThriftServer2`` on the master, port
  ``CDC_THRIFT_PORT``, with the Hudi bundle and the session settings of the ``local``
  target in ``profiles/profiles.yml``, the shared metastore (``metastore`` component,
  ``SPARK_CONF_DIR``) and the lakehouse's warehouse. It needs ``metastore``, so asking
  for it starts PostgreSQL and the metastore too. With ``CDC_THRIFT_MASTER`` set (for
  example ``local[1]``) it runs on that master instead, without the cluster: a
  server for clients such as dashboards beside an embedded-style setup, and for the
  tests that read through one while builds run elsewhere.

Each worker offers ``CDC_SPARK_WORKER_CORES`` (default 2) cores and every application
this module starts takes at most ``CDC_SPARK_APP_CORES`` (default 2) of them, one
executor per worker: the Thrift Server and an ingestion then run on the cluster at once
(a standalone application takes every free core unless capped).

Settings that are not Spark's (``hoodie.*``) reach Hudi through ``hudi-defaults.conf``
in ``$CDC_STACK_DIR/hudi-conf`` (``HUDI_CONF_DIR``): ``spark-submit`` drops them.

Only the standard library is imported at module level: ``python -m stack down`` runs
under the system Python.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path
from unittest import mock

from .errors import StackError
from .jvm import JvmService
from .metastore import Metastore
from .proc import cmdline, pid_alive, port_open, start_detached, stop_pid, wait_until, write_pid
from .settings import HOST, REPO, Settings, _port, load_settings

COMPONENTS = ("spark-master", "spark-workers", "thrift")
WORKERS = 2
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
THRIFT_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
# Keys of the `local` target a cluster application must not take over: the master and
# driver memory are the cluster's, and the class data sharing archive is built for the
# embedded PySpark driver's class path, not for other JVMs.
LOCAL_ONLY = ("spark.master", "spark.app.name", "spark.driver.memory")


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        raise StackError("spark", f"{name}={raw!r} is not a number") from None


def spark_home() -> Path:
    """SPARK_HOME, else the pinned PySpark package (it ships bin/spark-class and the jars)."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    spec = importlib.util.find_spec("pyspark")
    if spec and spec.submodule_search_locations:
        return Path(spec.submodule_search_locations[0])
    found = sorted(REPO.glob(".venv/lib/python3*/site-packages/pyspark"))
    if not found:
        raise StackError("spark", "no PySpark found (run `make setup`, or set SPARK_HOME)")
    return found[-1]


def master_port() -> int:
    return _port("CDC_SPARK_MASTER_PORT")


def master_url() -> str:
    return f"spark://{HOST}:{master_port()}"


def master_ui_url() -> str:
    return f"http://{HOST}:{_port('CDC_SPARK_MASTER_UI_PORT')}"


def thrift_port() -> int:
    return _port("CDC_THRIFT_PORT")


def master_state(timeout: float = 5) -> dict | None:
    """The master's `/json` answer (workers, applications), or None while it cannot answer."""
    try:
        with urllib.request.urlopen(master_ui_url() + "/json", timeout=timeout) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def warehouse_dir() -> str:
    """The lakehouse's warehouse, as the `local` target computes it (absolute)."""
    explicit = os.environ.get("CDC_WAREHOUSE_DIR", "")
    if explicit:
        return explicit
    lakehouse = Path(os.environ.get("CDC_LAKEHOUSE_DIR") or REPO / "lakehouse")
    return str((REPO / lakehouse).resolve() / "warehouse")


def thrift_master() -> str:
    """The master the Thrift Server runs on: CDC_THRIFT_MASTER, else the stack's cluster."""
    return os.environ.get("CDC_THRIFT_MASTER") or master_url()


def thrift_env() -> dict[str, str]:
    """What the `thrift` target of profiles/profiles.yml needs to reach the stack's server."""
    return {"CDC_THRIFT_HOST": HOST, "CDC_THRIFT_PORT": str(thrift_port()), "CDC_THRIFT_AUTH": "NONE",
            "CDC_THRIFT_USER": os.environ.get("CDC_THRIFT_USER") or "cdc"}


def application_settings(settings: Settings) -> tuple[dict[str, str], dict[str, str]]:
    """(Spark settings, Hudi settings) of a cluster application: the `local` target's,
    rendered with the shared metastore, on the cluster's cores, with absolute paths."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from core.spark import profile_spark_settings  # needs the venv: PyYAML, Jinja

    with mock.patch.dict(os.environ, {"CDC_METASTORE": "shared"}):
        rendered = profile_spark_settings("local")
    spark = {k: v for k, v in rendered.items() if k.startswith("spark.") and k not in LOCAL_ONLY}
    hudi = {k: v for k, v in rendered.items() if not k.startswith("spark.")}
    spark["spark.jars"] = ",".join(str(REPO / j) for j in spark["spark.jars"].split(",") if j)
    spark["spark.driver.extraClassPath"] = ":".join(
        str(REPO / j) for j in spark["spark.driver.extraClassPath"].split(":") if j)
    spark["spark.driver.extraJavaOptions"] = re.sub(
        r"\s*-XX:SharedArchiveFile=\S+", "", spark["spark.driver.extraJavaOptions"]).strip()
    spark["spark.sql.warehouse.dir"] = warehouse_dir()
    spark["spark.cores.max"] = str(_int_env("CDC_SPARK_APP_CORES", 2))
    spark["spark.executor.cores"] = "1"
    spark["spark.executor.memory"] = os.environ.get("CDC_SPARK_EXECUTOR_MEMORY", "1g")
    # Executors start Python workers with the venv's interpreter (it has the project installed).
    spark["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON") or sys.executable
    spark["spark.executorEnv.TZ"] = "UTC"
    return spark, hudi


def write_hudi_conf(settings: Settings, hudi: dict[str, str]) -> Path:
    conf_dir = settings.stack_dir / "hudi-conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "hudi-defaults.conf").write_text(
        "# written by `python -m stack`: the Hudi settings of profiles/profiles.yml's local target\n"
        + "".join(f"{k}={v}\n" for k, v in sorted(hudi.items())))
    return conf_dir


def submit_command(settings: Settings, app_args: list[str], name: str,
                   driver_memory: str = "2g") -> tuple[list[str], dict[str, str]]:
    """spark-submit of `python -m <app_args...>` to the stack's master (client mode), and
    its environment: `tools/spark_submit_module.py` runs the module as `python -m` would."""
    spark, hudi = application_settings(settings)
    hudi_conf = write_hudi_conf(settings, hudi)
    metastore = Metastore(settings)
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", master_url(), "--name", name,
           "--driver-memory", driver_memory]
    for key, value in spark.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(REPO / "tools" / "spark_submit_module.py"), *app_args]
    env = {**os.environ, **metastore.spark_env(), "HUDI_CONF_DIR": str(hudi_conf),
           "PYSPARK_PYTHON": spark["spark.pyspark.python"], "SPARK_LOCAL_IP": HOST,
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    return cmd, env


class _SparkDaemon(JvmService):
    """A Spark JVM the stack started: `spark-class` execs java, so the pid is the JVM's."""

    def daemon_env(self) -> dict[str, str]:
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_NO_DAEMONIZE": "1",
               "SPARK_DAEMON_MEMORY": os.environ.get("CDC_SPARK_DAEMON_MEMORY", "512m"),
               "SPARK_DAEMON_JAVA_OPTS": f"-Dcdc.stack.service={self.service} {self.marker}",
               "SPARK_LOG_DIR": str(self.settings.logs_dir), "SPARK_LOCAL_IP": HOST}
        env.pop("SPARK_CONF_DIR", None)  # daemons need no Hive settings
        return env

    def running(self) -> bool:
        return self.pid() is not None

    def stop(self) -> None:
        pid = self.pid()
        if pid is not None:
            stop_pid(pid, self.service, 30, self.log_file)
        self.pid_file.unlink(missing_ok=True)

    def _spawn(self, cmd: list[str], env: dict[str, str], cwd: Path) -> int:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        cwd.mkdir(parents=True, exist_ok=True)
        pid = start_detached(cmd, self.log_file, env=env, cwd=cwd)
        write_pid(self.pid_file, pid)
        return pid


class SparkMaster(_SparkDaemon):
    service = "spark-master"

    def ready(self) -> bool:
        state = master_state()
        return bool(state) and state.get("status") == "ALIVE"

    def start(self, timeout: float = 90) -> None:
        if self.running():
            wait_until(self.ready, timeout, f"GET {master_ui_url()}/json", self.service, self.log_file)
            return
        for port in (master_port(), _port("CDC_SPARK_MASTER_UI_PORT")):
            if port_open(port):
                raise self.error(f"port {port} is in use by another process "
                                 "(set CDC_SPARK_MASTER_PORT / CDC_SPARK_MASTER_UI_PORT)")
        pid = self._spawn([str(spark_home() / "bin" / "spark-class"), MASTER_CLASS, "--host", HOST,
                           "--port", str(master_port()), "--webui-port", str(_port("CDC_SPARK_MASTER_UI_PORT"))],
                          self.daemon_env(), self.base)
        wait_until(self.ready, timeout, f"GET {master_ui_url()}/json with status ALIVE", self.service,
                   self.log_file, alive=lambda: pid_alive(pid))


class SparkWorker(_SparkDaemon):
    def __init__(self, settings: Settings, number: int) -> None:
        self.service = f"spark-worker-{number}"
        super().__init__(settings)
        self.number = number
        self.work_dir = self.base / "work"
        self.ui_port = _port("CDC_SPARK_WORKER_UI_PORT") + number - 1

    def start(self) -> int:
        """Start the worker unless it runs; its registration is awaited by `start_workers`."""
        if self.running():
            return self.pid() or 0
        if port_open(self.ui_port):
            raise self.error(f"port {self.ui_port} is in use by another process (set CDC_SPARK_WORKER_UI_PORT)")
        return self._spawn([str(spark_home() / "bin" / "spark-class"), WORKER_CLASS, master_url(),
                            "--host", HOST, "--webui-port", str(self.ui_port),
                            "--cores", str(_int_env("CDC_SPARK_WORKER_CORES", 2)),
                            "--memory", os.environ.get("CDC_SPARK_WORKER_MEMORY", "3g"),
                            "--work-dir", str(self.work_dir)],
                           self.daemon_env(), self.base)


def workers(settings: Settings) -> list[SparkWorker]:
    return [SparkWorker(settings, n) for n in range(1, WORKERS + 1)]


def alive_workers(state: dict | None = None) -> list[dict]:
    state = state if state is not None else master_state()
    return [w for w in (state or {}).get("workers", []) if w.get("state") == "ALIVE"]


def start_workers(settings: Settings, timeout: float = 90) -> None:
    group = workers(settings)
    pids = [w.start() for w in group]
    # A restarted worker registers under a new id while the master still lists the old
    # one as DEAD or UNKNOWN: count only the ALIVE ones on this stack's UI ports.
    ports = {w.ui_port for w in group}

    def registered() -> bool:
        return {int(w.get("webuiaddress", ":0").rsplit(":", 1)[-1]) for w in alive_workers()} >= ports

    wait_until(registered, timeout, f"{WORKERS} ALIVE workers in {master_ui_url()}/json", "spark-workers",
               group[-1].log_file, alive=lambda: all(pid_alive(p) for p in pids))


class ThriftServer(_SparkDaemon):
    service = "thrift"

    def ready(self) -> bool:
        """True once a HiveServer2 session opens and answers `select 1`."""
        if not port_open(thrift_port()):
            return False
        try:
            from pyhive import hive  # the venv's; a refused or half-open session is transient
            env = thrift_env()
            with hive.connect(host=HOST, port=thrift_port(), username=env["CDC_THRIFT_USER"], auth="NONE") as conn:
                cursor = conn.cursor()
                cursor.execute("select 1")
                return cursor.fetchall() == [(1,)]
        except ImportError:
            raise self.error("PyHive is missing: run `make setup` (dbt-spark[PyHive] in pyproject.toml)") from None
        except Exception:  # noqa: BLE001 - thrift, SASL and socket errors while the server starts
            return False

    def start(self, timeout: float = 240) -> None:
        if self.running():
            wait_until(self.ready, timeout, f"a HiveServer2 session on {HOST}:{thrift_port()}", self.service,
                       self.log_file)
            return
        if port_open(thrift_port()):
            raise self.error(f"port {thrift_port()} is in use by another process (set CDC_THRIFT_PORT)")
        metastore = Metastore(self.settings)
        if not (metastore.conf_dir / "hive-site.xml").is_file():
            raise self.error(f"{metastore.conf_dir}/hive-site.xml is missing: start the `metastore` component first")
        spark, hudi = application_settings(self.settings)
        spark["spark.driver.extraJavaOptions"] += f" -Dcdc.stack.service={self.service} {self.marker}"
        spark["spark.driver.memory"] = os.environ.get("CDC_THRIFT_DRIVER_MEMORY", "2g")
        spark.pop("spark.pyspark.python", None)
        # The jars on the server's own class path too: its Hive sessions resolve Hudi's
        # catalog classes outside the loader of spark.jars (ClassNotFoundException
        # HoodieInternalV2Table otherwise).
        spark["spark.driver.extraClassPath"] = ":".join(
            [spark["spark.driver.extraClassPath"], *spark["spark.jars"].split(",")])
        cmd = [str(spark_home() / "bin" / "spark-submit"), "--class", THRIFT_CLASS, "--master", thrift_master(),
               "--name", "cdc-thrift-server"]
        for key, value in spark.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += ["spark-internal", "--hiveconf", f"hive.server2.thrift.bind.host={HOST}",
                "--hiveconf", f"hive.server2.thrift.port={thrift_port()}",
                "--hiveconf", "hive.server2.authentication=NONE",
                "--hiveconf", "hive.server2.transport.mode=binary"]
        env = {**self.daemon_env(), **metastore.spark_env(), "HUDI_CONF_DIR": str(write_hudi_conf(self.settings, hudi))}
        env.pop("SPARK_DAEMON_JAVA_OPTS", None)
        # spark-submit sizes the Thrift Server's heap from SPARK_DAEMON_MEMORY, not spark.driver.memory.
        env["SPARK_DAEMON_MEMORY"] = spark["spark.driver.memory"]
        pid = self._spawn(cmd, env, self.base)
        wait_until(self.ready, timeout, f"a HiveServer2 session on {HOST}:{thrift_port()}", self.service,
                   self.log_file, interval=2, alive=lambda: pid_alive(pid))


def normalize(components: list[str]) -> tuple[list[str], list[str]]:
    """(stack components, cluster components) of an `--only` list, with what each needs:
    workers need the master, the Thrift Server the workers and the shared metastore."""
    wanted = {c.strip().lower() for c in components if c.strip()}
    cluster = wanted & set(COMPONENTS)
    if "thrift" in cluster:
        if not os.environ.get("CDC_THRIFT_MASTER"):
            cluster |= {"spark-workers"}
        wanted.add("metastore")
    if "spark-workers" in cluster:
        cluster.add("spark-master")
    return sorted(wanted - set(COMPONENTS)), [c for c in COMPONENTS if c in cluster]


def up(components: list[str] | tuple[str, ...] = COMPONENTS) -> dict[str, str]:
    """Start the cluster components asked for (the metastore must be up for `thrift`);
    reuse what runs. Returns what a client needs: the master URL, the thrift target's env."""
    settings = load_settings()
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    if "spark-master" in components:
        SparkMaster(settings).start()
    if "spark-workers" in components:
        start_workers(settings)
    if "thrift" in components:
        ThriftServer(settings).start()
    result = {"CDC_SPARK_MASTER": master_url(), "master_ui": master_ui_url()}
    if "thrift" in components:
        result.update(thrift_env())
    return result


def down() -> None:
    """Stop the Thrift Server, the workers (and their executors: same process group) and
    the master; safe when nothing runs. Raises if one of their processes is left."""
    settings = load_settings()
    errors = []
    for service in (ThriftServer(settings), *reversed(workers(settings)), SparkMaster(settings)):
        try:
            service.stop()
        except StackError as exc:
            errors.append(str(exc))
    left = leftover_processes(settings)
    if left:
        errors.append("processes still running: " + "; ".join(f"{p} {c[:200]}" for p, c in left))
    if errors:
        raise StackError("spark", "down did not stop everything:\n" + "\n".join(errors))


def leftover_processes(settings: Settings | None = None) -> list[tuple[int, str]]:
    """Live processes of this stack's cluster: its daemons (by their marker) and executors
    (their working directory is under a worker's work dir)."""
    settings = settings or load_settings()
    stack = str(settings.stack_dir.resolve())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid() or not pid_alive(int(entry.name)):
            continue
        line = cmdline(int(entry.name))
        try:
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            cwd = ""
        daemon = f"-Dcdc.stack.dir={stack}" in line and "-Dcdc.stack.service=spark-" in line
        daemon = daemon or ("-Dcdc.stack.service=thrift" in line and f"-Dcdc.stack.dir={stack}" in line)
        executor = cwd.startswith(stack + os.sep + "spark-worker-")
        if daemon or executor:
            found.append((int(entry.name), line))
    return found


def purge_work_dirs(settings: Settings) -> None:
    """Delete the workers' work dirs (executor logs and fetched jars of past applications)."""
    for worker in workers(settings):
        shutil.rmtree(worker.work_dir, ignore_errors=True)
