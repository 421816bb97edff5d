"""Transform: pure DataFrame -> DataFrame steps from raw file text to bronze and quarantine rows.

Every line is parsed top level as `map<string,string>`: Spark keeps nested objects
(`before`, `after`, `source`) as their JSON text, which is exactly what bronze stores.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Iterable, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from ingestion import formats
from ingestion.extract import SourceFile, first_position

MAP = "map<string,string>"
# The envelope's `source` fields bronze keeps as columns. All strings, as in MAP (any JSON
# value is kept as its text), and cast afterwards: only these fields are materialized.
SOURCE_FIELDS = "struct<lsn:string,file:string,pos:string,row:string,ts_ms:string,txId:string,gtid:string,snapshot:string>"
OPS = ("c", "u", "d", "r", "t")
OPS_TEXT = ", ".join(OPS)

STATUS_LANDED = "landed"
STATUS_QUARANTINED = "quarantined"
STATUS_TOMBSTONE = "tombstone"
STATUS_SKIPPED = "skipped"
# A copy of an offset another file of the run holds with the same record: one copy is kept.
STATUS_DUPLICATE = "duplicate"

SHAPE_ENVELOPE = "envelope"
SHAPE_FLATTENED = "flattened"

MALFORMED = "malformed JSON or not a JSON object"
TRUNCATED_HINT = " (the file's last line has no newline: was the file cut short?)"
# Kafka's default message limit is 1 MiB; Debezium records with large TOAST values can
# be bigger. Over this, a record goes to quarantine whole instead of into bronze.
MAX_RECORD_BYTES = 16 * 1024 * 1024

BRONZE_COLUMNS: list[tuple[str, str]] = [
    ("_topic", "string"),
    ("_partition", "int"),
    ("_offset", "bigint"),
    ("_source_file", "string"),
    ("_source_line", "int"),
    ("_shape", "string"),
    ("_op", "string"),
    ("_deleted", "boolean"),
    ("_source_lsn", "bigint"),
    ("_source_binlog_file", "string"),
    ("_source_binlog_pos", "bigint"),
    ("_source_binlog_row", "int"),
    ("_source_ts_ms", "bigint"),
    ("_source_tx_id", "string"),
    ("_source_snapshot", "string"),
    ("_ts_ms", "bigint"),
    ("_before", "string"),
    ("_after", "string"),
    ("_source", "string"),
    ("_ingested_at", "timestamp"),
]
BRONZE_KEY = ["_topic", "_partition", "_offset"]

QUARANTINE_COLUMNS: list[tuple[str, str]] = [
    ("_topic", "string"),
    ("_partition", "int"),
    ("_offset", "bigint"),
    ("_source_file", "string"),
    ("_source_line", "int"),
    ("reason", "string"),
    ("raw", "string"),
    ("_ingested_at", "timestamp"),
]
QUARANTINE_KEY = ["_source_file", "_source_line"]


# Where a line of a sink file sits before its offset is known: its file split (`_block`,
# the split's start byte), its `_row_id` (rising by one from line to line inside a split)
# and its bytes as stored (`_line_bytes`, with any `\r`). A run caches its lines with these
# and numbers them afterwards (split_positions, place_lines) from counts taken on the
# cache, so the files are read once.
SPLIT_POSITION = ["_block", "_row_id", "_line_bytes"]
# Where a line sits once numbered (and where a Kafka record sits from the start).
LINE_POSITION = ["_offset", "_source_line"]
POSITIONS_SCHEMA = "_source_file string, _block bigint, _offset_base bigint, _line_base bigint, _last_row_id bigint"


def split_lines(raw: DataFrame, catalog: DataFrame) -> DataFrame:
    r"""(_source_file, _block, _row_id, line) of extract.read_lines -> the same with
    `_line_bytes` and a `\r` before the newline dropped from `line`; plus one line for
    each file Spark reads no line from: empty for an empty file, null for a file not read
    (their file-level error sends it to quarantine: nothing is silently skipped)."""
    carried = [c for c in raw.columns if c not in LINES_COLUMNS]  # e.g. fill_record_keys's
    lines = raw.select(
        *carried,
        "_source_file",
        "_block",
        "_row_id",
        F.octet_length("line").alias("_line_bytes"),
        # Not regexp_replace(line, '\r\z', ''): that regex is tried at every byte of every
        # line (docs/decisions/ingestion-one-pass.md).
        # Column.substr, not F.expr: a SQL expression's functions are looked up in the
        # session catalog, which is the metastore's (docs/decisions/ingestion-one-pass.md).
        F.when(F.col("line").endswith("\r"), F.col("line").substr(F.lit(1), F.length("line") - 1))
        .otherwise(F.col("line")).alias("line"),
    )
    empty = catalog.where((F.col("_size") == 0) | ~F.col("_read")).select(
        *[F.lit(None).cast(raw.schema[c].dataType).alias(c) for c in carried],
        "_source_file",
        F.lit(0).cast("bigint").alias("_block"),
        F.lit(0).cast("bigint").alias("_row_id"),
        F.lit(0).alias("_line_bytes"),
        F.when(F.col("_read"), F.lit("")).alias("line"),
    )
    return lines.unionByName(empty)


LINES_COLUMNS = ("_source_file", "_block", "_row_id", "line")
KEYS_MISMATCH = ("its record keys file {keys} has {keys_lines} line(s) for {lines} record(s): the S3 sink "
                 "writes one key per record, in order, so no key can be matched to its record; copy both files again")


def _numbered(lines: DataFrame) -> DataFrame:
    """Lines of read_lines with `_line_index` (0-based in the file) and `_file_lines`: a
    window over the file, for the few files that have a record keys file."""
    in_file = Window.partitionBy("_source_file")
    return lines.withColumns({
        "_line_index": F.row_number().over(in_file.orderBy("_block", "_row_id")) - 1,
        "_file_lines": F.count(F.lit(1)).over(in_file),
    })


def fill_record_keys(keyed: DataFrame, key_lines: DataFrame, keys_files: Mapping[str, str]) -> DataFrame:
    """Lines of values files (read_lines) with the record key of each in `_key`: line i of
    its keys file (extract.read_key_lines), `_keys_file` true; `keys_files` maps a values
    file's URI to its keys file's name. When the two files' line counts differ, no key can
    be matched: `_keys_error` holds the reason, which quarantines the file's records."""
    keys = _numbered(key_lines).select(
        "_source_file", "_line_index", F.col("_file_lines").alias("_key_lines"),
        F.when(F.col("line").endswith("\r"), F.col("line").substr(F.lit(1), F.length("line") - 1))
        .otherwise(F.col("line")).alias("_key"))
    names = keyed.sparkSession.createDataFrame(list(keys_files.items()), "_source_file string, _keys_name string")
    per_file = keys.groupBy("_source_file").agg(F.max("_key_lines").alias("_key_lines"))
    joined = (
        _numbered(keyed)
        .join(keys.drop("_key_lines"), ["_source_file", "_line_index"], "left")
        .join(per_file, "_source_file", "left")
        .join(F.broadcast(names), "_source_file", "left")
    )
    matched = F.coalesce(F.col("_key_lines"), F.lit(0)) == F.col("_file_lines")
    return joined.select(
        *LINES_COLUMNS,
        F.when(matched, F.col("_key")).alias("_key"),
        F.lit(True).alias("_keys_file"),
        F.when(~matched, F.format_string(
            KEYS_MISMATCH.format(keys="%s", keys_lines="%d", lines="%d"),
            F.col("_keys_name"), F.coalesce(F.col("_key_lines"), F.lit(0)), F.col("_file_lines"))).alias("_keys_error"),
    )


def without_record_keys(lines: DataFrame) -> DataFrame:
    """Lines of values files without a keys file, with the columns fill_record_keys adds."""
    return lines.withColumns({
        "_key": F.lit(None).cast("string"), "_keys_file": F.lit(False), "_keys_error": F.lit(None).cast("string")})


def split_stats(lines: DataFrame) -> DataFrame:
    """Per (file, split): its first `_row_id`, lines and bytes, and, on classified lines,
    the lines of each status (one small job on a run's cache gives place_lines what it
    needs and the run its per-file counts)."""
    counts = status_counts() if "_status" in lines.columns else [F.count(F.lit(1)).alias("lines")]
    return lines.groupBy("_source_file", "_block").agg(
        F.min("_row_id").alias("first_row_id"), F.sum("_line_bytes").alias("bytes"), *counts)


def split_positions(stats: Iterable[Mapping], files: Iterable[SourceFile]) -> list[tuple]:
    r"""Rows of POSITIONS_SCHEMA from the rows of split_stats and the files' sizes and
    start offsets.

    A line's index in its file is the lines of the file's earlier splits plus its place in
    its split: `_line_base + _row_id`; its offset `_offset_base + _row_id`. `_last_row_id`
    is the `_row_id` of the file's last line when the file does not end with a newline
    (the bytes not in a line are the `\n`s: one per line when it does), else null."""
    by_file: dict[str, list[Mapping]] = {}
    for row in stats:
        by_file.setdefault(row["_source_file"], []).append(row)
    positions = []
    for f in files:
        splits = sorted(by_file.get(f.uri, []), key=lambda r: r["_block"])
        file_lines = sum(r["lines"] for r in splits)
        # Only a format stored as lines has lines of its own; others' are rendered records.
        unterminated = formats.get(f.format).stored_as_lines and f.size > 0 and f.size - sum(r["bytes"] for r in splits) < file_lines
        before = 0
        for r in splits:
            base = before - r["first_row_id"]
            last = r["first_row_id"] + r["lines"] - 1 if unterminated and before + r["lines"] == file_lines else None
            first = first_position(f)
            positions.append((f.uri, r["_block"], None if first is None else first + base, base, last))
            before += r["lines"]
    return positions


def place_lines(lines: DataFrame, stats: Iterable[Mapping], files: Iterable[SourceFile]) -> DataFrame:
    """Lines with SPLIT_POSITION -> the same with LINE_POSITION (and `_line_index`,
    `_unterminated`) instead, from the rows of split_stats on them and the files they
    were read from (split_positions). A classified line's `reason` says when a malformed
    line is the last of a file that does not end with a newline."""
    positions = lines.sparkSession.createDataFrame(split_positions(stats, files), POSITIONS_SCHEMA)
    placed = lines.join(F.broadcast(positions), ["_source_file", "_block"])
    index = (F.col("_line_base") + F.col("_row_id")).cast("int")
    placed = placed.withColumns({
        "_line_index": index,
        "_offset": F.col("_offset_base") + F.col("_row_id"),
        "_source_line": index + 1,
        "_unterminated": F.coalesce(F.col("_row_id") == F.col("_last_row_id"), F.lit(False)),
    })
    if "reason" in lines.columns:
        placed = placed.withColumn(
            "reason",
            F.when((F.col("reason") == MALFORMED) & F.col("_unterminated"), F.lit(MALFORMED + TRUNCATED_HINT))
            .otherwise(F.col("reason")),
        )
    return placed.drop(*SPLIT_POSITION, "_offset_base", "_line_base", "_last_row_id")


def attach_file_info(lines: DataFrame, catalog: DataFrame) -> DataFrame:
    """Add topic, partition, table and file-level errors from the file list (and from
    fill_record_keys, when its keys file does not match the values file)."""
    joined = lines.join(F.broadcast(catalog), "_source_file", "left").drop("_start_offset", "_size", "_read")
    if "_keys_error" not in joined.columns:
        return joined
    return joined.withColumn("_file_error", F.coalesce("_file_error", "_keys_error")).drop("_keys_error")


def _has_key(m: Column, key: str) -> Column:
    return F.array_contains(F.map_keys(m), key)


# NaN and Infinity are not JSON numbers; Spark's reader would take them and keep them as
# the strings "NaN" and "Infinity", so a record holding one could not be kept as sent.
STRICT_JSON = {"allowNonNumericNumbers": "false"}
NON_NUMERIC = ("a non-numeric number (NaN or Infinity) is not JSON: the record cannot be kept as sent; "
               "accepted: JSON numbers, or the value as a string")
NOT_UTF8 = ("bytes that are not UTF-8: the reader would replace them with U+FFFD, so the record cannot be "
            "kept as sent; the S3 sink writes UTF-8: was the file written by another tool or cut?")
BEYOND_DOUBLE = ("a number beyond a double's range (e.g. 1e400) in a row image: it would be kept as \"Infinity\"; "
                 "send it as a string or a Connect Decimal")
# Spark's reader re-writes the nested objects it keeps as text; these are what it cannot
# write back as sent.
REPLACEMENT_CHARACTER = "\ufffd"

TRAILING_TEXT = ("more than one JSON value on the line (text after the first JSON object): "
                 "a line must hold exactly one record")


def _line_values(line: str) -> Column:
    """The line parsed as the elements of a JSON array (`[` line `]`): from_json stops after
    the first JSON value and ignores what follows, but inside an array Jackson requires a
    comma or `]` after each element, so `{...} {...}` or `{...} junk` fails to parse and
    `{...}, {...}` gives two elements. Null unless the line ends with `}` (an object)."""
    return F.when(F.rtrim(line).endswith("}"), F.from_json(F.concat(F.lit("["), F.col(line), F.lit("]")),
                                                          "array<" + MAP + ">", STRICT_JSON))


def _exactly_one_object(line: str, values: Column) -> Column:
    """The line's JSON object when the line holds exactly that one value, else null.

    The array parse misses one case: a `]` right after the first object closes the array
    early (`{...}] {...}`), and Jackson ignores what follows the array. Lines with a `]`
    are also read as the value of a one-key object (`{"v":` line `}`), which the same `]`
    makes invalid (only a `}` could close that early, and the array parse rejects that)."""
    in_object = F.json_object_keys(F.concat(F.lit('{"v":'), F.col(line), F.lit("}")))
    single = (F.size(values) == 1) & (~F.col(line).contains("]") | (F.size(in_object) == 1))
    return F.when(single, values[0])


def parse_records(lines: DataFrame) -> DataFrame:
    """Parse each line, unwrap JsonConverter `{schema, payload}` and decide the shape.

    Adds `m` (the record as map<string,string>, null when not a JSON object),
    `_tombstone` and `_shape`."""
    # By column, not as an expression again: each copy of the expression parses the line again.
    parsed = F.col("_outer")
    wrapped = parsed.isNotNull() & (F.size(parsed) == 2) & _has_key(parsed, "schema") & _has_key(parsed, "payload")
    trimmed = F.trim("line")
    # Columns in one withColumns per step that reads the step before: each withColumn
    # call analyzes the whole plan again (docs/decisions/ingestion-one-pass.md).
    return (
        lines.withColumn("_values", _line_values("line"))
        .withColumn("_outer", _exactly_one_object("line", F.col("_values")))
        .withColumn("_wrapped", F.coalesce(wrapped, F.lit(False)))
        .withColumns({
            "m": F.when(F.col("_wrapped"), F.from_json(F.col("_outer")["payload"], MAP)).otherwise(F.col("_outer")),
            # A Kafka tombstone (null value) shows up as an empty line, `null`, or a wrapper with a null payload.
            "_tombstone":
                (trimmed == "") | (trimmed == "null") | (F.col("_wrapped") & F.col("_outer")["payload"].isNull()),
            # Its JSON text only: parsed (for its name) just for records without an op.
            "_value_schema": F.when(F.col("_wrapped"), F.col("_outer")["schema"]),
        })
        # Debezium envelopes always carry `op`; a missing `op` next to before/after/source is still an envelope.
        .withColumn(
            "_shape",
            F.when(
                _has_key(F.col("m"), "op")
                | (_has_key(F.col("m"), "before") & _has_key(F.col("m"), "after") & _has_key(F.col("m"), "source")),
                F.lit(SHAPE_ENVELOPE),
            ).when(F.col("m").isNotNull(), F.lit(SHAPE_FLATTENED)),
        )
        .drop("_values", "_outer", "_wrapped")
    )


def extract_change_fields(records: DataFrame) -> DataFrame:
    """Debezium metadata out of either shape into the bronze `_op`, `_source_*`, ... columns.

    Flattened `_after` is `to_json` of the non-`__` fields of the string map, so every
    value is a JSON string there (numbers included); envelope images keep their JSON types."""
    m = F.col("m")
    envelope = F.col("_shape") == SHAPE_ENVELOPE
    src = F.col("_src")
    flat_op = F.coalesce(m["__op"], F.when(m["__deleted"] == "true", F.lit("d")))

    def pick(envelope_value: Column, flattened_value: Column, cast: str) -> Column:
        return F.when(envelope, envelope_value).otherwise(flattened_value).cast(cast)

    op = F.when(envelope, m["op"]).otherwise(flat_op)
    return (
        # Its own column, parsed once: Spark does not share an expression between CASE
        # branches, so inlined in each field below `source` would be parsed seven times.
        records.withColumn("_src", F.when(envelope, F.from_json(m["source"], SOURCE_FIELDS)))
        .withColumns({
            "_op": op,
            "_deleted": F.when(envelope, m["op"] == "d").otherwise(F.coalesce(m["__deleted"] == "true", flat_op == "d")),
            "_source_lsn": pick(src["lsn"], m["__lsn"], "bigint"),
            "_source_binlog_file": pick(src["file"], m["__file"], "string"),
            "_source_binlog_pos": pick(src["pos"], m["__pos"], "bigint"),
            "_source_binlog_row": pick(src["row"], m["__row"], "int"),
            "_source_ts_ms": pick(src["ts_ms"], m["__source_ts_ms"], "bigint"),
            "_source_tx_id":
                pick(F.coalesce(src["txId"], src["gtid"]), F.coalesce(m["__txId"], m["__gtid"]), "string"),
            "_source_snapshot": pick(src["snapshot"], m["__snapshot"], "string"),
            "_ts_ms": pick(m["ts_ms"], m["__ts_ms"], "bigint"),
            "_before": F.when(envelope, m["before"]),
            "_after":
                F.when(envelope, m["after"]).otherwise(F.to_json(F.map_filter(m, lambda k, v: ~k.startswith("__")))),
            "_source":
                F.when(envelope, m["source"]).otherwise(F.to_json(F.map_filter(m, lambda k, v: k.startswith("__")))),
        })
        .drop("_src")
        .transform(fill_key_from_record_key)
    )


def _merged(image: Column, key: Column) -> Column:
    """The row image with the key's fields where the image lacks them or holds null."""
    return F.map_concat(
        F.map_filter(image, lambda k, v: v.isNotNull() | key[k].isNull()),
        F.map_filter(key, lambda k, v: image[k].isNull()),
    )


def fill_key_from_record_key(records: DataFrame) -> DataFrame:
    """A delete whose row image lacks its key (PostgreSQL without REPLICA IDENTITY FULL or
    a primary key sends `before: null`) gets the key's fields from the Kafka record key
    in `_key` (its JSON text, JsonConverter wrapper or not), so silver can delete the row.
    Adds `_key_filled`; without a `_key` column (sink files without key files) nothing changes."""
    if "_key" not in records.columns:
        return records.withColumn("_key_filled", F.lit(False))
    m = F.col("m")
    envelope = F.col("_shape") == SHAPE_ENVELOPE
    outer = F.from_json(F.col("_key"), MAP)
    wrapped = (F.size(outer) == 2) & _has_key(outer, "schema") & _has_key(outer, "payload")
    key_text = F.when(wrapped, outer["payload"]).otherwise(F.col("_key"))
    # Parsed only for deletes, in a column of its own (used several times below).
    with_key = records.withColumn(
        "_key_fields", F.when(F.coalesce(F.col("_deleted"), F.lit(False)) & m.isNotNull(), F.from_json(key_text, MAP)))
    key = F.col("_key_fields")
    image = F.when(envelope, F.from_json(F.col("_before"), MAP)).otherwise(
        F.map_filter(m, lambda k, v: ~k.startswith("__")))
    lacks = F.exists(F.map_keys(key), lambda k: image[k].isNull())
    fill = F.coalesce(key.isNotNull() & (F.size(key) > 0) & lacks, F.lit(False))
    envelope_before = F.when(F.col("_before").isNull(), key_text).otherwise(F.to_json(_merged(image, key)))
    return (
        with_key.withColumn("_key_filled", fill)
        .withColumns({
            "_before": F.when(F.col("_key_filled") & envelope, envelope_before).otherwise(F.col("_before")),
            "_after": F.when(F.col("_key_filled") & ~envelope, F.to_json(_merged(image, key)))
            .otherwise(F.col("_after")),
        })
        .drop("_key_fields")
    )


KEY_LOST_WITHOUT_RECORD_KEY = (
    ": the delete's key was lost upstream and this sink file has no record keys file; give the source "
    "table a full before image (`ALTER TABLE ... REPLICA IDENTITY FULL`, or DEFAULT with a primary key), "
    "have the S3 sink write the keys (`store.kafka.keys=true`: `<name>.keys.json` beside each file), or "
    "ingest the topic from Kafka, where the record key fills it in")
KEY_LOST_WITH_RECORD_KEY = (
    ": the delete's key was lost upstream and its Kafka record key is null or lacks it too; give the "
    "source table a full before image (`ALTER TABLE ... REPLICA IDENTITY FULL`, or DEFAULT with a "
    "primary key)")


def _without_op_skip(m: Column) -> Column:
    """What a record without any op is when Debezium sends it besides the change events
    (transaction metadata, a schema change, a heartbeat): the reason it is skipped, else null."""
    transaction = (
        m["status"].isin("BEGIN", "END") & _has_key(m, "id")
        & (_has_key(m, "event_count") | _has_key(m, "data_collections"))
    )
    schema_change = _has_key(m, "ddl") & (_has_key(m, "databaseName") | _has_key(m, "tableChanges"))
    heartbeat = (F.size(m) == 1) & _has_key(m, "ts_ms")
    return (
        F.when(transaction, F.format_string("Debezium transaction metadata (%s), skipped", m["status"]))
        .when(schema_change, F.lit("Debezium schema change (DDL), skipped"))
        .when(heartbeat, F.lit("Debezium heartbeat, skipped"))
    )


def _without_op_reason(m: Column, key_columns: Column) -> Column:
    """Why a record without any op that is not a row is quarantined: it looks like a Kafka
    record key (by its JsonConverter schema's name, or, schemaless, holding exactly the
    declared key columns and no `__` field) or it is empty; else null (a flattened row)."""
    schema_name = F.from_json(F.col("_value_schema"), "struct<name:string>")["name"]
    fields = F.map_keys(m)
    only_key = (
        key_columns.isNotNull()
        & ~F.exists(fields, lambda k: k.startswith("__"))
        & (F.array_sort(fields) == F.array_sort(key_columns))
    )
    hint = "are the sink's keys written into its value files?"
    return (
        F.when(F.coalesce(schema_name.endswith(".Key"), F.lit(False)), F.format_string(
            f"a Kafka record key, not a change event (JsonConverter schema '%s'): {hint}", schema_name))
        .when(only_key, F.format_string(
            f"a Kafka record key, not a change event (only the primary key column(s) [%s], no op): {hint}",
            F.array_join(key_columns, ", ")))
        .when(F.size(m) == 0, F.lit("empty JSON object: no op and no row fields"))
    )


def wire_format_reason(line: Column) -> Column:
    """The reason for a line in the Confluent wire format (magic byte 0, a 4-byte schema
    id, then the serialized record), null for others. The id shows when its bytes are
    ASCII: the text reader replaces bytes that are not UTF-8."""
    id_bytes = F.substring(line, 2, 4)
    schema_id = F.when(F.octet_length(id_bytes) == 4, F.conv(F.hex(id_bytes), 16, 10)).otherwise(F.lit("unknown"))
    return F.when(line.startswith("\u0000") & (F.octet_length(line) >= 5), F.format_string(
        "Confluent wire-format bytes (schema id %s): records serialized with a schema registry (Avro, Protobuf or "
        "JSON Schema converter), not JSON; accepted: JSON lines (JsonConverter, schemas on or off)", schema_id))


def _not_as_sent_reason() -> Column:
    """Why a parsed record's row images or source block could not be kept as sent, else
    null: bytes that are not UTF-8 (replaced with U+FFFD while parsing) or a number beyond
    a double (re-written as "Infinity"). Both leave a mark in the kept text, so the line is
    only looked at again for the records that carry one."""
    kept = F.concat_ws("", F.col("_before"), F.col("_after"), F.col("_source"))
    not_utf8 = F.encode(F.col("line"), "UTF-8") != F.col("line").cast("binary")
    beyond = F.coalesce(kept.contains('"Infinity"') | kept.contains('"-Infinity"'), F.lit(False)) & ~F.col(
        "line").contains("Infinity")
    return (
        F.when(F.coalesce(kept.contains(REPLACEMENT_CHARACTER), F.lit(False)) & not_utf8, F.lit(NOT_UTF8))
        .when(beyond, F.lit(BEYOND_DOUBLE))
    )


QUERY_BASED_OP = "r"


def _updated_at_micros(text: Column) -> Column:
    """An updated-at value as microseconds since the epoch: a whole number is epoch
    milliseconds (Kafka Connect's Timestamp, as a JDBC source sends it with JsonConverter),
    anything else an ISO-8601 time; null when it is neither or before the epoch."""
    millis = F.when(text.rlike(r"^[0-9]{1,15}$"), text.cast("bigint") * 1000)
    iso = F.unix_micros(F.try_to_timestamp(text))
    micros = F.coalesce(millis, F.when(~text.rlike(r"^-?[0-9]+$"), iso))
    return F.when(micros >= 0, micros)


def stamp_query_based(records: DataFrame, updated_at: dict[str, str]) -> DataFrame:
    """Rows of query-based topics (`updated_at`: topic -> its updated-at column): a
    record without any op there is the row as the poller read it, so it gets op `r`,
    `_source_ts_ms` from the updated-at column and, as its log position, that time in
    microseconds in `_source_lsn` (silver orders by it, then partition and offset).
    A row whose updated-at value is missing or not a time gets `_query_error`."""
    if not updated_at:
        return records.withColumn("_query_error", F.lit(None).cast("string"))
    m = F.col("m")
    column = F.from_json(F.lit(json.dumps(updated_at)), "map<string,string>")[F.col("_topic")]
    polled = (column.isNotNull() & (F.col("_shape") == SHAPE_FLATTENED) & m["__op"].isNull()
              & m["__deleted"].isNull() & ~F.col("_tombstone"))
    micros = _updated_at_micros(F.element_at(m, column))
    return (
        records.withColumn("_polled", F.coalesce(polled, F.lit(False)))
        .withColumn("_updated_at_micros", F.when(F.col("_polled"), micros))
        .withColumns({
            "_op": F.when(F.col("_polled"), F.lit(QUERY_BASED_OP)).otherwise(F.col("_op")),
            "_deleted": F.when(F.col("_polled"), F.lit(False)).otherwise(F.col("_deleted")),
            "_source_lsn": F.when(F.col("_polled"), F.col("_updated_at_micros")).otherwise(F.col("_source_lsn")),
            "_source_ts_ms": F.when(F.col("_polled"), F.floor(F.col("_updated_at_micros") / 1000).cast("bigint"))
            .otherwise(F.col("_source_ts_ms")),
            "_query_error": F.when(F.col("_polled") & F.col("_updated_at_micros").isNull(), F.format_string(
                "query-based topic: updated-at column `%s` is missing or not a time ('%s'; expected epoch "
                "milliseconds or ISO-8601, not before 1970)", column, F.substring(F.element_at(m, column), 1, 60))),
        })
        .drop("_polled", "_updated_at_micros")
    )


def classify(records: DataFrame, primary_keys: dict[str, list[str]], max_record_bytes: int = MAX_RECORD_BYTES) -> DataFrame:
    """Add `_status` (landed | quarantined | tombstone | skipped) and the `reason` (why a
    record is quarantined or skipped).

    `primary_keys` maps topic -> key columns; topics not in it are not key-checked.
    First matching problem wins: file-level error, oversized record, malformed JSON, a
    record without op that is skipped (transaction metadata, schema change, heartbeat) or
    is no row (a record key, an empty object), bad op, missing key."""
    m = F.col("m")
    envelope = F.col("_shape") == SHAPE_ENVELOPE
    op_ok = F.col("_op").isin(*OPS)

    op_reason = (
        F.when(envelope & m["op"].isNull(), F.lit(f"missing op (expected one of {OPS_TEXT})"))
        .when(envelope & ~op_ok, F.format_string(f"unknown op '%s' (expected one of {OPS_TEXT})", m["op"]))
        .when(~envelope & m["__op"].isNotNull() & ~op_ok,
              F.format_string(f"unknown __op '%s' (expected one of {OPS_TEXT})", m["__op"]))
        # Read as "not deleted", any other spelling would land a deleted row as live.
        .when(~envelope & m["__deleted"].isNotNull() & ~m["__deleted"].isin("true", "false"),
              F.format_string('field __deleted is \'%s\' (expected "true" or "false")', m["__deleted"]))
    )

    # Key columns as data (not Python branching) so one plan serves every topic.
    key_map = F.from_json(F.lit(json.dumps(primary_keys)), "map<string,array<string>>")
    key_columns = key_map[F.col("_topic")]
    image_name = F.when(~envelope, F.lit("row fields")).when(F.col("_op") == "d", F.lit("before")).otherwise(F.lit("after"))
    # The image is parsed in a column of its own (below): inlined here it would be parsed
    # again for every key column and once more for the message.
    image = F.when(~envelope, F.when(F.col("_key_filled"), F.from_json(F.col("_after"), MAP)).otherwise(m)).otherwise(
        F.from_json(F.when(F.col("_op") == "d", F.col("_before")).otherwise(F.col("_after")), MAP)
    )
    missing = F.filter(key_columns, lambda c: F.coalesce(F.col("_key_image")[c].isNull(), F.lit(True)))
    if "_keys_file" in records.columns:  # sink files: those with a keys file had their record key
        key_lost = F.when(F.col("_keys_file"), F.lit(KEY_LOST_WITH_RECORD_KEY)).otherwise(F.lit(KEY_LOST_WITHOUT_RECORD_KEY))
    else:
        key_lost = F.lit(KEY_LOST_WITH_RECORD_KEY if "_key" in records.columns else KEY_LOST_WITHOUT_RECORD_KEY)
    key_reason = F.when(
        key_columns.isNotNull() & (F.size(missing) > 0),
        F.format_string(
            "primary key column(s) [%s] missing or null in row image `%s` (op '%s')%s",
            F.array_join(missing, ", "),
            image_name,
            F.coalesce(F.col("_op"), F.lit("none")),
            F.when(F.coalesce(F.col("_deleted"), F.lit(False)), key_lost).otherwise(F.lit("")),
        ),
    )
    # `t` (truncate) has no row and no key; a flattened record without __op is a plain row.
    key_reason = F.when(F.coalesce(F.col("_op"), F.lit("")) != "t", key_reason)
    # Neither `op` nor `__op` (an envelope without op already has its reason).
    without_op = ~envelope & m["__op"].isNull()
    skip = F.when(without_op, _without_op_skip(m))
    # a query-based row got its op from stamp_query_based: it is a row, not a record key
    without_op = without_op & F.col("_op").isNull()
    query_error = F.col("_query_error") if "_query_error" in records.columns else F.lit(None).cast("string")

    size = F.octet_length("line")
    reason = (
        F.when(F.col("_file_error").isNotNull(), F.col("_file_error"))
        .when(size > max_record_bytes, F.format_string(
            f"record of %d bytes is over the limit of {max_record_bytes} bytes (--max-record-bytes)", size))
        .when(F.col("_tombstone"), F.lit(None))
        # The first value is an object (its keys parse) but the line holds more.
        .when(m.isNull() & F.col("line").rlike(r"[:\[,]\s*-?(NaN|Infinity)\s*[,}\]]"), F.lit(NON_NUMERIC))
        .when(m.isNull() & F.json_object_keys("line").isNotNull(), F.lit(TRAILING_TEXT))
        .when(m.isNull(), F.coalesce(wire_format_reason(F.col("line")), F.lit(MALFORMED)))
        .when(F.col("_not_as_sent").isNotNull(), F.col("_not_as_sent"))
        .when(F.col("_skip").isNotNull(), F.col("_skip"))
        .when(query_error.isNotNull(), query_error)
        .otherwise(F.coalesce(F.when(without_op, _without_op_reason(m, key_columns)), op_reason, key_reason))
    )
    status = (
        F.when(F.col("_file_error").isNotNull(), F.lit(STATUS_QUARANTINED))
        .when(F.col("_tombstone"), F.lit(STATUS_TOMBSTONE))
        .when(F.col("reason").isNull(), F.lit(STATUS_LANDED))
        .when(F.col("reason") == F.col("_skip"), F.lit(STATUS_SKIPPED))
        .otherwise(F.lit(STATUS_QUARANTINED))
    )
    return (
        # Parsed only where the key is checked (not for tombstones or oversized records).
        records.withColumn(
            "_key_image", F.when(key_columns.isNotNull() & ~F.col("_tombstone") & (size <= max_record_bytes), image)
        )
        .withColumn("_skip", skip)
        .withColumn("_not_as_sent", _not_as_sent_reason())
        .withColumn("reason", reason)
        .withColumn("_status", status)
        .drop("_key_image", "_skip", "_key_filled", "_not_as_sent", "_query_error")
    )


def prepare(lines: DataFrame, primary_keys: dict[str, list[str]], max_record_bytes: int = MAX_RECORD_BYTES,
            updated_at: dict[str, str] | None = None) -> DataFrame:
    """The whole per-line pipeline: parse, extract Debezium fields, stamp query-based
    rows (`updated_at`: topic -> updated-at column), classify."""
    records = stamp_query_based(extract_change_fields(parse_records(lines)), updated_at or {})
    return classify(records, primary_keys, max_record_bytes)


# What the writes, the per-file counts and the log samples read from a classified batch.
LANDING_COLUMNS = [name for name, _ in BRONZE_COLUMNS if name not in ("_ingested_at", *LINE_POSITION)] + [
    "_table", "_status", "reason"]


def for_landing(classified: DataFrame, position: list[str] = LINE_POSITION, every_raw: bool = False) -> DataFrame:
    """The columns the landing steps read, the raw line only for quarantined records (of
    every record with `every_raw`: resolve_shared_offsets compares them); `position`:
    where a line sits (LINE_POSITION, or SPLIT_POSITION before place_lines).

    This is what a run caches between its counts and its writes: without the parsed map
    and the raw line of every record it holds about a third of the bytes."""
    raw = (F.col("line") if every_raw else F.when(F.col("_status") == STATUS_QUARANTINED, F.col("line"))).alias("raw")
    return classified.select(*position, *LANDING_COLUMNS, raw)


def _stamped(df: DataFrame, columns: list[tuple[str, str]], ingested_at: datetime) -> DataFrame:
    # One timestamp per run (not current_timestamp()) so all tables of a run agree.
    stamped = df.withColumn("_ingested_at", F.lit(ingested_at).cast("timestamp"))
    return stamped.select(*[F.col(name).cast(kind).alias(name) for name, kind in columns])


def to_bronze(classified: DataFrame, table: str, ingested_at: datetime) -> DataFrame:
    """Landed rows of one bronze table, exactly the bronze columns. One row per Kafka key
    as long as no two of the batch's files share an offset (else see resolve_shared_offsets)."""
    landed = classified.where((F.col("_status") == STATUS_LANDED) & (F.col("_table") == table))
    return _stamped(landed, BRONZE_COLUMNS, ingested_at)


CONFLICT = "conflicting copies of offset %d (topic %s, partition %d): files %s hold different records at it"


def resolve_shared_offsets(placed: DataFrame, compared: DataFrame) -> DataFrame:
    """Placed lines (of for_landing with `every_raw`) whose offset several files hold,
    among the `compared` files (a `_source_file` column: files with no file-level error
    and a start offset). Copies of one record (the same raw line; any two tombstones)
    keep the first by file and line, the others become STATUS_DUPLICATE; copies that
    differ are a conflict, with no telling which is right: every copy is quarantined,
    naming the files. Only for runs whose files share offsets: it shuffles and sorts
    the lines of the compared files."""
    flagged = placed.join(F.broadcast(compared.withColumn("_compared", F.lit(True))), "_source_file", "left")
    key = Window.partitionBy(*BRONZE_KEY)
    tombstone = F.col("_status") == STATUS_TOMBSTONE
    record = F.struct(tombstone.alias("tombstone"), F.when(~tombstone, F.col("raw")).alias("raw"))
    copies = flagged.where(F.col("_compared")).withColumns({
        "_conflict": F.size(F.collect_set(record).over(key)) > 1,
        "_later": F.row_number().over(key.orderBy("_source_file", "_source_line")) > 1,
        "_files": F.array_join(F.array_sort(F.collect_set("_source_file").over(key)), ", "),
    })
    resolved = copies.withColumns({
        "_status": F.when(F.col("_conflict"), F.lit(STATUS_QUARANTINED))
        .when(F.col("_later"), F.lit(STATUS_DUPLICATE)).otherwise(F.col("_status")),
        "reason": F.when(F.col("_conflict"), F.format_string(
            CONFLICT, F.col("_offset"), F.col("_topic"), F.col("_partition"), F.col("_files"))).otherwise(F.col("reason")),
    }).drop("_conflict", "_later", "_files")
    return resolved.unionByName(flagged.where(F.col("_compared").isNull())).drop("_compared")


def to_quarantine(classified: DataFrame, ingested_at: datetime) -> DataFrame:
    """Quarantined rows (of `for_landing`) with their reason and the raw line, nothing dropped."""
    rejected = classified.where(F.col("_status") == STATUS_QUARANTINED)
    return _stamped(rejected, QUARANTINE_COLUMNS, ingested_at)


# Debezium's ops, counted per file among its accepted records for the runner's report.
REPORTED_OPS = ("c", "u", "d", "r", "t")
# The counts of file_stats and split_stats: lines, lines of each status, accepted records of each op.
STATUS_COUNTS = ["lines", *(status + "_count" for status in (
    STATUS_LANDED, STATUS_QUARANTINED, STATUS_TOMBSTONE, STATUS_SKIPPED)), *(f"op_{op}_count" for op in REPORTED_OPS)]
# ... and the newest source time (epoch ms) among them, to tell how far bronze is behind its source.
NEWEST_SOURCE_TS = "newest_source_ts_ms"


def status_counts() -> list[Column]:
    """The STATUS_COUNTS aggregates over classified lines, and NEWEST_SOURCE_TS."""

    def count(status: str) -> Column:
        return F.sum(F.when(F.col("_status") == status, 1).otherwise(0)).cast("bigint").alias(status + "_count")

    landed = F.col("_status") == STATUS_LANDED
    ops = [F.sum(F.when(landed & (F.col("_op") == op), 1).otherwise(0)).cast("bigint").alias(f"op_{op}_count")
           for op in REPORTED_OPS]
    newest = F.max(F.when(landed, F.coalesce(F.col("_source_ts_ms"), F.col("_ts_ms")))).alias(NEWEST_SOURCE_TS)
    return [F.count(F.lit(1)).cast("bigint").alias("lines"), count(STATUS_LANDED), count(STATUS_QUARANTINED),
            count(STATUS_TOMBSTONE), count(STATUS_SKIPPED), *ops, newest]


def file_stats(classified: DataFrame, by: str = "_source_file") -> DataFrame:
    """Per file (or per `by`, e.g. `_topic`): STATUS_COUNTS (feeds the ledger and the summary)."""
    return classified.groupBy(by).agg(*status_counts())


def quarantine_samples(classified: DataFrame, per_topic: int) -> DataFrame:
    """At most `per_topic` quarantined lines per topic, in file/line order, for the log."""
    window = Window.partitionBy("_topic").orderBy("_source_file", "_source_line")
    return (
        classified.where(F.col("_status") == STATUS_QUARANTINED)
        .withColumn("_n", F.row_number().over(window))
        .where(F.col("_n") <= per_topic)
        .select("_topic", "_source_file", "_source_line", "reason")
    )
