"""The one exception type of the stack: it names the service, its log file and the log's tail."""

from __future__ import annotations

from pathlib import Path

TAIL_LINES = 30


def log_tail(path: Path | None, lines: int = TAIL_LINES) -> str:
    """Return the last ``lines`` lines of ``path`` (or a note saying why there are none)."""
    if path is None:
        return "(no log file)"
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return f"(log file {path} does not exist yet)"
    except OSError as exc:  # pragma: no cover - permissions and the like
        return f"(cannot read {path}: {exc})"
    tail = data.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(log file is empty)"


class StackError(RuntimeError):
    """A service of the local CDC stack failed to start, stop or answer.

    The message names the service, what went wrong, the log file and its last
    ~30 lines, so a failing test shows the cause without digging.
    """

    def __init__(
        self,
        service: str,
        message: str,
        log_file: Path | None = None,
        extra_logs: tuple[Path, ...] = (),
    ) -> None:
        self.service = service
        self.log_file = log_file
        parts = [f"[{service}] {message}"]
        if log_file is not None:
            parts.append(f"--- last {TAIL_LINES} lines of {log_file} ---\n{log_tail(log_file)}")
        for extra in extra_logs:
            if extra.exists() and extra.stat().st_size > 0:
                parts.append(f"--- last {TAIL_LINES} lines of {extra} ---\n{log_tail(extra)}")
        super().__init__("\n".join(parts))
