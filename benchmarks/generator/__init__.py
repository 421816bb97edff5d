"""Deterministic Debezium change streams at benchmark scale (see benchmarks/README.md)."""

from .sink import Layout, write_segments
from .stream import PRIMARY_KEY, TOPIC, StreamConfig

__all__ = ["Layout", "PRIMARY_KEY", "StreamConfig", "TOPIC", "write_segments"]
