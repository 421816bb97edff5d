"""The S3 sink's partitioners lay the same records out in other folders: the default
`partition=<n>/`, the field partitioner's `<field>=<value>/` and custom nested folders.
The same real Debezium records (tests/fixtures/debezium) written each way, as the sink
writes them (per Kafka partition in offset order, one open file per folder, a new file
every `flush.size` records, named after its first record's offset), land the same
bronze rows, each file with its `.keys.json` record keys file (`store.kafka.keys=true`);
outside `partition=<n>` folders a record's `_offset` is its file's start
offset * extract.LINE_SLOTS + its line index, and ordering a key's events by log
position, then `_offset`, gives the order Kafka had."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Callable
from urllib.parse import quote

import pytest

from ingestion import extract
from ingestion.pipeline import IngestConfig, run
from tests.support.lakehouse import drop_schemas
from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

FIXTURES = ROOT / "tests" / "fixtures" / "debezium"
# Topics with updates, deletes and key changes, each laid out one other way.
TOPICS = {
    "pagila-envelope/pagila.public.actor": "field",
    "pagila-envelope/pagila.public.rental": "nested",
    "pagila-envelope/pagila.public.film": "nested",
    "movies-envelope/mariadb.movies_db.movies": "field",
}
FLUSH_SIZE = 2
BRONZE = ("_topic, _partition, _offset, _source_file, _source_line, _op, _before, _after, "
          "_source_lsn, _source_binlog_file, _source_binlog_pos, _source_binlog_row, _source_ts_ms, _ts_ms")


# A recorded delete whose value loses its before image, as with REPLICA IDENTITY NOTHING:
# its recorded Kafka key, in the keys file, must give it back.
KEYLESS_DELETE = ("pagila.public.actor", 5)


def fixture_records() -> list[dict]:
    records = []
    for name in TOPICS:
        records += [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines() if line]
    for r in records:
        if (r["topic"], r["offset"]) == KEYLESS_DELETE:
            value = json.loads(r["value"])
            assert payload(value)["op"] == "d" and payload(value)["before"] is not None
            payload(value)["before"] = None
            r["value"] = json.dumps(value)
    return records


def payload(value: dict) -> dict:
    """The record without the JsonConverter's schema wrapper (connectors differ)."""
    return value["payload"] if set(value) == {"schema", "payload"} else value


def by_field(name: str) -> Callable[[dict], str]:
    """The field partitioner on a top-level field of the value (Debezium's `op` here)."""
    return lambda value: f"{name}={payload(value)[name]}"


def nested(value: dict) -> str:
    """A custom two-level layout, like a sink partitioning by two fields."""
    record = payload(value)
    return f"snapshot={record['source'].get('snapshot')}/op={record['op']}"


def other_layout(topic: str) -> Callable[[dict], str]:
    layout = next(kind for name, kind in TOPICS.items() if name.endswith("/" + topic))
    return by_field("op") if layout == "field" else nested


def lay_out(records: list[dict], root: Path, folder: Callable[[str], Callable[[dict], str]] | None
            ) -> dict[tuple[str, int], dict]:
    """Write `records` as sink files under `root` (folder None: `partition=<n>`, else the
    layout folder(topic) gives); returns
    {(file URI, 0-based line): the record}. Tombstones (no value) stay in
    their partition's default folder, as a field partitioner cannot place them."""
    where: dict[tuple[str, int], dict] = {}
    open_files: dict[tuple[str, int, str], tuple[int, list[dict]]] = {}

    def flush(topic: str, partition: int, sub: str) -> None:
        start, batch = open_files.pop((topic, partition, sub))
        path = root / topic / sub / f"{topic}+{partition}+{start}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{r['value'] or 'null'}\n" for r in batch))
        path.with_name(path.name.removesuffix(".json") + ".keys.json").write_text(
            "".join(f"{r['key'] or 'null'}\n" for r in batch))
        uri = "file:" + quote(str(path), safe="/,;:$&+=@!'()*")
        for line, r in enumerate(batch):
            where[(uri, line)] = r

    for r in sorted(records, key=lambda r: (r["topic"], r["partition"], r["offset"])):
        value = json.loads(r["value"]) if r["value"] else None
        sub = f"partition={r['partition']}" if folder is None or value is None else folder(r["topic"])(value)
        key = (r["topic"], r["partition"], sub)
        if key in open_files and len(open_files[key][1]) == FLUSH_SIZE:
            flush(*key)
        open_files.setdefault(key, (r["offset"], []))[1].append(r)
    for key in list(open_files):
        flush(*key)
    return where


def test_other_partitioners_land_the_same_rows_in_kafka_order(spark, tmp_path):
    layout = "other"
    records = fixture_records()
    default_root, other_root = tmp_path / "default" / "topics", tmp_path / layout / "topics"
    default_where = lay_out(records, default_root, None)
    other_where = lay_out(records, other_root, other_layout)
    for folder in ("/op=u/", "/snapshot=false/op=u/"):  # the layouts are really other ones
        assert any(folder in uri for uri, _ in other_where), folder
    schemas = {"default": "bronze_layout_default", layout: f"bronze_layout_{layout}"}
    drop_schemas(spark, list(schemas.values()))
    try:
        bronze = {}
        for name, root in (("default", default_root), (layout, other_root)):
            summary = run(spark, IngestConfig(input_uri=str(root), bronze_schema=schemas[name],
                                              sources_yml=tmp_path / "none.yml"))
            if summary.quarantined:
                reasons = spark.sql(f"select distinct _source_file, reason from `{schemas[name]}`._quarantine limit 5")
                raise AssertionError(f"{name}: {summary.render()}\n{[tuple(r) for r in reasons.collect()]}")
            assert not summary.skipped, summary.render()
            rows = []
            for table in sorted(t.table for t in summary.tables):
                rows += [r.asDict() for r in spark.sql(f"select {BRONZE} from `{schemas[name]}`.`{table}`").collect()]
            bronze[name] = rows

        def content(row: dict) -> tuple:
            return tuple(v for k, v in row.items() if k not in ("_offset", "_source_file", "_source_line"))

        # every non-tombstone record once, the same rows both ways
        landed = [r for r in records if r["value"]]
        assert len(bronze["default"]) == len(landed)
        assert sorted(map(content, bronze[layout]), key=repr) == sorted(map(content, bronze["default"]), key=repr)
        # the keys file gave the delete its key back, in both layouts
        for name in bronze:
            deletes = [r["_before"] for r in bronze[name] if (r["_topic"], r["_op"]) == ("pagila.public.actor", "d")]
            recorded_key = next(payload(json.loads(r["key"])) for r in records
                                if (r["topic"], r["offset"]) == KEYLESS_DELETE)
            assert json.dumps(recorded_key, separators=(",", ":")) in deletes, (name, deletes)
        # the default layout's offsets are Kafka's
        assert sorted((r["_topic"], r["_offset"]) for r in bronze["default"]) == sorted(
            (r["topic"], r["offset"]) for r in landed)
        assert all(default_where[(r["_source_file"], r["_source_line"] - 1)]["offset"] == r["_offset"]
                   for r in bronze["default"])
        # elsewhere: start offset * LINE_SLOTS + line, and silver's order (log position,
        # then _offset: cdc_ordering_key) orders every key's events as Kafka did
        per_key = defaultdict(list)
        for r in bronze[layout]:
            sent = other_where[(r["_source_file"], r["_source_line"] - 1)]
            start = int(r["_source_file"].rsplit("+", 1)[-1].removesuffix(".json"))
            assert r["_offset"] == start * extract.LINE_SLOTS + r["_source_line"] - 1
            per_key[(r["_topic"], json.dumps(payload(json.loads(sent["key"]))))].append((r, sent["offset"]))

        def position(row: dict) -> tuple:
            return (row["_source_lsn"] or 0, row["_source_binlog_file"] or "", row["_source_binlog_pos"] or 0,
                    row["_source_binlog_row"] or 0, row["_partition"], row["_offset"])
        assert len(per_key) > 10 and any(len(events) > 2 for events in per_key.values())
        for events in per_key.values():
            assert [offset for _, offset in sorted(events, key=lambda e: position(e[0]))] == sorted(
                offset for _, offset in events)
    finally:
        drop_schemas(spark, list(schemas.values()))
