"""Exception types of `python -m status`."""

from __future__ import annotations


class StatusError(RuntimeError):
    """The status cannot be read (exit code 1); the message says what and why."""
