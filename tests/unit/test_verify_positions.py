"""verify's consistent-point rule: silver's position parsed from `_cdc_order`, the
source's log after it read for committed changes to the compared tables (PostgreSQL
WAL records, MariaDB binlog events), and the verdict at/behind."""

from __future__ import annotations

import pytest

from verify.positions import (
    AT, BEHIND, BinlogEvent, BinlogPosition, Gap, Lsn, Relation, WalRecord, binlog_changes, decide,
    parse_cdc_order, wal_changes,
)

# As silver writes them (macros/debezium/change_events.sql, cdc_ordering_key)
PG_ORDER = "00000000000038160736||00000000000000000000|0000000000|0000000000|00000000000000000212"
MARIADB_ORDER = ("00000000000000000000|mariadb-bin.000001|00000000000000004485|0000000000|0000000000|"
                 "00000000000000000014")
NO_POSITION = "00000000000000000000||00000000000000000000|0000000000|0000000000|00000000000000000001"


def test_positions_parse_from_silver_ordering_keys():
    assert parse_cdc_order(PG_ORDER) == Lsn(38160736)
    assert str(Lsn(38160736)) == "0/2464960" and Lsn.parse("0/2464960") == Lsn(38160736)
    assert Lsn.parse("1/0") == Lsn(1 << 32) and str(Lsn(1 << 32)) == "1/0"
    assert parse_cdc_order(MARIADB_ORDER) == BinlogPosition("mariadb-bin.000001", 4485, 0)
    assert parse_cdc_order(None) is None and parse_cdc_order("") is None and parse_cdc_order("a|b") is None
    # a table of no log-based source: no position
    assert parse_cdc_order(NO_POSITION) is None


def test_binlog_positions_order_by_file_number_then_offset():
    assert BinlogPosition("bin.000009", 900) < BinlogPosition("bin.000010", 4)
    assert BinlogPosition("bin.000010", 4) <= BinlogPosition("bin.000010", 4)
    assert not BinlogPosition("bin.000010", 5) <= BinlogPosition("bin.000010", 4)


def test_the_verdict_rule():
    snapshot, reached = Lsn(2000), Lsn(1000)
    assert decide("t", Lsn(1000), reached, None).state == AT
    assert decide("t", snapshot, reached, Gap(True, {"other": 3})).state == AT
    behind = decide("t", snapshot, reached, Gap(True, {"t": 2}))
    assert (behind.state, behind.changes_after) == (BEHIND, 2) and "1,000 bytes of WAL" in behind.detail
    unknown = decide("t", snapshot, reached, Gap(False, reason="the WAL cannot be read"))
    assert (unknown.state, unknown.changes_after) == (BEHIND, None) and "the WAL cannot be read" in unknown.detail
    assert decide("t", snapshot, None, None).state == BEHIND
    files = decide("t", BinlogPosition("bin.000003", 10), BinlogPosition("bin.000001", 500), None)
    assert files.state == BEHIND and "2 binlog file(s) later" in files.detail


def record(lsn: int, xid: int, rm: str, kind: str, description: str = "", node: int | None = None, db: int = 5):
    return WalRecord(Lsn(lsn), xid, rm, kind, description,
                     f"blkref #0: rel 1663/{db}/{node} fork main blk 0" if node is not None else "")


def commit(lsn: int, xid: int, subxacts: str = "") -> WalRecord:
    description = "2026-01-01 00:00:00+00" + (f"; subxacts: {subxacts}" if subxacts else "")
    return record(lsn, xid, "Transaction", "COMMIT", description)


RELATIONS = {"actor": Relation(frozenset({100}), frozenset({100})),
             "payment": Relation(frozenset({201, 202}), frozenset({200, 201, 202}))}


def test_wal_changes_count_what_committed_after_silver_s_last_transaction():
    reached = Lsn(1000)  # silver's newest event: a change of transaction 50 (committed at 1100)
    records = [
        record(900, 60, "Heap", "UPDATE", node=100),      # began before silver's event, commits after 50
        record(950, 50, "Heap", "INSERT", node=100),
        record(1000, 50, "Heap", "UPDATE", node=100),     # silver's event
        record(1020, 55, "Heap", "INSERT", node=100),     # commits before 50: Debezium sent it before
        commit(1050, 55),
        commit(1100, 50),
        record(1200, 70, "Heap", "DELETE", node=201),     # a payment partition
        record(1210, 70, "Heap", "LOCK", node=100),       # a row lock changes no data
        record(1220, 70, "Heap2", "MULTI_INSERT+INIT", node=202),
        record(1230, 71, "Heap", "INSERT", node=100),     # never committed
        record(1240, 72, "Heap", "INSERT", node=100, db=6),  # the same file node in another database
        record(1250, 73, "Heap", "HOT_UPDATE", node=999),  # a table not compared
        commit(1300, 70), commit(1310, 72), commit(1320, 73), commit(1400, 60),
        record(1500, 74, "Heap", "TRUNCATE", "off 0 nrelids 1 relids 100"),
        record(1510, 75, "Heap", "INSERT", node=100),     # a subtransaction of 76
        commit(1520, 74), commit(1530, 76, subxacts="75"),
    ]
    assert wal_changes(records, reached, 50, 5, RELATIONS) == {"actor": 3, "payment": 2}
    # without silver's transaction (a snapshot read), every commit after the position counts, 50 and 55 too
    assert wal_changes(records, reached, None, 5, RELATIONS) == {"actor": 6, "payment": 2}
    assert wal_changes([], reached, 50, 5, RELATIONS) == {}


# SHOW BINLOG EVENTS of the stack's MariaDB after the e2e workload (file mariadb-bin.000001)
EVENTS = [
    (4661, "Gtid", 4703, "BEGIN GTID 0-1-13"),
    (4703, "Annotate_rows", 4781, "update movies set movie_id = 9003 where movie_id = 9002"),
    (4781, "Table_map", 4842, "table_id: 27 (movies_db.movies)"),
    (4842, "Update_rows_v1", 4924, "table_id: 27 flags: STMT_END_F"),
    (4924, "Xid", 4955, "COMMIT /* xid=76 */"),
    (4955, "Gtid", 4997, "BEGIN GTID 0-1-14"),
    (4997, "Table_map", 5055, "table_id: 27 (movies_db.movies)"),
    (5055, "Update_rows_v1", 5150, "table_id: 27 flags: STMT_END_F"),
    (5150, "Table_map", 5208, "table_id: 31 (movies_db.other)"),
    (5208, "Write_rows_v1", 5300, "table_id: 31 flags: STMT_END_F"),
    (5300, "Xid", 5331, "COMMIT /* xid=80 */"),
    (5331, "Gtid", 5373, "GTID 0-1-15"),
    (5373, "Query", 5460, "use `movies_db`; truncate table movies"),
]


def events(start: int) -> list[BinlogEvent]:
    return [BinlogEvent("mariadb-bin.000001", pos, kind, end, info) for pos, kind, end, info in EVENTS if pos >= start]


def test_binlog_changes_skip_silver_s_own_transaction_when_it_was_streamed():
    tables = {"movies_db.movies": "movies"}
    # silver's newest event is the Update_rows at 4842, inside transaction 0-1-13
    assert binlog_changes(events(4842), tables, in_transaction=True) == {"movies": 2}
    # a snapshot's position lies between transactions: the next one is not silver's
    assert binlog_changes(events(4955), tables, in_transaction=False) == {"movies": 2}
    assert binlog_changes(events(4661), tables, in_transaction=False) == {"movies": 3}
    assert binlog_changes(events(5331), {"movies_db.other": "other"}, in_transaction=False) == {}


@pytest.mark.parametrize("text", ["0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF"])
def test_lsn_text_round_trips(text):
    assert str(Lsn.parse(text)) == text
