"""python -m tools.record_fixtures.avro --out tests/fixtures/debezium-avro

Records the Avro connectors' output (`pagila-avro`, `movies-avro`) for the scripted
workload from a stack that already runs (the CDC_* variables name it) with both
registered and caught up, and Pagila's workload ids (>= 95000) not used yet. Only the
records after the end offsets read before the workload are kept for PostgreSQL (no
Pagila data), all of them for MariaDB (six rows of the project's own). Writes
<out>/<connector>/<topic>.jsonl (key and value bytes in base64, and `json_key` /
`json_value`: the same event as the JSON connector of the same source wrote it, text as
Kafka holds it), <out>/schemas.json (every schema id the records name -> its schema
text, from the registry's Confluent-compatible API) and leaves the stack running.
The JSON connectors (`pagila-envelope`, `movies-envelope`) must be registered too.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import struct
import sys
import urllib.request
from pathlib import Path
from typing import Any

from . import workload

CONNECTORS = {"pagila-avro": r"pagila_avro\.public\..+", "movies-avro": r"mariadb_avro\.movies_db\..+"}
# Avro topic prefix -> the JSON connector's prefix for the same source
TWINS = {"pagila_avro.": "pagila.", "mariadb_avro.": "mariadb."}


def twin(topic: str) -> str:
    prefix = next(p for p in TWINS if topic.startswith(p))
    return TWINS[prefix] + topic[len(prefix):]
KEEP_SNAPSHOT = {"movies-avro"}


def read_range(bootstrap: str, topic: str, partition: int, start: int, end: int) -> list[dict[str, Any]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "record-fixtures-avro",
                         "enable.auto.commit": False})
    records: list[dict[str, Any]] = []
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        while len(records) < end - start:
            message = consumer.poll(30)
            if message is None:
                raise RuntimeError(f"{topic}:{partition}: no record after offset {start + len(records)}")
            if message.error():
                raise RuntimeError(f"{topic}:{partition}: {message.error()}")

            def b64(data: bytes | None) -> str | None:
                return None if data is None else base64.b64encode(data).decode("ascii")

            records.append({"topic": topic, "partition": partition, "offset": message.offset(),
                            "key": b64(message.key()), "value": b64(message.value())})
    finally:
        consumer.close()
    return records


def schema_ids(records: list[dict[str, Any]]) -> set[int]:
    ids = set()
    for record in records:
        for side in ("key", "value"):
            if record[side] is not None:
                data = base64.b64decode(record[side])
                ids.add(struct.unpack(">I", data[1:5])[0])
    return ids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.record_fixtures.avro", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    import stack

    info = stack.info()
    data_topics = "|".join(f"({p})" for p in CONNECTORS.values()) + r"|(pagila\.public|mariadb\.movies_db)\..+"
    before = stack.wait_caught_up(data_topics, quiet_seconds=3)
    for script in workload.postgres_scripts():
        stack.psql(script)
    for script in workload.mariadb_scripts():
        stack.mariadb(script)
    after = stack.wait_caught_up(data_topics, quiet_seconds=5)
    everything: list[dict[str, Any]] = []
    for connector, pattern in CONNECTORS.items():
        folder = args.out / connector
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.jsonl"):
            old.unlink()
        for (topic, partition), end in sorted(after.items()):
            if not re.fullmatch(pattern, topic):
                continue
            start = 0 if connector in KEEP_SNAPSHOT else before.get((topic, partition), 0)
            if end <= start:
                continue
            records = read_range(info.kafka_bootstrap, topic, partition, start, end)
            twin_start = 0 if connector in KEEP_SNAPSHOT else before.get((twin(topic), partition), 0)
            twin_end = after.get((twin(topic), partition), 0)
            if twin_end - twin_start != end - start:
                raise RuntimeError(f"{topic}: {end - start} records, but {twin(topic)} has {twin_end - twin_start}")
            for record, json_record in zip(records, read_range(
                    info.kafka_bootstrap, twin(topic), partition, twin_start, twin_end)):
                for side in ("key", "value"):
                    text = json_record[side]
                    record["json_" + side] = None if text is None else base64.b64decode(text).decode("utf-8")
            everything += records
            (folder / f"{topic}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            print(f"  {connector}/{topic}.jsonl: {len(records)} records")
    schemas = {}
    for sid in sorted(schema_ids(everything)):
        with urllib.request.urlopen(f"{info.registry_url}/schemas/ids/{sid}", timeout=10) as answer:
            schemas[str(sid)] = json.loads(answer.read())["schema"]
    (args.out / "schemas.json").write_text(json.dumps(schemas, indent=1) + "\n")
    print(f"  schemas.json: {len(schemas)} schemas")
    return 0


if __name__ == "__main__":
    sys.exit(main())
