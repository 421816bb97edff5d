"""What the file listing finds under `--input`, through real runs on small files: every
entry is landed, quarantined with a reason, or skipped by a stated rule and counted;
names are read as literal paths; names and offsets Kafka cannot have are quarantined
per file while the other files land."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from ingestion import extract, transform
from ingestion.pipeline import IngestConfig, RunSummary, run
from tests.support.lakehouse import drop_schemas

pytestmark = pytest.mark.integration

INT64_MAX = 2**63 - 1


def record(key: int, name: str) -> str:
    return json.dumps({"before": None, "after": {"id": key, "name": name}, "source": {"lsn": key}, "op": "c"})


def write(root: Path, topic: str, name: str, content: str | bytes, partition: str = "partition=0") -> Path:
    folder = root / topic / partition
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def uri(path: Path) -> str:
    """The URI Spark reports for a local file: percent-encoded as java.net.URI does."""
    return "file:" + quote(str(path), safe="/,;:$&+=@!'()*")


def sink_file(root: Path, topic: str, start: int, lines: list[str], partition: int = 0) -> Path:
    return write(root, topic, f"{topic}+{partition}+{start}.json", "".join(f"{x}\n" for x in lines),
                 f"partition={partition}")


@pytest.fixture
def ingest(spark, tmp_path):
    """Runs the ingestion over `tmp_path/topics` into a schema of its own; returns
    (summary, bronze rows of every table, quarantine rows, ledger rows)."""
    schema = "bronze_sink_listing"
    drop_schemas(spark, [schema])

    def go() -> tuple[RunSummary, list[tuple], list[tuple], dict[str, int]]:
        summary = run(spark, IngestConfig(input_uri=str(tmp_path / "topics"), bronze_schema=schema,
                                          sources_yml=tmp_path / "none.yml"))
        bronze = []
        for table in sorted(t.table for t in summary.tables if not t.table.startswith("(")):
            if spark.catalog.tableExists(f"{schema}.{table}"):
                bronze += [(table, *r) for r in spark.sql(
                    f"select _topic, _partition, _offset, _source_file, _source_line, _after "
                    f"from `{schema}`.`{table}`").collect()]
        quarantine = []
        if spark.catalog.tableExists(f"{schema}._quarantine"):
            quarantine = [tuple(r) for r in spark.sql(
                f"select _topic, _partition, _offset, _source_file, _source_line, reason, raw "
                f"from `{schema}`._quarantine").collect()]
        ledger = {r[0]: r[1] for r in spark.sql(f"select _source_file, lines from `{schema}`._ingested_files").collect()}
        return summary, sorted(bronze), sorted(quarantine, key=repr), ledger

    yield go
    drop_schemas(spark, [schema])


def test_heartbeats_and_bookkeeping_are_skipped_and_counted_hidden_topics_quarantined(ingest, tmp_path):
    root = tmp_path / "topics"
    actor = sink_file(root, "pg.public.actor", 0, [record(1, "A"), record(2, "B")])
    write(root, "pg.public.actor", "_SUCCESS", "")
    write(root, "pg.public.actor", ".pg.public.actor+0+0.json.swp", b"\x00")
    write(root, "pg.public.actor", "_temporary/0/part-0000", "x")
    # Hadoop's local file system lists no checksum files at all (an object store would
    # show this one, as bookkeeping)
    write(root, "pg.public.actor", ".pg.public.actor+0+0.json.crc", b"crc\x00")
    sink_file(root, "__debezium-heartbeat.pg", 0, ['{"serverName":"pg"}'] * 3)
    sink_file(root, "__debezium-heartbeat.pg", 3, ['{"serverName":"pg"}'])
    schemas = sink_file(root, "_schemas", 0, ['{"subject":"x"}'])
    hidden = sink_file(root, ".hidden.topic", 5, [record(3, "C")])

    summary, bronze, quarantine, ledger = ingest()

    assert bronze == [
        ("pg_public_actor", "pg.public.actor", 0, 0, uri(actor), 1, '{"id":1,"name":"A"}'),
        ("pg_public_actor", "pg.public.actor", 0, 1, uri(actor), 2, '{"id":2,"name":"B"}'),
    ]
    hidden_reason = ("not read: Spark's file reader ignores files and folders whose names start with '_' or '.' "
                     "(Hadoop's hidden files); only Debezium heartbeat topics (__debezium-heartbeat*) are skipped "
                     "by name: rename the topic folder and its files to land them")
    assert quarantine == sorted([
        (".hidden.topic", 0, 5, uri(hidden), 1, hidden_reason, None),
        ("_schemas", 0, 0, uri(schemas), 1, hidden_reason, None),
    ], key=repr)
    assert summary.skipped == {extract.SKIP_HEARTBEAT: 2, extract.SKIP_BOOKKEEPING: 3}
    assert summary.quarantined == 2
    assert ("skipped by rule: 2 file(s) of Debezium heartbeat topics, "
            "3 Hadoop bookkeeping file(s) or folder(s) (names starting with '.' or '_')") in summary.render().splitlines()
    # the heartbeat and bookkeeping files are not in the ledger: they are skipped (and counted) every run
    assert ledger == {uri(actor): 2, uri(schemas): 1, uri(hidden): 1}


def test_names_with_glob_characters_are_read_as_literal_paths(ingest, tmp_path):
    """`c[d]` as a glob matches `cd` (not itself), `x?y` matches `xzy`, `p*q` matches
    `pzzq`: each file must be read once, as itself."""
    root = tmp_path / "topics"
    written = {}
    for i, topic in enumerate(["c[d]", "cd", "x?y", "xzy", "p*q", "pzzq"]):
        lines = [record(10 * i + n, topic) for n in range(i + 1)]
        written[topic] = (sink_file(root, topic, 100 * i, lines), lines)

    summary, bronze, quarantine, ledger = ingest()

    tables = {"c[d]": "c_d_", "cd": "cd", "x?y": "x_y", "xzy": "xzy", "p*q": "p_q", "pzzq": "pzzq"}
    want = []
    for i, (topic, (path, lines)) in enumerate(written.items()):
        for n, text in enumerate(lines):
            want.append((tables[topic], topic, 0, 100 * i + n, uri(path), n + 1,
                         json.dumps(json.loads(text)["after"], separators=(",", ":"))))
    assert bronze == sorted(want)
    assert quarantine == []
    assert ledger == {uri(path): len(lines) for path, lines in written.values()}
    assert {t.topic: (t.files, t.events_read, t.landed) for t in summary.tables} == {
        topic: (1, len(lines), len(lines)) for topic, (_, lines) in written.items()}


def test_names_and_offsets_kafka_cannot_have_are_quarantined_per_file(ingest, tmp_path):
    root = tmp_path / "topics"
    fine = sink_file(root, "fine", 0, [record(1, "F")])
    colon = sink_file(root, "t:c", 0, [record(2, "C")])
    brace = sink_file(root, "t{c}", 0, [record(3, "B")])
    backslash = sink_file(root, "t\\c", 0, [record(4, "S")])
    big_partition = sink_file(root, "big.part", 0, [record(5, "P")], partition=2**31)
    big_offset = sink_file(root, "big.off", 2**63, [record(6, "O")])
    overflow = sink_file(root, "near.max", INT64_MAX - 1, [record(7, "X"), record(8, "Y"), record(9, "Z")])
    at_max = sink_file(root, "at.max", INT64_MAX - 2, [record(10, "M"), record(11, "N"), record(12, "O")])

    summary, bronze, quarantine, ledger = ingest()

    assert bronze == [
        ("at_max", "at.max", 0, INT64_MAX - 2, uri(at_max), 1, '{"id":10,"name":"M"}'),
        ("at_max", "at.max", 0, INT64_MAX - 1, uri(at_max), 2, '{"id":11,"name":"N"}'),
        ("at_max", "at.max", 0, INT64_MAX, uri(at_max), 3, '{"id":12,"name":"O"}'),
        ("fine", "fine", 0, 0, uri(fine), 1, '{"id":1,"name":"F"}'),
    ]
    reserved = ("holds {chars}, which Hadoop paths reserve (':' for a URI scheme, '\\' as an escape and as "
                "Windows' separator, '{{' '}}' for glob alternatives) and no Kafka topic name holds "
                "(legal: ASCII letters, digits, '.', '_', '-')")
    assert quarantine == sorted([
        ("big.off", 0, None, uri(big_offset), 1,
         f"bad file name 'big.off+0+{2**63}.json': start offset {2**63} is above Kafka's largest offset {INT64_MAX}",
         record(6, "O")),
        ("big.part", None, None, uri(big_partition), 1,
         f"bad file name 'big.part+{2**31}+0.json': partition {2**31} is above Kafka's largest partition "
         f"{2**31 - 1}", record(5, "P")),
        ("near.max", 0, None, uri(overflow), 1,
         f"offsets out of range: 'near.max+0+{INT64_MAX - 1}.json' has 3 line(s) from start offset "
         f"{INT64_MAX - 1}, which passes Kafka's largest offset {INT64_MAX}", record(7, "X")),
        ("near.max", 0, None, uri(overflow), 2,
         f"offsets out of range: 'near.max+0+{INT64_MAX - 1}.json' has 3 line(s) from start offset "
         f"{INT64_MAX - 1}, which passes Kafka's largest offset {INT64_MAX}", record(8, "Y")),
        ("near.max", 0, None, uri(overflow), 3,
         f"offsets out of range: 'near.max+0+{INT64_MAX - 1}.json' has 3 line(s) from start offset "
         f"{INT64_MAX - 1}, which passes Kafka's largest offset {INT64_MAX}", record(9, "Z")),
        ("t:c", 0, 0, uri(colon), 1,
         "bad file name 't:c+0+0.json': " + reserved.format(chars="':'") + "; not read: Hadoop cannot open it",
         None),
        ("t\\c", 0, 0, uri(backslash), 1, "bad file name 't\\\\c+0+0.json': " + reserved.format(chars="'\\'"),
         record(4, "S")),
        ("t{c}", 0, 0, uri(brace), 1, "bad file name 't{c}+0+0.json': " + reserved.format(chars="'{', '}'"),
         record(3, "B")),
    ], key=repr)
    assert summary.quarantined == 8
    assert len(ledger) == 8


def test_files_the_reader_cannot_take_say_what_they_are(ingest, tmp_path):
    root = tmp_path / "topics"
    topic = "pg.public.film"
    avro = write(root, topic, f"{topic}+0+0.avro", b"Obj\x01\x04\x14avro.codec\x08null")
    parquet = write(root, topic, f"{topic}+0+0.parquet", b"PAR1\x15\x04PAR1")
    keys = write(root, topic, f"{topic}+0+0.keys.avro", b"Obj\x01")  # keys of Avro files: not read
    wire = write(root, topic, f"{topic}+0+0.json",
                 b"\x00\x00\x00\x00\x07\x02\x06abc\n" + record(1, "J").encode() + b"\n")

    summary, bronze, quarantine, ledger = ingest()

    accepted = ("accepted: record values as JSON lines (JsonFormat), Avro container files (AvroFormat) or Parquet "
                "files (ParquetFormat) named <topic>+<partition>+<startOffset>.json (or .avro, [.<codec>].parquet), "
                "JSON files with their record keys in <name>.keys.json when the sink writes them")
    assert bronze == [("pg_public_film", topic, 0, 1, uri(wire), 2, '{"id":1,"name":"J"}')]
    assert quarantine == sorted([
        (topic, 0, None, uri(avro), 1, f"{topic}+0+0.avro: cut short inside its Avro header (21 bytes)", None),
        (topic, 0, None, uri(parquet), 1,
         f"{topic}+0+0.parquet: not a Parquet file (10 bytes, less than its magic and footer)", None),
        (topic, 0, None, uri(keys), 1,
         f"record keys file (the S3 sink's store.kafka.keys): not read yet; {accepted}", None),
        (topic, 0, 0, uri(wire), 1,
         "Confluent wire-format bytes (schema id 7): records serialized with a schema registry (Avro, Protobuf "
         "or JSON Schema converter), not JSON; accepted: JSON lines (JsonConverter, schemas on or off)",
         "\x00\x00\x00\x00\x07\x02\x06abc"),
    ], key=repr)
    assert summary.quarantined == 4


def test_record_keys_files_fill_the_keys_deletes_lost(spark, tmp_path):
    """With `store.kafka.keys=true` the S3 sink writes `<name>.keys.json` beside each file,
    a key per record in order: a delete whose value lost its key (REPLICA IDENTITY without
    a before image) takes it from there and lands. Without a keys file, or with one that
    does not match line for line, the record is quarantined saying why; a newest file
    whose keys file is not there yet and a keys file without its values file wait, counted."""
    root = tmp_path / "topics"
    topic = "pg.public.actor"
    src = {"lsn": 7, "ts_ms": 1}

    def delete_without_key() -> str:
        return json.dumps({"before": None, "after": None, "source": src, "op": "d"})

    def key(n: int, wrapped: bool = False) -> str:
        payload = {"actor_id": n}
        return json.dumps({"schema": {"type": "struct", "fields": []}, "payload": payload} if wrapped else payload)

    def create(n: int) -> str:
        return json.dumps({"before": None, "after": {"actor_id": n, "name": f"a{n}"}, "source": src, "op": "c"})

    # partition 0: keyed files; the newest has no keys file yet
    keyed = sink_file(root, topic, 0, [create(1), create(2), delete_without_key()])
    write(root, topic, f"{topic}+0+0.keys.json", "".join(f"{k}\n" for k in (key(1), key(2, True), key(1, True))))
    waiting = sink_file(root, topic, 3, [delete_without_key()])
    # partition 1: a keys file one line short; partition 2: keys without values;
    # partition 3: no keys at all
    short = sink_file(root, topic, 0, [create(5), delete_without_key()], partition=1)
    write(root, topic, f"{topic}+1+0.keys.json", key(5) + "\n", "partition=1")
    orphan = write(root, topic, f"{topic}+2+0.keys.json", key(9) + "\n", "partition=2")
    unkeyed = sink_file(root, topic, 0, [delete_without_key()], partition=3)
    sources = tmp_path / "sources.yml"
    sources.write_text(json.dumps({"sources": [{"name": "bronze", "tables": [
        {"name": "pg_public_actor", "meta": {"topic": topic, "primary_key": ["actor_id"]}}]}]}))
    schema = "bronze_record_keys"
    drop_schemas(spark, [schema])

    def ingest() -> tuple[RunSummary, list[tuple], list[tuple]]:
        summary = run(spark, IngestConfig(input_uri=str(root), bronze_schema=schema, sources_yml=sources))
        bronze = sorted(tuple(r) for r in spark.sql(
            f"select _partition, _offset, _op, _before, _after from `{schema}`.pg_public_actor").collect())
        quarantine = sorted((tuple(r) for r in spark.sql(
            f"select _partition, _offset, _source_file, reason from `{schema}`._quarantine").collect()), key=repr)
        return summary, bronze, quarantine

    try:
        summary, bronze, quarantine = ingest()
        # the mismatched file's records are all quarantined, its good one too (file-level)
        assert bronze == [
            (0, 0, "c", None, '{"actor_id":1,"name":"a1"}'),
            (0, 1, "c", None, '{"actor_id":2,"name":"a2"}'),
            (0, 2, "d", '{"actor_id":1}', None),
        ], bronze
        mismatch = transform.KEYS_MISMATCH.format(keys=f"{topic}+1+0.keys.json", keys_lines=1, lines=2)
        lost = "primary key column(s) [actor_id] missing or null in row image `before` (op 'd')"
        assert quarantine == sorted([
            (1, 0, uri(short), mismatch),
            (1, 1, uri(short), mismatch),
            (3, 0, uri(unkeyed), lost + transform.KEY_LOST_WITHOUT_RECORD_KEY),
        ], key=repr)
        assert summary.skipped == {extract.SKIP_AWAITING_KEYS: 1, extract.SKIP_AWAITING_VALUES: 1}
        assert "1 newest file(s) of a partition whose record keys file is not written yet" in summary.render()
        assert orphan.exists() and keyed.exists() and waiting.exists()  # nothing moved or deleted

        # the keys file arrives: the waiting file lands with its key (a key without the
        # JsonConverter wrapper is kept as sent); nothing else is read again
        write(root, topic, f"{topic}+0+3.keys.json", key(2) + "\n")
        summary, bronze, _ = ingest()
        assert [t.files for t in summary.tables] == [1] and summary.files_skipped == 3
        assert (0, 3, "d", '{"actor_id": 2}', None) in bronze
    finally:
        drop_schemas(spark, [schema])
