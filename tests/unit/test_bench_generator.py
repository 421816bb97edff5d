"""The benchmark's generator: its fast string encoders against tools.sample_data's dict
builders (which the recorded Debezium fixtures check), its layout, and determinism."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks.generator import Layout, StreamConfig, write_segments
from benchmarks.generator import encode, stream
from benchmarks.generator.sink import partition_of
from testdata import debezium


def _reference_event(ev: stream.Event, row_bytes: int) -> dict:
    """The event in the shape testdata.debezium.record_value takes."""
    values = stream.row_values(ev.key, ev.version, row_bytes)
    row = dict(zip(stream.COLUMNS, values))
    row["amount"] = Decimal(row["amount"]) / 100
    row["order_date"] = date(1970, 1, 1) + timedelta(days=row["order_date"])
    row["updated_at"] = datetime(1970, 1, 1) + timedelta(microseconds=row["updated_at"])
    return {
        "table": stream.TABLE, "op": ev.op, "snapshot": "true" if ev.op == "r" else "false",
        "before": row if ev.op == "d" else None, "after": None if ev.op == "d" else row,
        "lsn": ev.lsn, "last_commit_lsn": ev.last_commit_lsn, "txId": ev.tx_id,
        "source_ts_us": ev.commit_us, "ts_us": ev.emitted_us,
    }


def _renamed(value):
    """tools.sample_data writes its own server and database names; ours are `bench`."""
    text = json.dumps(value)
    for field in ("name", "db", "__db"):
        text = text.replace(f'"{field}": "{debezium.SERVER_NAME}"', f'"{field}": "{stream.SERVER}"')
    return json.loads(text.replace(f'"{debezium.topic_for(stream.TABLE)}.', f'"{stream.TOPIC}.'))


@pytest.mark.parametrize("shape", encode.SHAPES)
@pytest.mark.parametrize("wrapped", [False, True])
@pytest.mark.parametrize("snapshot", [False, True])
def test_every_record_equals_the_reference_builder(shape, wrapped, snapshot):
    config = StreamConfig(events=400, keys=40, delete_share=0.3, row_bytes=30, snapshot=snapshot)
    schema = encode.schema_json(shape) if wrapped else None
    ops = Counter()
    for ev in stream.events(config):
        ops[ev.op] += 1
        lines = encode.record_lines(ev, shape, schema, config.row_bytes)
        expected = _renamed(debezium.record_value(shape, wrapped, encode.TABLE_INFO, {}, _reference_event(ev, 30)))
        assert json.loads(lines[0]) == expected, (ev, lines[0])
        assert lines[1:] == (["null"] if shape == encode.ENVELOPE and ev.op == "d" else [])
    assert ops["c"] and ops["u"] and ops["d"]
    assert ops["r"] == (40 if snapshot else 0)


def test_snapshot_reads_every_key_once_then_changes_them():
    """With a snapshot the stream opens with one read of each key, in key order, then goes
    on as without one, every key alive: the first change of a key is an update or a delete."""
    evs = list(stream.events(StreamConfig(events=500, keys=100, delete_share=0.2, snapshot=True)))
    assert [(ev.op, ev.key, ev.version) for ev in evs[:100]] == [("r", k, 1) for k in range(100)]
    assert len({ev.lsn for ev in evs[:100]}) == 1 and evs[100].lsn > evs[0].lsn
    seen: set[int] = set()
    for ev in evs[100:]:
        if ev.key not in seen:
            assert ev.op in ("u", "d"), ev
            seen.add(ev.key)
    with pytest.raises(ValueError, match="events must be >= keys"):
        StreamConfig(events=99, keys=100, snapshot=True)


def test_versions_follow_each_key():
    """A key's events go insert, updates, delete, re-insert ...; versions only grow."""
    seen: dict[int, tuple[str, int]] = {}
    last_lsn = 0
    for ev in stream.events(StreamConfig(events=3_000, keys=50, delete_share=0.2)):
        assert ev.lsn > last_lsn
        last_lsn = ev.lsn
        previous = seen.get(ev.key)
        if previous is None or previous[0] == "d":
            assert ev.op == "c"
        else:
            assert ev.op in ("u", "d")
        if previous is not None:
            assert ev.version == previous[1] + (0 if ev.op == "d" else 1)
        seen[ev.key] = (ev.op, ev.version)


def test_segments_continue_offsets_and_are_cached(tmp_path):
    config = StreamConfig(events=1_000, keys=100, delete_share=0.2, row_bytes=10)
    layout = Layout(partitions=3, records_per_file=150)
    manifest = write_segments(config, layout, [("a", 600), ("b", 400)], tmp_path)

    offsets: dict[int, list[int]] = {}
    live: set[int] = set()
    for segment in ("a", "b"):
        for path in sorted((tmp_path / segment / "topics" / stream.TOPIC).glob("partition=*/*.json")):
            partition = int(path.parent.name.split("=")[1])
            start = int(path.stem.rsplit("+", 1)[1])
            assert path.name == f"{stream.TOPIC}+{partition}+{start:010d}.json"
            lines = path.read_text().splitlines()
            assert len(lines) <= 150
            offsets.setdefault(partition, []).extend(range(start, start + len(lines)))
            for line in lines:
                if line == "null":
                    continue
                record = json.loads(line)
                key = (record["after"] or record["before"])["order_id"]
                assert partition_of(key, 3) == partition
                (live.discard if record["op"] == "d" else live.add)(key)
        assert manifest["counts"][segment]["live_keys_after"] == len(live)
    for partition, seen in offsets.items():
        assert sorted(seen) == list(range(len(seen))), f"partition {partition} offsets have gaps or repeats"

    marker = tmp_path / "a" / "topics" / "marker"
    marker.write_text("kept")
    assert write_segments(config, layout, [("a", 600), ("b", 400)], tmp_path) == manifest
    assert marker.exists(), "the same config must reuse what is on disk"
    write_segments(config, layout, [("a", 500), ("b", 500)], tmp_path)
    assert not marker.exists(), "another cut must regenerate"


def test_same_seed_same_bytes(tmp_path):
    config = StreamConfig(events=500, keys=60)
    for run in ("x", "y"):
        write_segments(config, Layout(), [("all", 500)], tmp_path / run)
    files = sorted(p.relative_to(tmp_path / "x") for p in (tmp_path / "x").rglob("*.json"))
    assert files
    for f in files:
        assert (tmp_path / "x" / f).read_bytes() == (tmp_path / "y" / f).read_bytes()


def test_median_of_rounds_takes_the_middle_time_and_the_largest_memory():
    from benchmarks.cases import median
    from benchmarks.measure import Measured

    runs = [Measured(name, seconds, mib, 1.0, Path(name)) for name, seconds, mib in
            [("a", 31.0, 2000.0), ("b", 29.5, 2100.0), ("c", 36.8, 1900.0)]]
    assert (median(runs).step, median(runs).seconds, median(runs).peak_jvm_mib) == ("a", 31.0, 2100.0)
    assert median(runs[:2]).step == "a"  # an even count: the upper of the two middle ones
    assert median(runs[2:]) == runs[2]


def test_kafka_output_refuses_unknown_or_gapped_segments_before_connecting():
    """(tests/bench/test_generator_kafka.py produces to a real broker.) A gap would shift
    every later offset away from the sink layout's, so it is refused up front."""
    from benchmarks.generator.kafka import KafkaProduceError, produce_segments

    config = StreamConfig(events=30, keys=10)
    segments = [("a", 10), ("b", 10), ("c", 10)]
    with pytest.raises(KafkaProduceError, match="no segment named zz; the segments are a, b, c"):
        produce_segments(config, Layout(), segments, "127.0.0.1:1", ["zz"])
    with pytest.raises(KafkaProduceError, match="must follow each other"):
        produce_segments(config, Layout(), segments, "127.0.0.1:1", ["a", "c"])
    with pytest.raises(ValueError, match="segments add up to 20 events"):
        produce_segments(config, Layout(), segments[:2], "127.0.0.1:1")


class _AnsweringConsumer:
    """A consumer whose watermark answers are scripted: each call takes the next answer,
    an error code (raised as librdkafka raises it) or an end offset."""

    def __init__(self, answers: list) -> None:
        self.answers = list(answers)
        self.calls = 0

    def get_watermark_offsets(self, partition, timeout):  # noqa: ANN001 - confluent_kafka's signature
        from confluent_kafka import KafkaError, KafkaException

        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, str):
            raise KafkaException(KafkaError(getattr(KafkaError, answer)))
        return 0, answer


@pytest.mark.parametrize("code", ["_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "NOT_LEADER_FOR_PARTITION",
                                  "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART", "_TRANSPORT"])
def test_end_offsets_wait_out_every_answer_of_a_new_topic(code):
    """A topic just created answers "unknown partition" (the client's metadata) or "not
    leader" (the broker) for a moment: the wait asks again instead of failing."""
    from benchmarks.generator.kafka import partition_ends

    consumer = _AnsweringConsumer([code, 7, code, 7, 9])
    assert partition_ends(consumer, "t", 2, timeout_s=5, pause_s=0) == [7, 9]
    assert consumer.calls == 5


def test_end_offsets_raise_a_lasting_error_at_once():
    from confluent_kafka import KafkaException

    from benchmarks.generator.kafka import partition_ends

    consumer = _AnsweringConsumer(["TOPIC_AUTHORIZATION_FAILED", 1])
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        partition_ends(consumer, "t", 1, timeout_s=5, pause_s=0)
    assert consumer.calls == 1
