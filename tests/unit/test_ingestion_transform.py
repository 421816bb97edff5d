"""Pure transforms on in-memory DataFrames (no Hudi)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.spark import session_settings
from ingestion import extract, transform


def expected_lines(content: bytes) -> list[tuple[int, str, bool]]:
    """What number_lines must give, computed in Python: split at \\n, a final \\n starts no
    line, a line's final \\r is dropped, an empty file is one empty line."""
    text = content.decode()
    terminated = text.endswith("\n")
    parts = (text[:-1] if terminated else text).split("\n")
    return [(i, part.removesuffix("\r"), i == len(parts) - 1 and text != "" and not terminated)
            for i, part in enumerate(parts)]


def write_sink_files(spark, root: Path, contents: list[bytes]) -> list[extract.SourceFile]:
    """Each content as a sink file of topic t.s.x (start offset 1000 * its index), listed."""
    folder = root / "t.s.x" / "partition=0"
    folder.mkdir(parents=True)
    for i, content in enumerate(contents):
        (folder / f"t.s.x+0+{i * 1000:010d}.json").write_bytes(content)
    return extract.list_sink(spark, str(root)).files


def numbered_lines(spark, root: Path, contents: list[bytes]) -> dict[int, list[tuple[int, str, bool]]]:
    """Write the contents as sink files, read and number them as a run does:
    file index -> sorted (line index, line, unterminated)."""
    files = write_sink_files(spark, root, contents)
    lines = transform.split_lines(extract.read_lines(spark, files), extract.catalog_frame(spark, files))
    placed = transform.place_lines(lines, transform.split_stats(lines).collect(), files)
    got: dict[int, list] = {}
    for r in placed.collect():
        assert r["_source_line"] == r["_line_index"] + 1
        got.setdefault((r["_offset"] - r["_line_index"]) // 1000, []).append((r["_line_index"], r["line"], r["_unterminated"]))
    return {i: sorted(found) for i, found in got.items()}


ACCENTS = ["\u00e9" * (i % 7) for i in range(300)]  # multi-byte characters: bytes != characters
CONTENTS = [
    b"a\n\nb\n",
    b"a\r\nb",  # no final newline: cut short?
    b"",  # an empty file is one line (its file error quarantines it)
    b"\n",
    b"x\ry\nz\r\n",  # a lone \r is not a line break (it is Hadoop's default)
    "\n".join(f'{{"id":{i},"note":"{accent}"}}' for i, accent in enumerate(ACCENTS)).encode(),
]


@pytest.mark.parametrize("split_bytes", ["128m", "7"])
def test_number_lines_matches_a_plain_split(spark, tmp_path, split_bytes):
    # 7-byte splits put split boundaries inside lines, at line starts and inside \r\n.
    with session_settings(spark, {"spark.sql.files.maxPartitionBytes": split_bytes, "spark.sql.files.openCostInBytes": "1"}):
        got = numbered_lines(spark, tmp_path, CONTENTS)
    assert got == {i: expected_lines(c) for i, c in enumerate(CONTENTS)}


def test_oversized_reason(spark):
    df = spark.createDataFrame(
        [(0, '{"id":1,"__op":"c"}'), (1, '{"id":22222,"__op":"c"}')], "_line_index int, line string",
    ).withColumn("_topic", transform.F.lit("t")).withColumn("_file_error", transform.F.lit(None).cast("string"))
    got = [r["reason"] for r in transform.prepare(df, {"t": ["id"]}, max_record_bytes=20).orderBy("_line_index").collect()]
    assert got == [None, "record of 23 bytes is over the limit of 20 bytes (--max-record-bytes)"]


@pytest.mark.parametrize("split_bytes", ["128m", "7"])
def test_truncated_reason_only_on_a_files_unterminated_last_line(spark, tmp_path, split_bytes):
    """A malformed last line without a newline gets the hint; the same line elsewhere
    (a file that ends with a newline, or not the last line) does not."""
    cut = b'{"id":1,"__op":"c"}\n{"id":2'
    files = write_sink_files(spark, tmp_path, [cut, cut + b"\n", b'{"id":2\n{"id":1,"__op":"c"}'])
    with session_settings(spark, {"spark.sql.files.maxPartitionBytes": split_bytes, "spark.sql.files.openCostInBytes": "1"}):
        catalog = extract.catalog_frame(spark, files)
        lines = transform.attach_file_info(transform.split_lines(extract.read_lines(spark, files), catalog), catalog)
        classified = transform.for_landing(transform.prepare(lines, {"t.s.x": ["id"]}), transform.SPLIT_POSITION)
        placed = transform.place_lines(classified, transform.split_stats(classified).collect(), files)
        got = sorted((r["_offset"], r["_status"], r["reason"]) for r in placed.collect())
    malformed = "malformed JSON or not a JSON object"
    assert got == [
        (0, "landed", None),
        (1, "quarantined", malformed + " (the file's last line has no newline: was the file cut short?)"),
        (1000, "landed", None),
        (1001, "quarantined", malformed),
        (2000, "quarantined", malformed),
        (2001, "landed", None),
    ]


def test_shapes_and_tombstones(spark):
    raw = [
        '{"op":"c","after":{"id":1}}',
        '{"schema":{},"payload":{"op":"r","after":{"id":2}}}',
        '{"id":3,"__op":"u"}',
        '{"schema":{},"payload":{"id":4,"__deleted":"true"}}',
        '{"schema":{},"payload":null}',
        "  ",
        "null",
        "42",
        '{"id":6} trailing',
        '{"before":null,"after":{"id":5},"source":{}}',
    ]
    df = spark.createDataFrame(list(enumerate(raw)), "_line_index int, line string").withColumn("_topic", transform.F.lit("t"))
    df = df.withColumn("_file_error", transform.F.lit(None).cast("string"))
    got = [
        (r["_shape"], r["_op"], r["_deleted"], r["_status"], r["reason"])
        for r in transform.prepare(df, {"t": ["id"]}).orderBy("_line_index").collect()
    ]
    assert got == [
        ("envelope", "c", False, "landed", None),
        ("envelope", "r", False, "landed", None),
        ("flattened", "u", False, "landed", None),
        ("flattened", "d", True, "landed", None),
        (None, None, None, "tombstone", None),
        (None, None, None, "tombstone", None),
        (None, None, None, "tombstone", None),
        (None, None, None, "quarantined", "malformed JSON or not a JSON object"),
        (None, None, None, "quarantined", transform.TRAILING_TEXT),
        ("envelope", None, None, "quarantined", "missing op (expected one of c, u, d, r, t)"),
    ]


def classify_lines(spark, lines: list[tuple[str, str]], keys: dict[str, list[str]]) -> list[tuple]:
    """(topic, line) pairs through transform.prepare: (status, op, deleted, reason) per line."""
    df = spark.createDataFrame([(i, t, line) for i, (t, line) in enumerate(lines)],
                               "_line_index int, _topic string, line string")
    df = df.withColumn("_file_error", transform.F.lit(None).cast("string"))
    return [(r["_status"], r["_op"], r["_deleted"], r["reason"])
            for r in transform.prepare(df, keys).orderBy("_line_index").collect()]


TX_BEGIN = {"status": "BEGIN", "id": "571:53195829", "event_count": None, "data_collections": None,
            "ts_ms": 1700000000000}
TX_END = {"status": "END", "id": "571:53195829", "event_count": 2, "ts_ms": 1700000000100,
          "data_collections": [{"data_collection": "pagila.public.actor", "event_count": 2}]}
DDL = {"source": {"server": "mariadb", "db": "movies_db", "file": "mariadb-bin.000001", "pos": 4242, "row": 0},
       "ts_ms": 1700000000200, "databaseName": "movies_db", "schemaName": None,
       "ddl": "alter table movies add column country varchar(60)",
       "tableChanges": [{"type": "ALTER", "id": "\"movies_db\".\"movies\"", "table": {"columns": []}}]}
KEY_SCHEMA = {"type": "struct", "optional": False, "name": "pagila.public.actor.Key",
              "fields": [{"field": "id", "type": "int32", "optional": False}]}


def test_records_without_an_op(spark):
    """Transaction metadata, schema changes and heartbeats are skipped (counted by status);
    record keys and empty objects are quarantined saying what they look like; rows of the
    ExtractNewRecordState shape without `__op` still land, `__deleted` ones as deletes."""
    j = json.dumps
    got = classify_lines(spark, [
        ("s.transaction", j(TX_BEGIN)),                                        # 0 unkeyed topic
        ("s.transaction", j(TX_END)),                                          # 1
        ("t", j({"schema": {"name": "io.debezium.connector.common.TransactionMetadataValue"},
                 "payload": TX_BEGIN})),                                       # 2 wrapped, keyed topic
        ("mariadb", j(DDL)),                                                   # 3 schema change
        ("t", j(DDL)),                                                         # 4 ... in a keyed topic
        ("t", j({"ts_ms": 1700000000300})),                                    # 5 heartbeat
        ("t", j({"schema": KEY_SCHEMA, "payload": {"id": 7}})),                # 6 record key, JsonConverter
        ("t", j({"id": 7})),                                                   # 7 record key, schemaless
        ("u", j({})),                                                          # 8 empty object
        ("t", j({"id": 8, "name": "row"})),                                    # 9 flattened row, no __ fields
        ("t", j({"id": 9, "name": "row", "__lsn": 5})),                        # 10 add.fields without op
        ("t", j({"id": 9, "name": "row", "__deleted": "true"})),               # 11 rewrite without op
        ("u", j({"a": 1})),                                                    # 12 unkeyed flattened row
    ], {"t": ["id"]})
    key = ("a Kafka record key, not a change event (JsonConverter schema 'pagila.public.actor.Key'): "
           "are the sink's keys written into its value files?")
    assert got == [
        ("skipped", None, None, "Debezium transaction metadata (BEGIN), skipped"),
        ("skipped", None, None, "Debezium transaction metadata (END), skipped"),
        ("skipped", None, None, "Debezium transaction metadata (BEGIN), skipped"),
        ("skipped", None, None, "Debezium schema change (DDL), skipped"),
        ("skipped", None, None, "Debezium schema change (DDL), skipped"),
        ("skipped", None, None, "Debezium heartbeat, skipped"),
        ("quarantined", None, None, key),
        ("quarantined", None, None, "a Kafka record key, not a change event (only the primary key column(s) [id], "
                                    "no op): are the sink's keys written into its value files?"),
        ("quarantined", None, None, "empty JSON object: no op and no row fields"),
        ("landed", None, None, None),  # _deleted null: silver reads it as false
        ("landed", None, None, None),
        ("landed", "d", True, None),
        ("landed", None, None, None),
    ]


def test_a_line_is_exactly_one_json_value(spark):
    """Text after the first JSON object (a second record, junk) quarantines the line whole:
    landing the first object would drop the rest silently."""
    lines = [
        '{"id":1,"__op":"c"} {"id":1,"__op":"d","__deleted":"true"}',  # 0 two records
        '{"id":2,"__op":"c"} junk }',  # 1
        '{"id":3,"__op":"c"}, {"id":4,"__op":"c"}',  # 2
        '{"id":5,"__op":"c"}] {"id":6,"__op":"c"}',  # 3
        '{"id":5,"__op":"c"}}',  # 4
        '{"id":7,"__op":"c"}  ',  # 5 trailing blanks are no value
        '{"id":8,"__op":"c","a":"} {","b":[1,{"c":"]"}]}',  # 6 brackets inside strings and arrays
        '{"schema":{"fields":[{"field":"id"}]},"payload":{"id":9,"__op":"c"}}',  # 7 JsonConverter wrapper
        '{"id":6} trailing',  # 8
    ]
    got = classify_lines(spark, [("t", line) for line in lines], {"t": ["id"]})
    two = ("more than one JSON value on the line (text after the first JSON object): "
           "a line must hold exactly one record")
    assert got == [("quarantined", None, None, two)] * 5 + [("landed", "c", False, None)] * 3 + [
        ("quarantined", None, None, two)]


def test_deleted_flag_must_be_true_or_false(spark):
    """A flattened `__deleted` other than "true"/"false" is quarantined naming field and value
    (`TRUE` landed as a live row: the delete was lost)."""
    lines = [
        '{"id":1,"__deleted":"TRUE"}',
        '{"id":2,"__op":"d","__deleted":"yes"}',
        '{"id":3,"__op":"u","__deleted":1}',
        '{"id":4,"__deleted":"true"}',
        '{"id":5,"__op":"u","__deleted":"false"}',
        '{"id":6,"__op":"u","__deleted":null}',
    ]
    got = classify_lines(spark, [("t", line) for line in lines], {"t": ["id"]})

    def bad(value: str) -> tuple:
        return ("quarantined", None, None, f'field __deleted is \'{value}\' (expected "true" or "false")')

    assert [(s, None, None, r) if s == "quarantined" else (s, op, d, r) for s, op, d, r in got] == [
        bad("TRUE"), bad("yes"), bad("1"),
        ("landed", "d", True, None), ("landed", "u", False, None), ("landed", "u", False, None)]


def test_a_delete_without_its_key_takes_it_from_the_record_key(spark):
    """A delete whose row image lacks the key lands with the key from the Kafka record key
    (`_key`, as kafka_source.to_lines gives it); without one it is quarantined saying how to
    fix the source."""
    src = {"lsn": 10, "ts_ms": 1}
    j = json.dumps
    key_schema = {"type": "struct", "name": "pagila.public.actor.Key", "fields": []}
    rows = [
        (j({"before": None, "after": None, "source": src, "op": "d"}), j({"id": 1})),  # 0
        (j({"before": None, "after": None, "source": src, "op": "d"}),
         j({"schema": key_schema, "payload": {"id": 2}})),  # 1 JsonConverter key
        (j({"before": {"id": None, "name": "x"}, "after": None, "source": src, "op": "d"}), j({"id": 3})),  # 2
        (j({"id": None, "__op": "d", "__deleted": "true"}), j({"id": 4})),  # 3 flattened
        (j({"before": None, "after": None, "source": src, "op": "d"}), None),  # 4 no record key
        (j({"before": {"id": 6}, "after": None, "source": src, "op": "d"}), j({"id": 60})),  # 5 image wins
    ]
    df = spark.createDataFrame([(i, "t", line, key) for i, (line, key) in enumerate(rows)],
                               "_line_index int, _topic string, line string, _key string")
    df = df.withColumn("_file_error", transform.F.lit(None).cast("string"))
    def parsed(text: str | None) -> dict | None:
        return json.loads(text) if text else None

    got = [(r["_status"], parsed(r["_before"]), parsed(r["_after"]), r["reason"])
           for r in transform.prepare(df, {"t": ["id"]}).orderBy("_line_index").collect()]
    assert got == [
        ("landed", {"id": 1}, None, None),
        ("landed", {"id": 2}, None, None),
        ("landed", {"name": "x", "id": "3"}, None, None),
        ("landed", None, {"id": "4"}, None),
        ("quarantined", None, None, "primary key column(s) [id] missing or null in row image `before` (op 'd')"
                                    + transform.KEY_LOST_WITH_RECORD_KEY),
        ("landed", {"id": 6}, None, None),
    ]
    # sink files without key files: the reason names both fixes
    no_key = transform.prepare(df.drop("_key").where("_line_index = 0"), {"t": ["id"]}).first()
    assert (no_key["_status"], no_key["reason"]) == (
        "quarantined",
        "primary key column(s) [id] missing or null in row image `before` (op 'd')" + transform.KEY_LOST_WITHOUT_RECORD_KEY)


def test_records_that_cannot_be_kept_as_sent(spark, tmp_path):
    """Spark's reader would change these records without a word: invalid UTF-8 becomes
    U+FFFD, NaN and Infinity tokens become strings, a number beyond a double becomes
    "Infinity". Each is quarantined with its reason; what it keeps as sent lands."""
    records = [
        b'{"op":"c","after":{"id":1,"name":"caf\xe9"}}',  # 0 Latin-1, not UTF-8
        b'{"op":"c","after":{"id":2,"x":NaN}}',  # 1
        b'{"op":"c","after":{"id":3,"x":-Infinity}}',  # 2
        b'{"op":"c","after":{"id":4,"x":1e400}}',  # 3
        '{"op":"c","after":{"id":5,"name":"a real \ufffd in UTF-8"}}'.encode(),  # 4 lands
        b'{"op":"c","after":{"id":6,"x":"NaN","y":"Infinity"}}',  # 5 strings land
        b'{"__op":"c","id":7,"x":NaN}',  # 6 flattened
    ]
    files = write_sink_files(spark, tmp_path, [b"\n".join(records) + b"\n"])
    catalog = extract.catalog_frame(spark, files)
    lines = transform.attach_file_info(transform.split_lines(extract.read_lines(spark, files), catalog), catalog)
    placed = transform.place_lines(
        transform.for_landing(transform.prepare(lines, {"t.s.x": ["id"]}), transform.SPLIT_POSITION),
        transform.split_stats(lines).collect(), files)
    got = [(r["_status"], r["reason"]) for r in placed.orderBy("_offset").collect()]
    assert got == [
        ("quarantined", transform.NOT_UTF8),
        ("quarantined", transform.NON_NUMERIC),
        ("quarantined", transform.NON_NUMERIC),
        ("quarantined", transform.BEYOND_DOUBLE),
        ("landed", None),
        ("landed", None),
        ("quarantined", transform.NON_NUMERIC),
    ]


def test_query_based_rows(spark):
    """Rows of a topic declared query-based land with op r and their updated-at column as
    log position; the same row on another topic is a flattened row without op, as before;
    a query-based row without a usable updated-at value is quarantined with the reason."""
    lines = [
        ("q.products", '{"id":1,"name":"tea","changed_at":1717401600123}'),
        ("q.products", '{"id":2,"name":"jam","changed_at":"2024-06-03T08:00:00.5Z"}'),
        ("q.products", '{"id":3,"name":"oats"}'),
        ("q.products", '{"id":4,"name":"rye","changed_at":"yesterday"}'),
        ("q.products", '{"id":5,"name":"kelp","changed_at":-5}'),
        ("q.products", '{"id":6,"__op":"u","changed_at":1}'),  # a Debezium record keeps its op
        ("q.products", '{"status":"BEGIN","id":"1:2","event_count":null}'),  # still skipped
        ("other", '{"id":1,"name":"tea","changed_at":1717401600123}'),
    ]
    df = spark.createDataFrame([(i, t, line) for i, (t, line) in enumerate(lines)],
                               "_line_index int, _topic string, line string")
    df = df.withColumn("_file_error", transform.F.lit(None).cast("string"))
    prepared = transform.prepare(df, {"q.products": ["id"], "other": ["id"]}, updated_at={"q.products": "changed_at"})
    got = [(r["_status"], r["_op"], r["_deleted"], r["_source_lsn"], r["_source_ts_ms"], r["reason"])
           for r in prepared.orderBy("_line_index").collect()]
    bad = ("query-based topic: updated-at column `changed_at` is missing or not a time ('%s'; expected epoch "
           "milliseconds or ISO-8601, not before 1970)")
    assert got == [
        ("landed", "r", False, 1717401600123000, 1717401600123, None),
        ("landed", "r", False, 1717401600500000, 1717401600500, None),
        ("quarantined", "r", False, None, None, bad % "null"),
        ("quarantined", "r", False, None, None, bad % "yesterday"),
        ("quarantined", "r", False, None, None, bad % "-5"),
        ("landed", "u", False, None, None, None),
        ("skipped", "r", False, None, None, "Debezium transaction metadata (BEGIN), skipped"),
        ("landed", None, None, None, None, None),  # unchanged: a flattened row without op
    ]
