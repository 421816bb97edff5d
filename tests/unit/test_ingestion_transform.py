"""Pure transforms on in-memory DataFrames (no Hudi)."""

from __future__ import annotations

from ingestion import transform


def lines_of(spark, text: str) -> list[tuple[int, str, bool]]:
    df = spark.createDataFrame([("f", text)], "_source_file string, text string")
    return [(r["_line_index"], r["line"], r["_unterminated"])
            for r in transform.split_lines(df).orderBy("_line_index").collect()]


def test_split_lines_trailing_newline_is_not_a_line(spark):
    assert lines_of(spark, "a\n\nb\n") == [(0, "a", False), (1, "", False), (2, "b", False)]
    assert lines_of(spark, "a\r\nb") == [(0, "a", False), (1, "b", True)]  # no final newline: cut short?
    assert lines_of(spark, "") == [(0, "", False)]  # an empty file is one line (its file error quarantines it)
    assert lines_of(spark, "\n") == [(0, "", False)]


def test_oversized_and_truncated_reasons(spark):
    df = spark.createDataFrame(
        [(0, '{"id":1,"__op":"c"}', False), (1, '{"id":22222,"__op":"c"}', False), (2, '{"id":3', True)],
        "_line_index int, line string, _unterminated boolean",
    ).withColumn("_topic", transform.F.lit("t")).withColumn("_file_error", transform.F.lit(None).cast("string"))
    got = [r["reason"] for r in transform.prepare(df, {"t": ["id"]}, max_record_bytes=20).orderBy("_line_index").collect()]
    assert got == [
        None,
        "record of 23 bytes is over the limit of 20 bytes (--max-record-bytes)",
        "malformed JSON or not a JSON object (the file's last line has no newline: was the file cut short?)",
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
        (None, None, None, "quarantined", "malformed JSON or not a JSON object"),
        ("envelope", None, None, "quarantined", "missing op (expected one of c, u, d, r, t)"),
    ]
