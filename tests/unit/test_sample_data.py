"""Fast tests of the sample-data generator (tools.sample_data) and the test oracle."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from decimal import Decimal

import pytest


from tests.support import oracle  # noqa: E402
from tests.support.paths import PAGILA_DIR, ROOT, require_pagila  # noqa: E402
from tools.sample_data import DEFAULT_SEED, TOPIC_LAYOUT, debezium, generate, pagila  # noqa: E402




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
    topic = debezium.topic_for(table)
    out = []
    for (b, t, p), recs in sorted(records.items()):
        if t == topic and (batch is None or b == batch):
            out += [(b, p, off, payload(v)) for off, v in recs if v is not None]
    return out


def lsn_of(v):
    return v["source"]["lsn"] if "source" in v else v["__lsn"]


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
    assert topics == {f"pagila.public.{t}" for t in pagila.TABLES}
    parts = {(t, p) for (_, t, p) in records}
    assert {p for t, p in parts if t == "pagila.public.film_actor"} == {0, 1}
    assert {p for t, p in parts if t != "pagila.public.film_actor"} == {0}


def test_film_actor_key_always_on_same_partition(records):
    seen = {}
    for b, p, off, v in events_of(records, "film_actor"):
        r = row_of(v)
        k = (r["actor_id"], r["film_id"])
        assert seen.setdefault(k, p) == p


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
                assert src["version"] == "2.7.3.Final" and src["connector"] == "postgresql"
                assert src["name"] == "pagila" and src["db"] == "pagila" and src["schema"] == "public"
                assert src["table"] == table and src["xmin"] is None and pl["transaction"] is None
                assert json.loads(src["sequence"])[1] == str(src["lsn"])
                assert src["ts_us"] // 1000 == src["ts_ms"] and src["ts_ns"] == src["ts_us"] * 1000
                if pl["op"] == "d":
                    assert pl["after"] is None and pl["before"] is not None
                    nxt = [x for o, x in recs if o == off + 1]
                    assert nxt == [None], "every envelope delete is followed by a tombstone"
                else:
                    assert pl["after"] is not None
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
        assert 10 <= len(evs) <= 150
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
            assert a["source"]["txId"] == b["source"]["txId"]
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
        assert [(b, v.get("op")) for b, p, o, v in evs] == [(2, "c"), (3, "d")]
        state = oracle.expected_current_state_from_batches([out / "batches" / str(i) for i in (1, 2, 3)], c["table"])
        assert not any(all(r[k] == x for k, x in c["key"].items()) for r in state)


# --- oracle ------------------------------------------------------------------------
def test_oracle_tables_match_pagila_schema():
    schema = pagila.parse_schema((PAGILA_DIR / "pagila-schema.sql").read_text(encoding="utf-8"))
    assert set(oracle.TABLES) == set(pagila.TABLES)
    for t, spec in oracle.TABLES.items():
        assert spec["topic"] == f"pagila.public.{t}"
        assert spec["primary_key"] == schema[t]["primary_key"]
        assert list(spec["columns"].items()) == list(schema[t]["columns"].items())


def test_oracle_snapshot_equals_pagila_rows(sample):
    out, _ = sample
    _, rows, _ = pagila.load(PAGILA_DIR)
    for t in pagila.TABLES:
        pk = oracle.TABLES[t]["primary_key"]
        expected = sorted(rows[t], key=lambda r: tuple(r[c] for c in pk))
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
