"""Sample Debezium change streams from the Pagila dataset, laid out like the
Kafka Connect S3 sink writes them:

    <out>/batches/<k>/topics/<topic>/partition=<p>/<topic>+<p>+<startOffset:010d>.json

JSON lines, one Kafka record value per line (`null` = tombstone); line i of a file has
offset startOffset+i; offsets continue across batches per topic-partition.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from . import debezium, pagila, workload
from .debezium import ENVELOPE, FLATTENED

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
}

# records per file before the sink rotates (flush.size); small for streaming batches
# so one batch can hold several files of a topic-partition.
FLUSH_SIZE = {1: 1000, 2: 12, 3: 12}


def generate(pagila_dir: str | Path, out: str | Path, seed: int = DEFAULT_SEED) -> dict:
    schema, rows, schema_sql = pagila.load(pagila_dir)
    enums = {"mpaa_rating": pagila.enum_labels(schema_sql, "mpaa_rating")}
    w = workload.build(schema, rows, seed)

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
                      "time.precision.mode": "adaptive"},
        "delete_before": "full row (as REPLICA IDENTITY FULL); updates have before=null",
        "tables": {},
        "batches": {},
        "special_cases": w.special,
    }
    for t in pagila.TABLES:
        shape, wrapped, parts = TOPIC_LAYOUT[t]
        manifest["tables"][t] = {
            "topic": debezium.topic_for(t), "shape": shape, "schema_wrapper": wrapped,
            "partitions": parts, "primary_key": schema[t]["primary_key"],
            "columns": schema[t]["columns"],
            "tombstones": shape == ENVELOPE,
        }

    for batch, events in w.batches.items():
        lines: dict[tuple[str, int], list[str]] = {}
        counts: dict[str, dict[str, int]] = {}
        for ev in events:
            t = ev["table"]
            shape, wrapped, parts = TOPIC_LAYOUT[t]
            row = ev["after"] if ev["after"] is not None else ev["before"]
            key = {c: row[c] for c in schema[t]["primary_key"]}
            tp = (debezium.topic_for(t), debezium.key_partition(key, parts))
            value = debezium.record_value(shape, wrapped, schema[t], enums, ev)
            bucket = lines.setdefault(tp, [])
            bucket.append(debezium.dumps(value))
            c = counts.setdefault(t, {"r": 0, "c": 0, "u": 0, "d": 0, "tombstones": 0})
            c[ev["op"]] += 1
            if ev["op"] == "d" and shape == ENVELOPE:
                bucket.append("null")
                c["tombstones"] += 1
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
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n",
                                       encoding="utf-8")
    manifest["_workload"] = w  # in-memory only, for tests
    return manifest
