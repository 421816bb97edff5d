"""Sample Debezium change streams from the Pagila dataset (PostgreSQL), a small
invented MariaDB table (`mariadb.movies_db.movies`), an invented outbox
(`outbox.northwind.cdc_events`, and its current document per order
`outbox.northwind.order_outbox`) and a query-based table as a polling JDBC-style source
sends it (`query.northwind.products`), laid out like the Kafka Connect S3
sink writes them:

    <out>/batches/<k>/topics/<topic>/partition=<p>/<topic>+<p>+<startOffset:010d>.json

JSON lines, one Kafka record value per line (`null` = tombstone); line i of a file has
offset startOffset+i; offsets continue across batches per topic-partition.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from testdata import debezium
from testdata.debezium import ENVELOPE, FLATTENED

from . import mariadb, outbox, pagila, polled, workload

# rows as a polling (query-based) source sends them: only the columns
POLLED = "polled"

DEFAULT_SEED = 7

# table -> (shape, JsonConverter schema wrapper?, partitions)
TOPIC_LAYOUT = {
    "actor": (ENVELOPE, True, 1),
    "film": (ENVELOPE, True, 1),
    "language": (ENVELOPE, True, 1),
    "film_actor": (ENVELOPE, False, 2),
    "category": (ENVELOPE, False, 1),
    "address": (ENVELOPE, False, 1),
    "city": (FLATTENED, False, 1),
    "film_category": (FLATTENED, False, 1),
    "country": (FLATTENED, True, 1),
    "staff": (FLATTENED, True, 1),
    "customer": (ENVELOPE, True, 1),
    "inventory": (FLATTENED, False, 1),
    "rental": (FLATTENED, False, 1),
    "payment": (ENVELOPE, False, 2),
    "movies": (ENVELOPE, False, 1),  # MariaDB, JsonConverter schemas.enable=false
    "cdc_events": (ENVELOPE, False, 1),  # the outbox (PostgreSQL), schemas.enable=false
    "order_outbox": (ENVELOPE, False, 1),  # the outbox's current document per order, the same
    "products": (POLLED, False, 1),  # query-based (JDBC-style source, timestamp mode)
}
# every captured table, Pagila's then MariaDB's
TABLES = pagila.TABLES + [mariadb.TABLE]

# records per file before the sink rotates (flush.size); small for streaming batches
# so one batch can hold several files of a topic-partition.
FLUSH_SIZE = {1: 1000, 2: 12, 3: 12}


def generate(pagila_dir: str | Path, out: str | Path, seed: int = DEFAULT_SEED) -> dict:
    schema, rows, schema_sql = pagila.load(pagila_dir)
    enums = {"mpaa_rating": pagila.enum_labels(schema_sql, "mpaa_rating")}
    w = workload.build(schema, rows, seed)
    movies = mariadb.build(seed)
    outbox_events = outbox.build()
    polled_rows = polled.build()

    out = Path(out)
    if (out / "batches").exists():
        shutil.rmtree(out / "batches")
    next_offset: dict[tuple[str, int], int] = {}
    manifest = {
        "generator": "tools.sample_data",
        "seed": seed,
        "connector": {"name": "debezium-postgresql", "version": debezium.CONNECTOR_VERSION,
                      "plugin": "pgoutput", "server_name": debezium.SERVER_NAME,
                      "db": debezium.DB_NAME, "decimal.handling.mode": "precise",
                      "time.precision.mode": "adaptive", "binary.handling.mode": "bytes",
                      "publish_via_partition_root": True,
                      "message.key.columns": "public.payment:payment_id"},
        "connector_mariadb": {"name": "debezium-mariadb", "version": debezium.CONNECTOR_VERSION,
                              "server_name": mariadb.SERVER_NAME, "db": mariadb.DB_NAME,
                              "value.converter.schemas.enable": False},
        "delete_before": "REPLICA IDENTITY DEFAULT: the key, other columns their constant default, "
                         "else the type's zero when NOT NULL, else null; updates have before=null "
                         "(MariaDB: full before images)",
        "tables": {},
        "batches": {},
        "special_cases": w.special + movies.special,
    }
    for t in pagila.TABLES:
        shape, wrapped, parts = TOPIC_LAYOUT[t]
        manifest["tables"][t] = {
            "topic": debezium.topic_for(t), "shape": shape, "schema_wrapper": wrapped,
            "partitions": parts, "primary_key": schema[t]["primary_key"],
            "columns": schema[t]["columns"], "columns_added_later": schema[t]["added_later"],
            "tombstones": shape == ENVELOPE,
        }
    manifest["tables"][mariadb.TABLE] = {
        "topic": mariadb.TOPIC, "shape": ENVELOPE, "schema_wrapper": False, "partitions": 1,
        "primary_key": mariadb.PRIMARY_KEY, "columns": mariadb.COLUMNS,
        "columns_added_later": sorted(mariadb.LATER_COLUMNS), "tombstones": True,
    }
    manifest["tables"][outbox.TABLE] = {
        "topic": outbox.TOPIC, "shape": ENVELOPE, "schema_wrapper": False, "partitions": 1,
        "primary_key": outbox.PRIMARY_KEY, "columns": outbox.COLUMNS, "columns_added_later": [],
        "tombstones": True,
    }
    manifest["tables"][outbox.DOCUMENT_TABLE] = {
        "topic": outbox.DOCUMENT_TOPIC, "shape": ENVELOPE, "schema_wrapper": False, "partitions": 1,
        "primary_key": outbox.DOCUMENT_KEY, "columns": outbox.DOCUMENT_COLUMNS, "columns_added_later": [],
        "tombstones": True,
    }
    manifest["tables"][polled.TABLE] = {
        "topic": polled.TOPIC, "shape": POLLED, "schema_wrapper": False, "partitions": 1,
        "primary_key": polled.PRIMARY_KEY, "columns": polled.COLUMNS, "columns_added_later": [],
        "tombstones": False,
    }

    for batch, events in w.batches.items():
        lines: dict[tuple[str, int], list[str]] = {}
        counts: dict[str, dict[str, int]] = {}

        def add(t: str, topic: str, key: dict, op: str, value: dict) -> None:
            shape, _, parts = TOPIC_LAYOUT[t]
            bucket = lines.setdefault((topic, debezium.key_partition(key, parts)), [])
            bucket.append(debezium.dumps(value))
            c = counts.setdefault(t, {"r": 0, "c": 0, "u": 0, "d": 0, "tombstones": 0})
            c[op] += 1
            if op == "d" and shape == ENVELOPE:
                bucket.append("null")
                c["tombstones"] += 1

        for ev in events:
            t = ev["table"]
            shape, wrapped, parts = TOPIC_LAYOUT[t]
            row = ev["after"] if ev["after"] is not None else ev["before"]
            key = {c: row[c] for c in schema[t]["primary_key"]}
            add(t, debezium.topic_for(t), key, ev["op"], debezium.record_value(shape, wrapped, schema[t], enums, ev))
        for ev in movies.batches[batch]:
            row = ev["after"] if ev["after"] is not None else ev["before"]
            key = {c: row[c] for c in mariadb.PRIMARY_KEY}
            add(mariadb.TABLE, mariadb.TOPIC, key, ev["op"], mariadb.record_value(ev))
        for ev in outbox_events.batches[batch]:
            add(outbox.TABLE, outbox.TOPIC, ev["key"], ev["op"], outbox.record_value(ev))
        for ev in outbox_events.documents[batch]:
            add(outbox.DOCUMENT_TABLE, outbox.DOCUMENT_TOPIC, ev["key"], ev["op"], outbox.record_value(ev))
        for row in polled_rows.batches[batch]:
            add(polled.TABLE, polled.TOPIC, {"product_id": row["product_id"]}, "r", polled.record_value(row))
        files = []
        for (topic, part) in sorted(lines):
            recs = lines[(topic, part)]
            size = FLUSH_SIZE[batch]
            for i in range(0, len(recs), size):
                chunk = recs[i:i + size]
                start = next_offset.get((topic, part), 0)
                rel = (f"batches/{batch}/topics/{topic}/partition={part}/"
                       f"{topic}+{part}+{start:010d}.json")
                path = out / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("\n".join(chunk) + "\n", encoding="utf-8")
                next_offset[(topic, part)] = start + len(chunk)
                files.append({"path": rel, "topic": topic, "partition": part,
                              "start_offset": start, "records": len(chunk)})
        manifest["batches"][str(batch)] = {"dir": f"batches/{batch}", "files": files,
                                           "events": counts}

    manifest["expected_final_rows"] = {t: len(w.state[t]) for t in pagila.TABLES}
    manifest["expected_final_rows"][mariadb.TABLE] = len(movies.state)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n",
                                       encoding="utf-8")
    manifest["_workload"] = w  # in-memory only, for tests
    manifest["_movies"] = movies
    manifest["_outbox"] = outbox_events
    manifest["_polled"] = polled_rows
    return manifest
