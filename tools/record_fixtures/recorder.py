"""Record real Debezium output of the four connectors for the scripted workload.

Starts the project's stack (``stack``) in its own folder and ports, registers the
four connectors (the two PostgreSQL ones with ``snapshot.mode=no_data``, so no Pagila
row is ever read), runs ``workload.py``, waits until Debezium caught up, reads every
record of the data topics byte for byte, writes them as JSON lines, and stops the stack.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from stack.settings import ports_above_defaults

from . import workload

# The recorder's own stack: never the default build/stack, never another engineer's.
DEFAULT_STACK_DIR = Path("/tmp/fixture-stack")
DEFAULT_PORTS = {name: int(port) for name, port in ports_above_defaults(20).items()}
MARKER = ".record-fixtures"  # a stack dir the recorder made (so it may purge it)

# connector -> (source, topic prefix of its tables, snapshot override)
CONNECTORS: dict[str, dict[str, Any]] = {
    "pagila-envelope": {"source": "postgres", "topic_prefix": "pagila.public.", "shape": "envelope",
                        "overrides": {"snapshot.mode": "no_data"}},
    "pagila-flattened": {"source": "postgres", "topic_prefix": "pagila_flat.public.", "shape": "flattened",
                         "overrides": {"snapshot.mode": "no_data"}},
    "movies-envelope": {"source": "mariadb", "topic_prefix": "mariadb.movies_db.", "shape": "envelope",
                        "overrides": {}},
    "movies-flattened": {"source": "mariadb", "topic_prefix": "mariadb_flat.movies_db.", "shape": "flattened",
                         "overrides": {}},
}
DATA_TOPICS = r"(pagila|pagila_flat)\.public\..+|(mariadb|mariadb_flat)\.movies_db\..+"

@dataclass
class Recording:
    out: Path
    seconds: dict[str, float]
    counts: dict[str, int]  # fixture file (relative) -> records
    versions: dict[str, str]
    pg_timezone: str
    recorded_at: str


def configure_environment(stack_dir: Path, ports: dict[str, int]) -> None:
    """Point ``stack`` at the recorder's own folder and ports (whatever the caller had set)."""
    os.environ["CDC_STACK_DIR"] = str(stack_dir)
    for name, port in ports.items():
        os.environ[name] = str(port)


def prepare_stack_dir(stack_dir: Path) -> None:
    """A fresh, world-traversable folder (PostgreSQL runs as the postgres user)."""
    import stack

    if stack_dir.exists():
        if not (stack_dir / MARKER).exists() and any(stack_dir.iterdir()):
            raise SystemExit(f"{stack_dir} exists and was not made by the recorder: refusing to purge it")
        stack.down(purge=True)  # a previous recording left it (or was interrupted)
    stack_dir.mkdir(parents=True, exist_ok=True)
    (stack_dir / MARKER).write_text("made by python -m tools.record_fixtures; purged on the next run\n")
    os.chmod(stack_dir, 0o755)


def read_all_spark(offsets: dict[tuple[str, int], int]) -> dict[str, list[dict[str, Any]]]:
    """Every record of the data topics in one Spark batch read: key and value bytes decoded
    as UTF-8, exactly as Kafka holds them. A bare session (no Hudi, no metastore) with the
    jars the project profile lists."""
    from pyspark.sql import SparkSession

    from core.spark import profile_spark_settings
    from stack.settings import REPO, load_settings

    jars = [REPO / jar for jar in profile_spark_settings("local")["spark.jars"].split(",")]
    missing = [str(j) for j in jars if not j.exists()]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: run `make setup`")
    spark = (
        SparkSession.builder.master("local[1]").appName("record-fixtures")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    try:
        spark.sparkContext.setLogLevel("ERROR")
        rows = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", load_settings().kafka_bootstrap)
            .option("subscribe", ",".join(sorted({topic for topic, _ in offsets})))
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
            .select("topic", "partition", "offset", "key", "value")
            .collect()
        )
    finally:
        spark.stop()
    records: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"])):
        records.setdefault(row["topic"], []).append({
            "topic": row["topic"],
            "partition": int(row["partition"]),
            "offset": int(row["offset"]),
            "key": None if row["key"] is None else bytes(row["key"]).decode("utf-8"),
            "value": None if row["value"] is None else bytes(row["value"]).decode("utf-8"),
        })
    for (topic, partition), end in offsets.items():
        got = [r["offset"] for r in records.get(topic, []) if r["partition"] == partition]
        if got != list(range(end)):
            raise RuntimeError(f"{topic}:{partition}: read offsets {got[:20]}..., expected 0..{end - 1}")
    return records


def expected_offsets(snapshot_rows: int) -> dict[tuple[str, int], int]:
    """How many records each data topic must hold once Debezium has published the workload:
    one per row change, plus a tombstone after each delete in the envelope topics. A
    topic with more (a snapshot of Pagila, a stray change) fails the recording."""
    changes = {
        "postgres": [(s.table, c.op) for _, statements in workload.POSTGRES for s in statements for c in s.changes],
        "mariadb": [("movies", "r")] * snapshot_rows
        + [(s.table, c.op) for _, statements in workload.MARIADB for s in statements for c in s.changes],
    }
    counts: dict[tuple[str, int], int] = {}
    for connector in CONNECTORS.values():
        for table, op in changes[connector["source"]]:
            topic = (connector["topic_prefix"] + str(table), 0)
            counts[topic] = counts.get(topic, 0) + (2 if op == "d" and connector["shape"] == "envelope" else 1)
    return counts


def wait_for_workload(expected: dict[tuple[str, int], int], attempts: int = 6) -> dict[tuple[str, int], int]:
    """stack.wait_caught_up until the data topics hold exactly the expected records."""
    import stack

    offsets: dict[tuple[str, int], int] = {}
    for _ in range(attempts):
        offsets = stack.wait_caught_up(DATA_TOPICS, quiet_seconds=5)
        extra = {t: (n, expected.get(t, 0)) for t, n in offsets.items() if n > expected.get(t, 0)}
        if extra:
            raise RuntimeError(f"topics hold more records than the workload made (got, expected): {extra}")
        if offsets == expected:
            return offsets
    missing = {t: (offsets.get(t, 0), n) for t, n in expected.items() if offsets.get(t, 0) != n}
    raise RuntimeError(f"Debezium did not publish the whole workload (got, expected): {missing}")


def run_workload() -> None:
    import stack

    for script in workload.postgres_scripts():
        stack.psql(script)
    for script in workload.mariadb_scripts():
        stack.mariadb(script)


def mariadb_snapshot_rows() -> list[dict[str, Any]]:
    """The rows the stack seeds into movies_db.movies (the MariaDB connectors snapshot them)."""
    import stack

    rows = stack.mariadb("select movie_id, title, release_year from movies order by movie_id")
    return [{"movie_id": int(i), "title": t, "release_year": None if y is None else int(y)} for i, t, y in rows]


def write_workload(out: Path, snapshot: list[dict[str, Any]]) -> None:
    document = {
        "description": "The statements the fixtures were recorded from, in commit order. Each transaction's "
                       "statements ran in one transaction; 'changes' are the row changes each statement makes "
                       "(op c/u/d/r, primary key, the columns it sets). Value forms: see tools/record_fixtures/"
                       "workload.py (numeric/date/timestamp/timestamptz/bytea/tsrange/tstzrange/text[] are "
                       "tagged objects; 'big' is an md5-built value: text = md5(1)||..||md5(n), "
                       "text[] = [md5(i)||md5(-i) for i in 1..n], "
                       "bytea = the bytes of the hex text md5(1)||..||md5(n)).",
        "connectors": {
            name: {"source": c["source"], "shape": c["shape"], "topic_prefix": c["topic_prefix"],
                   "config_overrides": c["overrides"]}
            for name, c in CONNECTORS.items()
        },
        "primary_keys": {
            "postgres": {t: list(k) for t, k in workload.PG_KEYS.items()},
            "mariadb": {"movies": list(workload.MOVIE_KEY)},
        },
        "postgres": {
            "database": "pagila", "schema": "public",
            "set_by_update_triggers": workload.PG_SET_BY_UPDATE_TRIGGERS,
            "generated_columns": workload.PG_GENERATED_COLUMNS,
            "transactions": workload.transactions_json(workload.POSTGRES),
        },
        "mariadb": {
            "database": "movies_db",
            "snapshot": {
                "label": "initial snapshot of the rows the stack seeds (stack/mariadb.py), before the workload",
                "statements": [{"sql": None, "table": "movies",
                                "changes": [{"op": "r", "key": {"movie_id": r["movie_id"]}, "set": r}
                                            for r in snapshot]}],
            },
            "transactions": workload.transactions_json(workload.MARIADB),
        },
    }
    (out / "workload.json").write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")


def write_fixtures(out: Path, records: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for connector in CONNECTORS:
        folder = out / connector
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for topic, topic_records in sorted(records.get(connector, {}).items()):
            path = folder / f"{topic}.jsonl"
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in topic_records))
            counts[f"{connector}/{path.name}"] = len(topic_records)
    return counts


def record(out: Path, stack_dir: Path = DEFAULT_STACK_DIR, ports: dict[str, int] | None = None,
           keep_stack: bool = False) -> Recording:
    configure_environment(stack_dir, {**DEFAULT_PORTS, **(ports or {})})
    import stack

    seconds: dict[str, float] = {}
    started = time.monotonic()

    def lap(name: str, since: float) -> float:
        now = time.monotonic()
        seconds[name] = round(now - since, 1)
        print(f"  {name}: {seconds[name]:.1f}s", flush=True)
        return now

    prepare_stack_dir(stack_dir)
    t = time.monotonic()
    try:
        info = stack.up()
        t = lap("stack up (fresh: initdb, Pagila, MariaDB, Kafka, Connect)", t)
        versions = {
            "debezium": info.versions["debezium"],
            "kafka": info.versions["kafka"],
            "postgresql": stack.psql("show server_version")[0][0] or "",
            "mariadb": stack.mariadb("select version()")[0][0] or "",
        }
        pg_timezone = stack.psql("show timezone")[0][0] or ""
        snapshot = mariadb_snapshot_rows()
        for name, connector in CONNECTORS.items():
            stack.register(name, overrides=connector["overrides"])
        stack.wait_caught_up(DATA_TOPICS, quiet_seconds=3)
        t = lap("register 4 connectors + caught up", t)
        run_workload()
        t = lap("workload", t)
        offsets = wait_for_workload(expected_offsets(len(snapshot)))
        t = lap("caught up after the workload", t)
        by_topic = read_all_spark(offsets)
        records: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for topic, topic_records in by_topic.items():
            connector = next(n for n, c in CONNECTORS.items() if topic.startswith(c["topic_prefix"]))
            records.setdefault(connector, {})[topic] = topic_records
        t = lap(f"read {sum(offsets.values())} records of {len(offsets)} topic partitions", t)
    finally:
        if not keep_stack:
            stack.down(purge=True)
            lap("stack down --purge", t)
    out.mkdir(parents=True, exist_ok=True)
    counts = write_fixtures(out, records)
    write_workload(out, snapshot)
    seconds["total"] = round(time.monotonic() - started, 1)
    return Recording(out=out, seconds=seconds, counts=counts, versions=versions, pg_timezone=pg_timezone,
                     recorded_at=datetime.now(timezone.utc).strftime("%Y-%m-%d"))

