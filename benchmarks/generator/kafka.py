"""Produce a stream to Kafka, record for record what the S3-sink layout holds.

Each record goes to the partition the sink layout puts it in (`sink.partition_of`:
Kafka's default partitioner, murmur2 of the JsonConverter key), with that key, and with a
null value where the layout has a `null` tombstone line. One idempotent producer keeps
each partition's order, so a topic that receives the segments in order gets the layout's
offsets too: `python -m ingestion` lands the same coordinates from either.

Segments are produced in order, each once: before the first one produced, every
partition's end offset must be where the stream puts that segment's start (0 for the
first); a topic that holds something else is refused rather than mixed.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .encode import TOMBSTONE, key_json
from .sink import Layout, Record, check_segments, stream_records
from .stream import TOPIC, StreamConfig

TIMEOUT_S = 60.0
# What a topic's partitions answer for a moment after it is created: the broker's "not
# leader" answers, and the client's own "unknown" ones until its metadata catches up.
SETTLING = {
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.REQUEST_TIMED_OUT, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
}


class KafkaProduceError(RuntimeError):
    """The stream could not be produced to the topic as asked."""


def _topic_ends(bootstrap: str, partitions: int) -> list[int]:
    """Create the topic with the layout's partitions (or accept one that has as many) and
    return each partition's end offset, once they answer: a new topic's partitions say
    "not leader" for a moment after it is created."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=partitions, replication_factor=1)],
                                  request_timeout=TIMEOUT_S)
    try:
        futures[TOPIC].result(TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise KafkaProduceError(f"cannot create topic {TOPIC} on {bootstrap}: {exc}") from exc
        found = len(admin.list_topics(TOPIC, timeout=TIMEOUT_S).topics[TOPIC].partitions)
        if found != partitions:
            raise KafkaProduceError(f"topic {TOPIC} on {bootstrap} has {found} partition(s), the layout {partitions}: "
                                    "delete the topic or pass --partitions to match") from None
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdc-bench-generator", "enable.auto.commit": False})
    try:
        return partition_ends(consumer, TOPIC, partitions)
    except KafkaException as exc:
        raise KafkaProduceError(f"cannot read the end offsets of {TOPIC} on {bootstrap}: {exc}") from exc
    finally:
        consumer.close()


def settling(error: KafkaError) -> bool:
    """Whether an answer is one a new topic gives for a moment (SETTLING) or one the client
    marks as worth retrying."""
    return error.code() in SETTLING or error.retriable()


def partition_ends(consumer: Consumer, topic: str, partitions: int, timeout_s: float = TIMEOUT_S,
                   pause_s: float = 0.2) -> list[int]:
    """Each partition's end offset, asked again while the answers are `settling` until
    `timeout_s` has passed; any other answer, or the last one, is raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
                    for p in range(partitions)]
        except KafkaException as exc:
            if not settling(exc.args[0]) or time.monotonic() > deadline:
                raise
            time.sleep(pause_s)


def _refuse_unless_at(ends: list[int], starts: list[int], segment: str, bootstrap: str) -> None:
    for partition, (end, start) in enumerate(zip(ends, starts)):
        if end != start:
            raise KafkaProduceError(
                f"topic {TOPIC} on {bootstrap}: partition {partition} ends at offset {end}, but segment "
                f"{segment!r} starts at offset {start} there: produce the segments in order into a new topic")


def _send(producer: Producer, record: Record, delivered: Callable) -> None:
    value = None if record.line == TOMBSTONE else record.line.encode("utf-8")
    while True:
        try:
            producer.produce(TOPIC, value=value, key=key_json(record.key).encode("ascii"),
                             partition=record.partition, on_delivery=delivered)
            break
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.1)
    producer.poll(0)


def produce_segments(
    config: StreamConfig, layout: Layout, segments: Sequence[tuple[str, int]], bootstrap: str,
    only: Sequence[str] | None = None,
) -> dict:
    """Produce the records of the segments named in `only` (default: all) to `bootstrap`;
    returns the counts per segment (sink.stream_records) and each partition's end offset."""
    check_segments(config, segments)
    names = [name for name, _ in segments]
    wanted = list(only) if only else names
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise KafkaProduceError(f"no segment named {', '.join(unknown)}; the segments are {', '.join(names)}")
    first, last = min(names.index(n) for n in wanted), max(names.index(n) for n in wanted)
    if len(set(wanted)) != last - first + 1:  # a gap would shift every later offset
        raise KafkaProduceError(f"segments to produce must follow each other in {', '.join(names)} (got {', '.join(wanted)})")
    wanted = names[first:last + 1]
    ends = _topic_ends(bootstrap, layout.partitions)

    errors: list[str] = []

    def delivered(err, msg) -> None:  # noqa: ANN001 - librdkafka's callback
        if err is not None and len(errors) < 5:
            errors.append(f"partition {msg.partition()}: {err}")

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    next_offsets = [0] * layout.partitions
    counts: dict[str, dict[str, int]] = {}
    stop_at = names[last + 1] if last + 1 < len(names) else None
    for record in stream_records(config, layout, segments, counts):
        if record.segment == stop_at:
            break  # the segments to produce are done
        if record.segment in wanted:
            if ends is not None:  # the first record produced: the topic must end where it starts
                _refuse_unless_at(ends, next_offsets, record.segment, bootstrap)
                ends = None
            _send(producer, record, delivered)
        next_offsets[record.partition] += 1
    left = producer.flush(TIMEOUT_S)
    if errors or left:
        raise KafkaProduceError(
            f"producing to {TOPIC} on {bootstrap} failed: {'; '.join(errors) or f'{left} record(s) not delivered'}")
    return {"topic": TOPIC, "produced": wanted, "counts": {name: counts[name] for name in wanted},
            "end_offsets": next_offsets}
