"""Real Debezium output (tests/fixtures/debezium, recorded by tools/record_fixtures) through
the ingestion transform.

Every expectation is derived from `workload.json` (the statements that were run, the row
changes each makes, the values it sets), never from the records themselves. One Spark job
classifies all fixture records (module fixture); only the last test writes Hudi.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ingestion import kafka_source, transform

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "debezium"
WORKLOAD = json.loads((FIXTURES / "workload.json").read_text())
CONNECTORS: dict[str, dict[str, Any]] = WORKLOAD["connectors"]
PLACEHOLDER = "__debezium_unavailable_value"
PLACEHOLDER_B64 = base64.b64encode(PLACEHOLDER.encode()).decode()
MAP = "map<string,string>"


# --- expectations from the workload ----------------------------------------------------------
@dataclass
class Change:
    """One row change the workload made, in commit order."""

    source: str  # postgres | mariadb
    table: str
    tx: int  # transaction number (0 = MariaDB's initial snapshot, then 1, 2, ...)
    statement: int  # global statement number
    index: int  # position of the change inside its statement
    kind: str | None  # the statement's kind: key_change | partition_move | None
    op: str
    key: dict[str, Any]
    set: dict[str, Any]
    added_columns: frozenset[str] = frozenset()  # columns added to the table before this change
    known: dict[str, Any] = field(default_factory=dict)  # row state the workload determines (after the change)
    previous: dict[str, Any] | None = None  # row state before the change (None: unknown / no row)
    placeholders: frozenset[str] = frozenset()  # big values this change leaves unchanged

    @property
    def key_text(self) -> tuple[str, ...]:
        return tuple(str(v) for v in self.key.values())


def _is_big(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "big"


def workload_changes(source: str) -> list[Change]:
    """Every row change of one source in commit order, with the row state the workload
    implies (the columns it set; every column for MariaDB, where nothing is implicit)."""
    part = WORKLOAD[source]
    transactions = ([part["snapshot"]] if "snapshot" in part else []) + part["transactions"]
    first_tx = 0 if "snapshot" in part else 1
    triggers: dict[str, list[str]] = part.get("set_by_update_triggers", {})
    state: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    big: dict[tuple[str, tuple[str, ...]], set[str]] = defaultdict(set)
    added: dict[str, set[str]] = defaultdict(set)
    changes: list[Change] = []
    statement_no = 0
    for tx, transaction in enumerate(transactions, start=first_tx):
        for statement in transaction["statements"]:
            statement_no += 1
            table = statement["table"]
            if statement.get("kind") == "add_columns":
                added[table] |= set(statement["add_columns"])
                for (t, _), row in state.items():
                    if t == table and source == "mariadb":  # every column of movies is tracked
                        row.update({c: None for c in statement["add_columns"]})
                continue
            moved: dict[str, Any] = {}
            for index, raw in enumerate(statement["changes"]):
                change = Change(source, table, tx, statement_no, index, statement.get("kind"), raw["op"],
                                raw["key"], raw["set"], frozenset(added[table]))
                slot = (table, change.key_text)
                change.previous = dict(state[slot]) if slot in state else None
                if change.op in ("c", "r"):
                    row = {**moved, **change.set} if statement.get("kind") else dict(change.set)
                    if source == "mariadb":
                        row = {**{c: None for c in added[table]}, **row}
                    state[slot] = row
                    big[slot] = {c for c, v in row.items() if _is_big(v)}
                elif change.op == "u":
                    change.placeholders = frozenset(big[slot] - set(change.set))
                    state[slot] = {**state.get(slot, {}), **change.set}
                    for column in triggers.get(table, []):  # overwritten by a trigger: not known
                        state[slot].pop(column, None)
                    big[slot] = (big[slot] - set(change.set)) | {c for c, v in change.set.items() if _is_big(v)}
                elif change.op == "d":
                    moved = state.pop(slot, {})
                    big.pop(slot, None)
                change.known = dict(state.get(slot, {}))
                changes.append(change)
    return changes


PG_CHANGES = workload_changes("postgres")
MARIADB_CHANGES = workload_changes("mariadb")
CHANGES = {"postgres": PG_CHANGES, "mariadb": MARIADB_CHANGES}


def topic_of(connector: str, table: str) -> str:
    return CONNECTORS[connector]["topic_prefix"] + table


def expected_by_topic(connector: str) -> dict[str, list[Change]]:
    result: dict[str, list[Change]] = defaultdict(list)
    for change in CHANGES[CONNECTORS[connector]["source"]]:
        result[topic_of(connector, change.table)].append(change)
    return dict(result)


def primary_keys() -> dict[str, list[str]]:
    """topic -> key columns, for the classify step (from workload.json)."""
    return {
        topic_of(name, table): columns
        for name, c in CONNECTORS.items()
        for table, columns in WORKLOAD["primary_keys"][c["source"]].items()
    }


def big_value(spec: dict[str, Any]) -> Any:
    """The value an md5-built `big` spec stands for (see workload.json's description)."""
    md5 = [hashlib.md5(str(i).encode()).hexdigest() for i in range(1, spec["n"] + 1)]
    if spec["kind"] == "text":
        return "".join(md5)
    if spec["kind"] == "text[]":
        return [hashlib.md5(str(i).encode()).hexdigest() + hashlib.md5(str(-i).encode()).hexdigest()
                for i in range(1, spec["n"] + 1)]
    if spec["kind"] == "bytea":
        return bytes.fromhex("".join(md5))
    raise ValueError(spec)


# --- decoding Debezium values (with the envelope's schema) ------------------------------------------
_BOUND = r'"(?:[^"\\]|\\.)*"|[^,\])]*'
_RANGE = re.compile(rf"^(?P<lo_inc>[\[(])(?P<lo>{_BOUND}),(?P<hi>{_BOUND})(?P<hi_inc>[\])])$")


def _timestamp(text: str) -> datetime:
    text = re.sub(r"([+-]\d\d)$", r"\1:00", text.strip().replace("Z", "+00:00"))
    return datetime.fromisoformat(text)


def parse_range(text: str) -> tuple | str:
    """PostgreSQL range text -> (lower, upper, lower_inc, upper_inc), bounds as datetimes
    (aware when they carry an offset); 'empty' stays 'empty'."""
    if text == "empty":
        return "empty"
    m = _RANGE.match(text)
    assert m, f"not a range: {text!r}"

    def bound(raw: str) -> datetime | None:
        return _timestamp(raw.strip('"')) if raw else None

    return bound(m["lo"]), bound(m["hi"]), m["lo_inc"] == "[", m["hi_inc"] == "]"


def value_matches(expected: Any, actual: Any, schema: dict[str, Any] | None) -> bool:
    """Does a Debezium value equal what the workload set? `schema` is the field's Connect
    schema from the envelope (None for schemaless records: plain JSON values then)."""
    if not isinstance(expected, dict):
        return actual == expected
    kind = expected["type"]
    if kind == "numeric":
        assert schema and schema.get("name") == "org.apache.kafka.connect.data.Decimal", schema
        unscaled = int.from_bytes(base64.b64decode(actual), "big", signed=True)
        return str(Decimal(unscaled).scaleb(-int(schema["parameters"]["scale"]))) == expected["value"]
    if kind == "date":
        assert schema and schema.get("name") == "io.debezium.time.Date", schema
        return date(1970, 1, 1) + timedelta(days=actual) == date.fromisoformat(expected["value"])
    if kind == "timestamp":
        assert schema and schema.get("name") == "io.debezium.time.MicroTimestamp", schema
        return datetime(1970, 1, 1) + timedelta(microseconds=actual) == datetime.fromisoformat(expected["value"])
    if kind == "timestamptz":
        assert schema and schema.get("name") == "io.debezium.time.ZonedTimestamp", schema
        return _timestamp(actual) == _timestamp(expected["value"])
    if kind == "bytea":
        return base64.b64decode(actual) == bytes.fromhex(expected["hex"])
    if kind == "text[]":
        return actual == expected["value"]
    if kind in ("tsrange", "tstzrange"):
        return parse_range(actual) == parse_range(expected["value"])
    if kind == "big":
        value = big_value(expected)
        return (base64.b64decode(actual) if expected["kind"] == "bytea" else actual) == value
    raise AssertionError(f"unknown value kind {kind!r}")


def has_placeholder(value: str | None) -> bool:
    """The unchanged-TOAST placeholder as text, inside an array, or as base64 bytes."""
    return value is not None and (PLACEHOLDER in value or value == PLACEHOLDER_B64)


# --- the fixtures through the ingestion transform ---------------------------------------------------
def fixture_records(connector: str) -> dict[str, list[dict[str, Any]]]:
    """topic -> its records as recorded (key/value are the raw Kafka text)."""
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines()]
        for path in sorted((FIXTURES / connector).glob("*.jsonl"))
    }


RAW = {name: fixture_records(name) for name in CONNECTORS}
FIELDS = ["_topic", "_partition", "_offset", "_status", "reason", "_shape", "_op", "_deleted", "_source_lsn",
          "_source_binlog_file", "_source_binlog_pos", "_source_binlog_row", "_source_ts_ms", "_source_tx_id",
          "_source_snapshot", "_before", "_after", "_image"]


@pytest.fixture(scope="module")
def classified(spark) -> dict[str, list[dict[str, Any]]]:
    """Every fixture record through kafka_source.to_lines + transform.prepare, grouped by topic
    in offset order. `_image` is the row image as map<string,string>: `before` for an
    envelope delete, else `after` (flattened: the row fields)."""
    from pyspark.sql import functions as F

    rows = [(r["topic"], r["partition"], r["offset"], r["value"])
            for topics in RAW.values() for records in topics.values() for r in records]
    records = spark.createDataFrame(rows, "_topic string, _partition int, _offset bigint, value string")
    tables = kafka_source.topic_tables(sorted({r[0] for r in rows}))
    prepared = transform.prepare(kafka_source.to_lines(records, tables), primary_keys())
    image = F.when((F.col("_shape") == transform.SHAPE_ENVELOPE) & (F.col("_op") == "d"), F.col("_before")) \
        .otherwise(F.col("_after"))
    result: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in prepared.withColumn("_image", F.from_json(image, MAP)).select(*FIELDS).collect():
        result[row["_topic"]].append(row.asDict())
    for topic_rows in result.values():
        topic_rows.sort(key=lambda r: (r["_partition"], r["_offset"]))
    return dict(result)


def landed(classified: dict[str, list[dict[str, Any]]], topic: str) -> list[dict[str, Any]]:
    return [r for r in classified[topic] if r["_status"] == transform.STATUS_LANDED]


def row_key(row: dict[str, Any], change: Change) -> tuple[str, ...]:
    return tuple(str(row["_image"][c]) for c in change.key)


def paired(classified, connector: str):
    """(topic, landed rows, expected changes) per topic of a connector; same length asserted."""
    for topic, expected in sorted(expected_by_topic(connector).items()):
        rows = landed(classified, topic)
        assert len(rows) == len(expected), f"{topic}: {len(rows)} landed records, workload made {len(expected)} changes"
        yield topic, rows, expected


# --- tests -------------------------------------------------------------------------------------------
def test_fixture_files_are_whole_topics():
    """One file per topic the workload changed, offsets 0..n-1, the recorded fields only."""
    for connector in CONNECTORS:
        assert set(RAW[connector]) == set(expected_by_topic(connector)), connector
        for topic, records in RAW[connector].items():
            assert [r["offset"] for r in records] == list(range(len(records))), topic
            for r in records:
                assert list(r) == ["topic", "partition", "offset", "key", "value"]
                assert (r["topic"], r["partition"]) == (topic, 0)
                assert isinstance(r["key"], str) and (r["value"] is None or isinstance(r["value"], str))


def test_every_record_lands_and_tombstones_follow_envelope_deletes(classified):
    for connector, c in CONNECTORS.items():
        for topic, expected in expected_by_topic(connector).items():
            rows = classified[topic]
            assert [r for r in rows if r["_status"] == transform.STATUS_QUARANTINED] == [], topic
            deletes = sum(1 for ch in expected if ch.op == "d")
            tombstones = [r for r in rows if r["_status"] == transform.STATUS_TOMBSTONE]
            assert len(tombstones) == (deletes if c["shape"] == "envelope" else 0), topic
            assert all(r["_shape"] == c["shape"] for r in rows if r["_status"] == transform.STATUS_LANDED), topic
            # Debezium sends the tombstone right after its delete, with the same Kafka key.
            raw = RAW[connector][topic]
            for t in tombstones:
                before = raw[t["_offset"] - 1]
                assert json.loads(before["value"]).get("payload", json.loads(before["value"]))["op"] == "d"
                assert raw[t["_offset"]]["key"] == before["key"]


def test_op_sequence_per_primary_key_matches_the_workload(classified):
    for connector in CONNECTORS:
        for topic, rows, expected in paired(classified, connector):
            assert [(r["_op"], row_key(r, ch)) for r, ch in zip(rows, expected)] == \
                [(ch.op, ch.key_text) for ch in expected], topic
            per_key_got: dict[tuple, list[str]] = defaultdict(list)
            per_key_want: dict[tuple, list[str]] = defaultdict(list)
            for r, ch in zip(rows, expected):
                per_key_got[row_key(r, ch)].append(r["_op"])
                per_key_want[ch.key_text].append(ch.op)
            assert per_key_got == per_key_want, topic
            assert all(r["_deleted"] == (r["_op"] == "d") for r in rows), topic


def test_kafka_key_is_the_row_key(classified):
    for connector, c in CONNECTORS.items():
        for topic, rows, expected in paired(classified, connector):
            raw = RAW[connector][topic]
            for r, ch in zip(rows, expected):
                key = json.loads(raw[r["_offset"]]["key"])
                if "payload" in key:  # JsonConverter with schemas: {"schema": ..., "payload": ...}
                    assert key["schema"]["name"] == f"{topic}.Key"
                    key = key["payload"]
                assert key == ch.key, (topic, r["_offset"])


def test_postgres_lsns_grow_in_commit_order(classified):
    for connector in ("pagila-envelope", "pagila-flattened"):
        by_tx: dict[int, list[int]] = defaultdict(list)
        tx_ids: dict[int, set[str | None]] = defaultdict(set)
        for topic, rows, expected in paired(classified, connector):
            for (a, ca), (b, cb) in zip(zip(rows, expected), zip(rows[1:], expected[1:])):
                same_record = ca.kind == cb.kind == "key_change" and ca.statement == cb.statement
                assert b["_source_lsn"] == a["_source_lsn"] if same_record else b["_source_lsn"] > a["_source_lsn"], \
                    (topic, a["_offset"], b["_offset"])
            for r, ch in zip(rows, expected):
                assert r["_source_lsn"] is not None and r["_source_binlog_file"] is None
                by_tx[ch.tx].append(r["_source_lsn"])
                tx_ids[ch.tx].add(r["_source_tx_id"])
        # across topics: every change of a later transaction has a higher LSN than all earlier ones
        ordered = [by_tx[tx] for tx in sorted(by_tx)]
        for earlier, later in zip(ordered, ordered[1:]):
            assert max(earlier) < min(later), connector
        if connector == "pagila-envelope":  # one txId per transaction, growing
            assert all(len(ids) == 1 for ids in tx_ids.values())
            ids = [int(next(iter(tx_ids[tx]))) for tx in sorted(tx_ids)]
            assert ids == sorted(set(ids))
        else:  # the flattened connector's add.fields carry no txId
            assert all(ids == {None} for ids in tx_ids.values())


def snapshot_last(expected: list[Change]) -> Change:
    return [ch for ch in expected if ch.op == "r"][-1]


def test_mariadb_binlog_coordinates_are_present_and_ordered(classified):
    for connector in ("movies-envelope", "movies-flattened"):
        for topic, rows, expected in paired(classified, connector):
            coords = [(r["_source_binlog_file"], r["_source_binlog_pos"], r["_source_binlog_row"]) for r in rows]
            assert all(None not in c for c in coords), topic
            assert all(r["_source_lsn"] is None for r in rows)
            snapshot = [c for c, ch in zip(coords, expected) if ch.op == "r"]
            assert len(set(snapshot)) == 1, "snapshot records share the binlog position it started at"
            pairs = list(zip(zip(coords, expected), zip(coords[1:], expected[1:])))
            for (a, ca), (b, cb) in pairs:
                if ca.op == cb.op == "r":
                    continue
                if ca.statement == cb.statement and ca.kind == "key_change":
                    assert b == a, (topic, ca, cb)  # delete + create from one binlog row
                elif ca.statement == cb.statement:
                    assert b[:2] == a[:2] and b[2] == a[2] + 1, (topic, a, b)  # rows of one event
                else:
                    assert b > a, (topic, a, b)
            for c, ch in zip(coords, expected):
                if ch.kind != "key_change" and ch.op != "r":
                    assert c[2] == ch.index, (topic, ch)
            if connector == "movies-envelope":
                gtid = {ch.tx: set() for ch in expected}
                for r, ch in zip(rows, expected):
                    gtid[ch.tx].add(r["_source_tx_id"])
                    want = ("first" if ch is expected[0] else "last" if ch is snapshot_last(expected)
                            else "true") if ch.op == "r" else "false"
                    assert r["_source_snapshot"] == want, (r["_offset"], r["_source_snapshot"])
                streamed = {tx: ids for tx, ids in gtid.items() if tx > 0}
                assert all(len(ids) == 1 and None not in ids for ids in streamed.values())
                assert len({next(iter(ids)) for ids in streamed.values()}) == len(streamed)


def test_envelope_and_flattened_agree(classified):
    for envelope, flattened in (("pagila-envelope", "pagila-flattened"), ("movies-envelope", "movies-flattened")):
        e_topics, f_topics = expected_by_topic(envelope), expected_by_topic(flattened)
        for table_topic, expected in e_topics.items():
            f_topic = topic_of(flattened, expected[0].table)
            assert len(f_topics[f_topic]) == len(expected)
            e_rows, f_rows = landed(classified, table_topic), landed(classified, f_topic)
            assert len(e_rows) == len(f_rows) == len(expected)
            for e, f in zip(e_rows, f_rows):
                where = (table_topic, e["_offset"], f["_offset"])
                assert (e["_op"], e["_deleted"]) == (f["_op"], f["_deleted"]), where
                assert e["_image"] == f["_image"], where  # row values, as text (flattened has no types)
                for column in ("_source_lsn", "_source_binlog_file", "_source_binlog_pos", "_source_binlog_row",
                               "_source_ts_ms"):
                    assert e[column] == f[column], (where, column)


def _value_schema(raw_value: dict[str, Any], image: str) -> dict[str, dict[str, Any]]:
    if "schema" not in raw_value:
        return {}
    struct = next(f for f in raw_value["schema"]["fields"] if f["field"] == image)
    return {f["field"]: f for f in struct["fields"]}


def test_row_values_follow_the_workload():
    """Every column the workload set (and, for MariaDB, every column: nothing is implicit)
    holds the value it set, decoded with the envelope's schema; an unchanged TOASTed value
    is checked by the placeholder test instead."""
    for connector in ("pagila-envelope", "movies-envelope"):
        for topic, expected in expected_by_topic(connector).items():
            values = [json.loads(r["value"]) for r in RAW[connector][topic] if r["value"] is not None]
            assert len(values) == len(expected)
            for raw, ch in zip(values, expected):
                payload = raw.get("payload", raw)
                image = "before" if ch.op == "d" else "after"
                row, schema = payload[image], _value_schema(raw, image)
                assert payload["op"] == ch.op
                if ch.op == "d":
                    assert {k: row[k] for k in ch.key} == ch.key
                    if ch.source == "mariadb":  # binlog_row_image=FULL: the whole old row
                        assert {c: row[c] for c in ch.previous} == ch.previous, (topic, ch)
                    continue
                if ch.source == "mariadb":
                    assert set(row) == set(ch.known), (topic, ch)
                    if ch.op == "u":
                        assert payload["before"] == ch.previous, (topic, ch)
                for column, want in ch.known.items():
                    if column in ch.placeholders:
                        continue
                    assert value_matches(want, row[column], schema.get(column)), (topic, ch.op, ch.key, column,
                                                                                   row[column])


def test_toast_placeholder_exactly_where_a_big_value_stayed_unchanged(classified):
    for connector in ("pagila-envelope", "pagila-flattened"):
        for topic, rows, expected in paired(classified, connector):
            got = {(i, c) for i, r in enumerate(rows) for c, v in r["_image"].items() if has_placeholder(v)}
            want = {(i, c) for i, ch in enumerate(expected) for c in ch.placeholders}
            assert got == want, topic
    assert any(ch.placeholders for ch in PG_CHANGES), "the workload must leave a big value unchanged"
    kinds = {ch.table + "." + c for ch in PG_CHANGES for c in ch.placeholders}
    assert kinds == {"film.description", "film.special_features", "staff.picture"}


def test_primary_key_change_is_delete_then_create(classified):
    statements = {ch.statement for chs in CHANGES.values() for ch in chs if ch.kind == "key_change"}
    assert len(statements) == 2  # one per database
    for connector, c in CONNECTORS.items():
        for topic, rows, expected in paired(classified, connector):
            for i, ch in enumerate(expected):
                if ch.kind != "key_change" or ch.op != "d":
                    continue
                new = expected[i + 1]
                d, created = rows[i], rows[i + 1]
                assert (d["_op"], row_key(d, ch), created["_op"], row_key(created, new)) == \
                    ("d", ch.key_text, "c", new.key_text)
                # envelope: delete, tombstone, create at consecutive offsets; flattened: no tombstone
                gap = 2 if c["shape"] == "envelope" else 1
                assert created["_offset"] == d["_offset"] + gap
                if c["shape"] == "envelope":
                    assert classified[topic][d["_offset"] + 1]["_status"] == transform.STATUS_TOMBSTONE
                else:
                    assert d["_image"] is not None and row_key(d, ch) == ch.key_text


def test_generated_and_added_columns(classified):
    """Generated columns never appear in streamed records; added columns appear from the
    first change after the ALTER on, in both shapes."""
    assert WORKLOAD["postgres"]["generated_columns"] == {"customer": ["active"], "film": ["revenue_projection"]}
    for connector in CONNECTORS:
        for topic, rows, expected in paired(classified, connector):
            for r, ch in zip(rows, expected):
                columns = set(r["_image"])
                generated = WORKLOAD[ch.source].get("generated_columns", {}).get(ch.table, [])
                assert not columns & set(generated), topic
                table_added = {c for s in WORKLOAD[ch.source]["transactions"] for st in s["statements"]
                               if st.get("kind") == "add_columns" and st["table"] == ch.table
                               for c in st["add_columns"]}
                assert columns & table_added == ch.added_columns, (topic, r["_offset"])


SINK_TOPIC = "pagila.public.rental"
SINK_SCHEMA = "bronze_debezium_fixtures"


def test_s3_sink_folder_of_a_fixture_topic_lands_in_bronze(spark, tmp_path):
    """The fixture topic as a Kafka Connect S3-sink folder (two files, tombstones as `null`
    lines so line i keeps offset start + i), through ingestion.pipeline.run into Hudi."""
    from ingestion.pipeline import IngestConfig, run

    records = RAW["pagila-envelope"][SINK_TOPIC]
    expected = expected_by_topic("pagila-envelope")[SINK_TOPIC]
    folder = tmp_path / "topics" / SINK_TOPIC / "partition=0"
    folder.mkdir(parents=True)
    split = len(records) // 2
    for chunk in (records[:split], records[split:]):
        name = f"{SINK_TOPIC}+0+{chunk[0]['offset']}.json"
        (folder / name).write_text("".join((r["value"] if r["value"] is not None else "null") + "\n" for r in chunk))
    table = SINK_TOPIC.replace(".", "_")
    key = WORKLOAD["primary_keys"]["postgres"]["rental"]
    sources = tmp_path / "sources.yml"
    sources.write_text(f"version: 2\nsources:\n  - name: bronze\n    tables:\n      - name: {table}\n"
                       f"        meta: {{topic: {SINK_TOPIC}, primary_key: {json.dumps(key)}}}\n")

    summary = run(spark, IngestConfig(input_uri=str(tmp_path / "topics"), bronze_schema=SINK_SCHEMA,
                                      sources_yml=sources))

    deletes = sum(1 for ch in expected if ch.op == "d")
    t = summary.table(table)
    assert (t.files, t.events_read, t.landed, t.quarantined, t.tombstones, t.key_checked) == \
        (2, len(expected) + deletes, len(expected), 0, deletes, True)
    got = spark.sql(f"SELECT _offset, _op, _shape, _source_lsn, _after, _before FROM {SINK_SCHEMA}.{table} "
                    "ORDER BY _offset").collect()
    assert [r["_op"] for r in got] == [ch.op for ch in expected]
    assert [r["_offset"] for r in got] == [r["offset"] for r in records if r["value"] is not None]
    assert {r["_shape"] for r in got} == {"envelope"} and all(r["_source_lsn"] for r in got)
    keys = [json.loads(r["_before"] if r["_op"] == "d" else r["_after"])[key[0]] for r in got]
    assert keys == [ch.key[key[0]] for ch in expected]
