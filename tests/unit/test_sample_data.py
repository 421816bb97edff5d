"""Fast tests of the sample-data generator (tools.sample_data) and the test oracle."""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from datetime import datetime
from decimal import Decimal

import pytest

from tests.support import oracle
from tests.support.paths import PAGILA_DIR, require_pagila
from tools.sample_data import DEFAULT_SEED, POLLED, TOPIC_LAYOUT, debezium, generate, mariadb, outbox, pagila, polled




@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    require_pagila()
    out = tmp_path_factory.mktemp("sample")
    manifest = generate(PAGILA_DIR, out, DEFAULT_SEED)
    return out, manifest


@pytest.fixture(scope="module")
def records(sample):
    """{(batch, topic, partition): [(offset, value-or-None), ...]} in offset order."""
    out, manifest = sample
    recs = defaultdict(list)
    for b, info in manifest["batches"].items():
        for f in info["files"]:
            lines = (out / f["path"]).read_text(encoding="utf-8").splitlines()
            assert len(lines) == f["records"]
            for i, line in enumerate(lines):
                recs[(int(b), f["topic"], f["partition"])].append((f["start_offset"] + i, json.loads(line)))
    return recs


def payload(v):
    return v["payload"] if v is not None and "schema" in v and "payload" in v else v


def events_of(records, table, batch=None):
    topic = mariadb.TOPIC if table == mariadb.TABLE else debezium.topic_for(table)
    out = []
    for (b, t, p), recs in sorted(records.items()):
        if t == topic and (batch is None or b == batch):
            out += [(b, p, off, payload(v)) for off, v in recs if v is not None]
    return out


def lsn_of(v):
    """Source position: the LSN, or (binlog file, position, row) for MariaDB."""
    if "source" in v and "lsn" not in v["source"]:
        return (v["source"]["file"], v["source"]["pos"], v["source"]["row"])
    return v["source"]["lsn"] if "source" in v else v["__lsn"]


def op_of(v):
    return v["op"] if "source" in v else v["__op"]


def row_of(v):
    if "source" in v:
        return v["before"] if v["op"] == "d" else v["after"]
    return {k: x for k, x in v.items() if not k.startswith("__")}


def ts_of(v):
    return v["ts_ms"] if "source" in v else v["__source_ts_ms"]


def cases(manifest, case, table=None):
    return [c for c in manifest["special_cases"] if c["case"] == case and (table is None or c["table"] == table)]


def key_events(records, table, key: dict):
    return [(b, p, off, v) for b, p, off, v in events_of(records, table)
            if all(row_of(v)[k] == x for k, x in key.items())]


# --- generator ---------------------------------------------------------------------
def test_deterministic_for_a_seed(sample, tmp_path):
    out, _ = sample
    generate(PAGILA_DIR, tmp_path / "again", DEFAULT_SEED)
    a = {p.relative_to(out): p.read_bytes() for p in out.rglob("*.json")}
    b = {p.relative_to(tmp_path / "again"): p.read_bytes() for p in (tmp_path / "again").rglob("*.json")}
    assert a.keys() == b.keys()
    assert all(a[k] == b[k] for k in a)
    generate(PAGILA_DIR, tmp_path / "other", DEFAULT_SEED + 1)
    c = {p.relative_to(tmp_path / "other"): p.read_bytes() for p in (tmp_path / "other").rglob("*.json")}
    assert a != c


def test_layout_and_offsets(sample, records):
    out, manifest = sample
    assert set(manifest["batches"]) == {"1", "2", "3"}
    expect_next = defaultdict(int)
    for b in ("1", "2", "3"):
        for f in sorted(manifest["batches"][b]["files"], key=lambda f: (f["topic"], f["partition"], f["start_offset"])):
            topic, part, start = f["topic"], f["partition"], f["start_offset"]
            assert f["path"] == f"batches/{b}/topics/{topic}/partition={part}/{topic}+{part}+{start:010d}.json"
            assert (out / f["path"]).is_file()
            assert start == expect_next[(topic, part)], "offsets continue across files and batches"
            expect_next[(topic, part)] = start + f["records"]
    topics = {t for (_, t, _) in records}
    assert topics == {f"pagila.public.{t}" for t in pagila.TABLES} | {
        "mariadb.movies_db.movies", outbox.TOPIC, outbox.DOCUMENT_TOPIC, polled.TOPIC}
    parts = {(t, p) for (_, t, p) in records}
    two = {"pagila.public.film_actor", "pagila.public.payment"}
    for topic in two:
        assert {p for t, p in parts if t == topic} == {0, 1}
    assert {p for t, p in parts if t not in two} == {0}


def test_keys_always_on_same_partition(records):
    for table, key in (("film_actor", ("actor_id", "film_id")), ("payment", ("payment_id",))):
        seen = {}
        for b, p, off, v in events_of(records, table):
            r = row_of(v)
            assert seen.setdefault(tuple(r[c] for c in key), p) == p


def test_shapes_and_tombstones(records, sample):
    _, manifest = sample
    for (b, topic, p), recs in records.items():
        table = topic.rsplit(".", 1)[1]
        shape, wrapped, _ = TOPIC_LAYOUT[table]
        assert manifest["tables"][table]["shape"] == shape
        prev = None
        for off, v in recs:
            if v is None:
                assert shape == debezium.ENVELOPE, "flattened topics have no tombstones"
                assert prev is not None and payload(prev)["op"] == "d", "a tombstone follows a delete"
                prev = v
                continue
            assert ("schema" in v and "payload" in v) == wrapped
            pl = payload(v)
            if shape == debezium.ENVELOPE:
                assert list(pl) == ["before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"]
                src = pl["source"]
                assert src["version"] == "3.5.0.Final" and pl["transaction"] is None
                assert src["table"] == table
                assert src["ts_us"] // 1000 == src["ts_ms"] and src["ts_ns"] == src["ts_us"] * 1000
                if topic.startswith("mariadb."):
                    assert src["connector"] == "mariadb" and src["name"] == "mariadb" and src["db"] == "movies_db"
                    assert list(src)[-7:] == ["server_id", "gtid", "file", "pos", "row", "thread", "query"]
                    assert "lsn" not in src and isinstance(src["pos"], int) and isinstance(src["row"], int)
                else:
                    assert src["connector"] == "postgresql"
                    server, schema = topic.split(".")[:2]  # pagila.public.* or the outbox's topic
                    assert src["name"] == server and src["db"] == "pagila" and src["schema"] == schema
                    assert src["xmin"] is None
                    assert json.loads(src["sequence"])[1] == str(src["lsn"])
                if pl["op"] == "d":
                    assert pl["after"] is None and pl["before"] is not None
                    nxt = [x for o, x in recs if o == off + 1]
                    assert nxt == [None], "every envelope delete is followed by a tombstone"
                else:
                    assert pl["after"] is not None
            elif shape == POLLED:  # only the row's columns, the updated-at one among them
                assert list(pl) == list(polled.COLUMNS) and isinstance(pl[polled.UPDATED_AT], int)
            else:
                assert pl["__db"] == "pagila" and pl["__table"] == table and pl["__schema"] == "public"
                assert pl["__deleted"] == ("true" if pl["__op"] == "d" else "false")
                assert isinstance(pl["__lsn"], int) and isinstance(pl["__source_ts_ms"], int)
            if wrapped:
                names = [f["field"] for f in v["schema"]["fields"]]
                if shape == debezium.ENVELOPE:
                    assert names == ["before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"]
                else:
                    assert names[-7:] == ["__op", "__db", "__table", "__schema", "__lsn", "__source_ts_ms", "__deleted"]
            prev = v


def test_film_schema_and_encodings(records):
    (b, p, off, v), = [e for e in events_of(records, "film", 1) if e[3]["after"]["film_id"] == 1]
    raw = [x for o, x in records[(1, "pagila.public.film", 0)] if o == off][0]
    fields = {f["field"]: f for f in raw["schema"]["fields"][1]["fields"]}
    assert fields["rental_rate"]["name"] == "org.apache.kafka.connect.data.Decimal"
    assert fields["rental_rate"]["parameters"] == {"scale": "2", "connect.decimal.precision": "4"}
    assert fields["replacement_cost"]["parameters"] == {"scale": "2", "connect.decimal.precision": "5"}
    assert fields["rating"]["name"] == "io.debezium.data.Enum"
    assert fields["special_features"]["type"] == "array"
    assert fields["last_update"]["name"] == "io.debezium.time.MicroTimestamp"
    assert fields["original_language_id"]["optional"] is True
    a = v["after"]
    assert a["rental_rate"] == "Yw==" and a["replacement_cost"] == "CDM="  # 99, 2099
    assert a["last_update"] == 1189446363905795  # 2007-09-10 17:46:03.905795
    assert a["special_features"] == ["Deleted Scenes", "Behind the Scenes"]
    assert a["release_year"] == 2006 and a["rating"] == "PG" and a["original_language_id"] is None


def test_decimal_encoding_matches_java_biginteger():
    assert debezium.decimal_bytes(Decimal("4.99"), 2) == "AfM="
    assert debezium.decimal_bytes(Decimal("1.28"), 2) == "AIA="   # 128 needs a sign byte
    assert debezium.decimal_bytes(Decimal("-1.28"), 2) == "gA=="
    assert debezium.decimal_bytes(Decimal("0.00"), 2) == "AA=="
    assert oracle.decode("numeric(5,2)", "B88=") == Decimal("19.99")
    assert oracle.decode("numeric(4,2)", "gA==") == Decimal("-1.28")
    assert debezium.murmur2(b"21") == (-973932308) & 0xFFFFFFFF  # Kafka's test vector


def test_snapshot(records, sample):
    _, manifest = sample
    snap = [e for t in pagila.TABLES for e in events_of(records, t, 1)]
    assert len(snap) == sum(manifest["batches"]["1"]["events"][t]["r"] for t in pagila.TABLES) > 8000
    envs = [v for *_, v in snap if "source" in v]
    assert {v["op"] for v in envs} == {"r"}
    assert {v["__op"] for *_, v in snap if "__op" in v} == {"r"}
    assert len({lsn_of(v) for *_, v in snap}) == 1, "one snapshot LSN"
    assert len({v["source"]["txId"] for v in envs}) == 1 and len({v["source"]["ts_ms"] for v in envs}) == 1
    assert {v["source"]["snapshot"] for v in envs} <= {"first", "true", "last"}
    assert sorted(v["source"]["snapshot"] for v in envs).count("first") <= 1
    for t in pagila.TABLES:
        assert manifest["batches"]["1"]["events"][t]["r"] > 0


def test_streaming_batches_promises(records, sample):
    _, manifest = sample
    snap_lsn = lsn_of(events_of(records, "actor", 1)[0][3])
    for b in (2, 3):
        evs = [e for t in pagila.TABLES for e in events_of(records, t, b)]
        assert 10 <= len(evs) <= 200
        assert all(lsn_of(v) > snap_lsn for *_, v in evs)
        envs = [v for *_, v in evs if "source" in v]
        assert all(v["source"]["snapshot"] == "false" for v in envs)
    ops2 = {(t, v.get("op") or v["__op"]) for t in pagila.TABLES for *_, v in events_of(records, t, 2)}
    assert {("actor", "c"), ("film", "c"), ("film_actor", "c"), ("city", "c"), ("address", "c"),
            ("actor", "u"), ("film", "u"), ("actor", "d"), ("film_actor", "d"), ("city", "d"),
            ("film_category", "d")} <= ops2
    # a new film with NULL original_language_id
    new_films = [v["after"] for *_, v in events_of(records, "film", 2) if v["op"] == "c"]
    assert any(f["original_language_id"] is None for f in new_films)
    # an update sets a column to NULL
    (c,) = cases(manifest, "update_to_null", "film")
    upd = [v for b, p, o, v in key_events(records, "film", c["key"]) if b == 2]
    assert upd[-1]["after"]["length"] is None
    # flattened deletes in batch 3
    assert any(v["__deleted"] == "true" for t in ("city", "film_category") for *_, v in events_of(records, t, 3))


def test_two_updates_in_one_transaction(records, sample):
    _, manifest = sample
    for c in cases(manifest, "two_updates_one_tx"):
        evs = [v for b, p, o, v in key_events(records, c["table"], c["key"]) if b == 2]
        assert len(evs) == 2
        a, b = evs
        if "source" in a:
            tx = "gtid" if c["table"] == "movies" else "txId"
            assert a["source"][tx] == b["source"][tx]
            assert a["source"]["ts_ms"] == b["source"]["ts_ms"] and a["ts_ms"] == b["ts_ms"]
        else:
            assert a["__source_ts_ms"] == b["__source_ts_ms"]
        assert lsn_of(a) < lsn_of(b)


def test_late_event(records, sample):
    _, manifest = sample
    late_cases = cases(manifest, "late_event")
    assert {c["table"] for c in late_cases} == {"actor", "city"}
    for c in late_cases:
        evs = key_events(records, c["table"], c["key"])
        b2 = [v for b, p, o, v in evs if b == 2]
        b3 = [v for b, p, o, v in evs if b == 3]
        assert b2 and len(b3) == 1
        assert lsn_of(b3[0]) < lsn_of(b2[-1]), "late event has a lower LSN"
        if "source" in b3[0]:
            assert b3[0]["ts_ms"] > b2[-1]["ts_ms"], "but a higher ts_ms (ts_ms ordering would be wrong)"
        state = {tuple(r[k] for k in c["key"]): r
                 for r in oracle.expected_current_state_from_batches(
                     [sample[0] / "batches" / str(i) for i in (1, 2, 3)], c["table"])}
        cols = oracle.TABLES[c["table"]]["columns"]
        got = state[tuple(c["key"].values())]
        assert got == {k: oracle.decode(cols[k], x) for k, x in row_of(b2[-1]).items()}, "batch 2 wins"
        assert got != {k: oracle.decode(cols[k], x) for k, x in row_of(b3[0]).items()}


def test_delete_then_reinsert_and_cross_batch_delete(records, sample):
    _, manifest = sample
    out = sample[0]
    assert {c["table"] for c in cases(manifest, "delete_then_reinsert")} >= {"film_actor", "language", "film_category"}
    for c in cases(manifest, "delete_then_reinsert") + cases(manifest, "delete_then_reinsert_across_batches"):
        ops = [v.get("op") or v["__op"] for b, p, o, v in key_events(records, c["table"], c["key"]) if b > 1]
        assert ops[-2:] == ["d", "c"]
        state = oracle.expected_current_state_from_batches([out / "batches" / str(i) for i in (1, 2, 3)], c["table"])
        assert any(all(r[k] == x for k, x in c["key"].items()) for r in state)
    cross = cases(manifest, "delete_of_batch2_insert")
    assert {c["table"] for c in cross} >= {"film", "actor", "film_actor"}
    for c in cross:
        evs = key_events(records, c["table"], c["key"])
        assert [(b, op_of(v)) for b, p, o, v in evs] == [(2, "c"), (3, "d")]
        state = oracle.expected_current_state_from_batches([out / "batches" / str(i) for i in (1, 2, 3)], c["table"])
        assert not any(all(r[k] == x for k, x in c["key"].items()) for r in state)


def test_store_tables_encodings(records, sample):
    _, manifest = sample
    # staff (flattened, wrapped): bytea as base64; schema type bytes
    (_, p, off, staff1), = [e for e in events_of(records, "staff", 1) if e[3]["staff_id"] == 1]
    assert staff1["picture"] == "iVBORw0KWgo="  # \\x89504e470d0a5a0a in pagila-data.sql
    raw = [x for o, x in records[(1, "pagila.public.staff", 0)] if o == off][0]
    fields = {f["field"]: f for f in raw["schema"]["fields"]}
    assert fields["picture"]["type"] == "bytes" and fields["last_update"]["name"] == "io.debezium.time.MicroTimestamp"
    # customer: the generated column `active` only in snapshot records
    snap = [v for *_, v in events_of(records, "customer", 1)]
    assert all(v["after"]["active"] == (1 if v["after"]["activebool"] else 0) for v in snap)
    assert any(v["after"]["active"] == 0 for v in snap)
    assert snap[0]["after"]["create_date"] == 13193  # 2006-02-14, days since the epoch
    streamed = [v for b in (2, 3) for *_, v in events_of(records, "customer", b)]
    assert streamed and all("active" not in (v["after"] or v["before"]) for v in streamed)
    wrapped = [x for (b, t, p), recs in records.items() if t == "pagila.public.customer" and b == 2
               for o, x in recs if x is not None]
    assert all("active" not in [f["field"] for f in x["schema"]["fields"][1]["fields"]] for x in wrapped)
    # rental (flattened): tsrange as PostgreSQL's text form
    periods = {v["rental_period"] for *_, v in events_of(records, "rental")}
    assert '["2005-05-24 22:54:33","2005-05-28 19:40:33")' in periods
    assert '["2006-02-14 15:16:03",)' in periods, "an open upper bound from the snapshot"
    assert "empty" in periods
    assert any(p.endswith('"]') for p in periods), "an inclusive upper bound"
    assert any(re.search(r"\.\d{1,6}\"", p) for p in periods), "fractional seconds"
    # columns added to rental by ALTER TABLE in batch 3: timestamptz and tstzrange
    (new_columns, *_) = cases(manifest, "added_column", "rental")
    rental = [(b, v) for b, p, o, v in events_of(records, "rental")]
    assert all("checked_at" not in v and "return_window" not in v for b, v in rental if b < 3)
    assert all("checked_at" in v and "return_window" in v for b, v in rental if b == 3)
    (after,) = [v for b, p, o, v in key_events(records, "rental", new_columns["key"]) if b == 3]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", after["checked_at"])  # ZonedTimestamp
    assert re.fullmatch(r'\["[-0-9 :.]+\+00","[-0-9 :.]+\+00"\)', after["return_window"])
    windows = {v["return_window"] for b, v in rental if b == 3}
    assert "empty" in windows and any(w and w.endswith('+00",)') for w in windows)
    # payment (envelope, 2 partitions): negative decimal; deletes carry only the key
    amounts = [oracle.decode("numeric(5,2)", v["after"]["amount"]) for *_, v in events_of(records, "payment")
               if v["after"]]
    assert min(amounts) < 0 and max(amounts) == Decimal("999.99")
    # REPLICA IDENTITY DEFAULT: a delete's before holds the key, the other NOT NULL columns zeros
    deletes = [v for b in (2, 3) for *_, v in events_of(records, "payment", b) if v["op"] == "d"]
    assert deletes and all(v["before"] == {"payment_id": v["before"]["payment_id"], "customer_id": 0, "staff_id": 0,
                                           "rental_id": 0, "amount": "AA==", "payment_date": 0} for v in deletes)
    film_deletes = [v for *_, v in events_of(records, "film") if v["op"] == "d"]
    assert film_deletes and all(v["before"]["rental_rate"] == "AfM=" and v["before"]["rating"] == "G"
                                and v["before"]["title"] == "" and v["before"]["description"] is None
                                for v in film_deletes), "defaults, zeros, nulls"
    # generated columns: only in snapshot records
    film_snap = [v["after"] for *_, v in events_of(records, "film", 1)]
    assert all(oracle.decode("numeric(5,2)", f["revenue_projection"])
               == oracle.decode("numeric(4,2)", f["rental_rate"]) * f["rental_duration"] for f in film_snap)
    assert all("revenue_projection" not in (v["after"] or v["before"])
               for b in (2, 3) for *_, v in events_of(records, "film", b))
    (move,) = cases(manifest, "cross_partition_update", "payment")
    ops = [(b, v["op"]) for b, p, o, v in key_events(records, "payment", move["key"])]
    assert ops == [(1, "r"), (2, "d"), (2, "c")]


def test_unchanged_toast_placeholders(records, sample):
    out, manifest = sample
    w = manifest["_workload"]
    dirs = [out / "batches" / str(i) for i in (1, 2, 3)]
    forms = set()
    for c in cases(manifest, "toast_unavailable_same_batch") + cases(manifest, "toast_unavailable_next_batch"):
        for b, p, o, v in key_events(records, c["table"], c["key"]):
            row = row_of(v)
            for col, x in row.items():
                if x in ("__debezium_unavailable_value", ["__debezium_unavailable_value"],
                         "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="):
                    forms.add((c["table"], col, json.dumps(x)))
    assert forms == {("film", "description", '"__debezium_unavailable_value"'),
                     ("film", "special_features", '["__debezium_unavailable_value"]'),
                     ("staff", "picture", '"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="')}
    # the values the placeholders stand for are big (stored out of line) and kept
    film = {r["film_id"]: r for r in oracle.expected_current_state_from_batches(dirs, "film")}
    (c,) = cases(manifest, "toast_unavailable_next_batch", "film")
    kept = film[c["key"]["film_id"]]
    assert len(kept["description"]) > 2000 and len(kept["special_features"]) == 60
    assert kept == w.state["film"][(c["key"]["film_id"],)]
    staff = {r["staff_id"]: r for r in oracle.expected_current_state_from_batches(dirs, "staff")}
    assert len(staff[1]["picture"]) == 6000 and staff[1]["store_id"] == 2


def test_mariadb_movies_records(records, sample):
    out, manifest = sample
    evs = events_of(records, "movies")
    assert all("schema" not in v for *_, v in evs), "schemas.enable=false"
    snap = [v for b, p, o, v in evs if b == 1]
    assert len(snap) == 10 and {v["op"] for v in snap} == {"r"}
    assert all("country" not in v["after"] for v in snap), "the column is added in batch 2"
    later = [v for b, p, o, v in evs if b > 1]
    assert all("country" in (v["after"] or v["before"]) for v in later)
    assert all(v["before"] is not None for v in later if v["op"] in ("u", "d")), "full before images"
    (multi,) = cases(manifest, "multi_row_event")
    ev1 = [v for v in later if row_of(v)["movie_id"] == 1][0]
    ev2 = [v for v in later if row_of(v)["movie_id"] == 2][0]
    assert (ev1["source"]["pos"], ev1["source"]["row"]) == (ev2["source"]["pos"], 0)
    assert ev2["source"]["row"] == 1
    (rot,) = cases(manifest, "binlog_rotation")
    mine = [(b, v["source"]) for b, p, o, v in key_events(records, "movies", rot["key"])]
    b2 = [s for b, s in mine if b == 2][-1]
    b3 = [s for b, s in mine if b == 3][-1]
    assert b3["file"] > b2["file"] and b3["pos"] < b2["pos"]
    state = {r["movie_id"]: r for r in oracle.expected_current_state_from_batches(
        [out / "batches" / str(i) for i in (1, 2, 3)], "movies")}
    assert state[rot["key"]["movie_id"]]["country"] == "France"
    assert any(r["country"] is None for r in state.values())


# --- oracle ------------------------------------------------------------------------
def test_oracle_tables_match_pagila_schema():
    schema = pagila.parse_schema((PAGILA_DIR / "pagila-schema.sql").read_text(encoding="utf-8"))
    assert set(oracle.PAGILA_TABLES) == set(pagila.TABLES) and len(pagila.TABLES) == 14
    assert set(oracle.TABLES) - set(oracle.PAGILA_TABLES) == {"movies"}
    for t in oracle.PAGILA_TABLES:
        spec = oracle.TABLES[t]
        assert spec["topic"] == f"pagila.public.{t}"
        assert spec["primary_key"] == schema[t]["primary_key"]
        added = spec.get("added_later", [])
        assert [(c, x) for c, x in spec["columns"].items() if c not in added] == list(schema[t]["columns"].items())
        assert {c: spec["columns"][c] for c in added} == schema[t]["added_later"]


def test_oracle_snapshot_equals_pagila_rows(sample):
    out, _ = sample
    _, rows, _ = pagila.load(PAGILA_DIR)
    for t in pagila.TABLES:
        pk = oracle.TABLES[t]["primary_key"]
        added = dict.fromkeys(oracle.TABLES[t].get("added_later", []))  # not in Pagila: null
        expected = sorted(({**r, **added} for r in rows[t]), key=lambda r: tuple(r[c] for c in pk))
        assert oracle.expected_current_state_from_batches([out / "batches" / "1"], t) == expected, t


def test_oracle_final_state_equals_workload_model(sample):
    out, manifest = sample
    w = manifest["_workload"]
    dirs = [out / "batches" / str(i) for i in (1, 2, 3)]
    for t in pagila.TABLES:
        got = oracle.expected_current_state_from_batches(dirs, t)
        want = [w.state[t][k] for k in sorted(w.state[t])]
        assert got == want, t
        assert len(got) == manifest["expected_final_rows"][t]
    movies = manifest["_movies"]
    got = oracle.expected_current_state_from_batches(dirs, "movies")
    assert got == [movies.state[k] for k in sorted(movies.state)]
    assert len(got) == manifest["expected_final_rows"]["movies"]


def test_oracle_ignores_file_order_and_types(sample):
    out, _ = sample
    files = oracle.files_in([out / "batches" / str(i) for i in (1, 2, 3)])
    shuffled = list(files)
    random.Random(1).shuffle(shuffled)
    for t in ("film", "film_actor", "city"):
        assert oracle.expected_current_state(shuffled, t) == oracle.expected_current_state(files, t)
    film = oracle.expected_current_state(files, "film")[0]
    assert isinstance(film["rental_rate"], Decimal) and film["rental_rate"].as_tuple().exponent == -2
    assert isinstance(film["special_features"], list)
    assert film["last_update"].tzinfo is None


def test_oracle_decoding_basics():
    d = oracle.decode
    assert d("timestamp with time zone", "2022-02-15T09:57:20Z").isoformat() == "2022-02-15T09:57:20"
    assert d("timestamp with time zone", "2022-02-15T10:57:20.123456+01:00").isoformat() == "2022-02-15T09:57:20.123456"
    assert d("timestamp without time zone", 0).isoformat() == "1970-01-01T00:00:00"
    assert d("date", 19000).isoformat() == "2022-01-08"
    assert d("bytea", "AQI=") == b"\x01\x02"
    assert d("boolean", True) is True and d("smallint", 3) == 3 and d("text", None) is None


def test_oracle_orders_by_lsn_not_ts_ms(tmp_path):
    """Hand-written mini stream: the higher LSN wins even with an older ts_ms; partition
    and offset break LSN ties; tombstones are skipped."""
    topic = "pagila.public.actor"
    d = tmp_path / "topics" / topic / "partition=0"
    d.mkdir(parents=True)

    def ev(op, lsn, ts, name, actor_id=1):
        row = {"actor_id": actor_id, "first_name": name, "last_name": "X", "last_update": 0}
        return json.dumps({"before": row if op == "d" else None, "after": None if op == "d" else row,
                           "source": {"lsn": lsn, "ts_ms": ts}, "op": op, "ts_ms": ts})
    (d / f"{topic}+0+0000000000.json").write_text("\n".join([
        ev("r", 100, 1, "SNAP"), ev("u", 300, 5, "NEW"), ev("u", 200, 9, "LATE"),
        ev("u", 300, 5, "NEW-SAME-LSN-LATER-OFFSET"),
        ev("r", 100, 1, "B", actor_id=2), ev("d", 150, 2, "B", actor_id=2), "null",
    ]) + "\n")
    state = oracle.expected_current_state_from_batches([tmp_path], "actor")
    assert [r["first_name"] for r in state] == ["NEW-SAME-LSN-LATER-OFFSET"]


def test_oracle_decodes_ranges_and_placeholders():
    d = oracle.decode
    ts = datetime
    assert d("tsrange", '["2005-05-24 22:53:30","2005-05-26 22:04:30")') == {
        "lower": ts(2005, 5, 24, 22, 53, 30), "upper": ts(2005, 5, 26, 22, 4, 30),
        "lower_inclusive": True, "upper_inclusive": False, "is_empty": False}
    assert d("tsrange", '["2005-05-24 22:53:30.5",)') == {
        "lower": ts(2005, 5, 24, 22, 53, 30, 500000), "upper": None,
        "lower_inclusive": True, "upper_inclusive": False, "is_empty": False}
    assert d("tsrange", "empty") == {"lower": None, "upper": None, "lower_inclusive": False,
                                     "upper_inclusive": False, "is_empty": True}
    assert d("tsrange", '(,"2005-05-26 22:04:30"]')["upper_inclusive"] is True
    assert d("tsrange", "[-infinity,infinity)")["lower"] is None
    assert d("tstzrange", '["2005-05-24 22:53:30+02","2005-05-26 22:04:30.25-03:30")') == {
        "lower": ts(2005, 5, 24, 20, 53, 30), "upper": ts(2005, 5, 27, 1, 34, 30, 250000),
        "lower_inclusive": True, "upper_inclusive": False, "is_empty": False}
    assert oracle.is_unavailable("text", "__debezium_unavailable_value")
    assert oracle.is_unavailable("text[]", ["__debezium_unavailable_value"])
    assert oracle.is_unavailable("bytea", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==")
    assert not oracle.is_unavailable("text", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==")
    assert not oracle.is_unavailable("text[]", ["__debezium_unavailable_value", "x"])
    assert d("int(11)", 3) == 3 and d("year(4)", 1999) == 1999 and d("date", 13193).isoformat() == "2006-02-14"


def test_oracle_toast_and_binlog_order(tmp_path):
    """Hand-written mini streams: a placeholder keeps the latest earlier value; MariaDB
    events are ordered by binlog file, then position, then row; a field missing from an
    older event is null."""
    topic = "pagila.public.staff"
    d = tmp_path / "topics" / topic / "partition=0"
    d.mkdir(parents=True)
    base = {"staff_id": 1, "first_name": "A", "last_name": "B", "address_id": 1, "email": None,
            "store_id": 1, "active": True, "username": "a", "password": None, "last_update": 0}
    rows = [dict(base, picture="AQI="), dict(base, picture="X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
                                              last_name="C")]
    (d / f"{topic}+0+0000000000.json").write_text("\n".join(
        json.dumps(dict(r, __op="u", __lsn=100 + i, __deleted="false")) for i, r in enumerate(rows)) + "\n")
    (got,) = oracle.expected_current_state_from_batches([tmp_path], "staff")
    assert got["picture"] == b"\x01\x02" and got["last_name"] == "C"

    topic = "mariadb.movies_db.movies"
    d = tmp_path / "topics" / topic / "partition=0"
    d.mkdir(parents=True)

    def ev(op, file, pos, row, title, country=...):
        after = {"movie_id": 1, "title": title, "release_year": 2000}
        if country is not ...:
            after["country"] = country
        return json.dumps({"before": None, "after": after, "op": op,
                           "source": {"file": file, "pos": pos, "row": row, "ts_ms": 0}})
    (d / f"{topic}+0+0000000000.json").write_text("\n".join([
        ev("u", "mariadb-bin.000004", 10, 0, "NEWEST"), ev("u", "mariadb-bin.000003", 900, 1, "OLDER", "X"),
        ev("r", "mariadb-bin.000003", 900, 0, "SNAP"),
    ]) + "\n")
    assert oracle.expected_current_state_from_batches([tmp_path], "movies") == [
        {"movie_id": 1, "title": "NEWEST", "release_year": 2000, "country": None}]


def test_missing_pagila_sample_says_where_to_point(tmp_path, capsys):
    from tools.sample_data.__main__ import main

    assert main(["--pagila-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "pagila-schema.sql and pagila-data.sql not found" in error and "PAGILA_DIR" in error, error
    assert not (tmp_path / "out").exists()
