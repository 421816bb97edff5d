"""Step timings that reports carry: the runner's pass (`PassReport.seconds`) and the
ingestion's run (`RunSummary.seconds`)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def timed(seconds: dict[str, float], step: str) -> Iterator[None]:
    """Adds the time the block takes, ended by an error or not, to `seconds[step]`."""
    started = time.monotonic()
    try:
        yield
    finally:
        seconds[step] = seconds.get(step, 0.0) + time.monotonic() - started
