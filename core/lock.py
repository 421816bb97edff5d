"""Lock files so overlapping runs never write the same tables at once: the scheduled
runner's (a slow run, the next cron tick) and each ingestion's (two runs landing into
one bronze schema would both insert the same new keys: Hudi's optimistic concurrency
control checks overlapping files, not keys). The second run exits instead of waiting."""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class RunLockedError(RuntimeError):
    """Another run holds the lock of this lakehouse."""


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise RunLockedError(f"another run (pid {holder}) holds {path}; this run does nothing") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
