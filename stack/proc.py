"""Process plumbing: detached starts, pid files, stops by process group, waits with timeouts."""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .errors import StackError

# Popen objects of the children this Python process started, so they can be reaped
# (no zombies while a test owns them) and no "still running" ResourceWarning fires.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def is_root() -> bool:
    return os.geteuid() == 0


def current_user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            _CHILDREN.pop(pid, None)
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def cmdline(pid: int) -> str:
    """The process's command line with NULs as spaces ('' if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", errors="replace").strip()


def pid_alive(pid: int | None, marker: str | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and its command line contains ``marker``."""
    if not pid:
        return False
    _reap(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    if state in ("Z", "X"):
        return False
    return marker is None or marker in cmdline(pid)


def read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().split()
    except OSError:
        return None
    try:
        return int(text[0]) if text else None
    except ValueError:
        return None


def write_pid(pid_file: Path, pid: int) -> None:
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(f"{pid}\n")


def start_detached(
    cmd: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start ``cmd`` in its own session (process group), output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        child = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN[child.pid] = child
    return child.pid


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    service: str,
    log_file: Path | None = None,
    interval: float = 0.5,
    alive: Callable[[], bool] | None = None,
) -> None:
    """Poll ``predicate`` until true; raise StackError on timeout or when ``alive`` turns false."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if alive is not None and not alive():
            raise StackError(service, f"the process died while waiting for {what}", log_file)
        if time.monotonic() >= deadline:
            raise StackError(service, f"timed out after {timeout:.0f}s waiting for {what}", log_file)
        time.sleep(interval)


def stop_pid(pid: int, service: str, timeout: float = 30.0, log_file: Path | None = None) -> None:
    """SIGTERM the process group of ``pid`` (the pid alone if it leads none), then SIGKILL."""
    if not pid_alive(pid):
        return

    def send(sig: int) -> None:
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            pass

    send(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            _group_gone(pid)
            return
        time.sleep(0.2)
    send(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            _group_gone(pid)
            return
        time.sleep(0.2)
    raise StackError(service, f"pid {pid} survived SIGKILL", log_file)


def _group_gone(pgid: int) -> None:
    """Kill what is left of a process group whose leader has exited."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(
    cmd: Sequence[str],
    service: str,
    what: str,
    log_file: Path | None = None,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run a short command; on failure raise StackError with its output."""
    try:
        result = subprocess.run(
            list(cmd),
            input=input_text,
            capture_output=True,
            text=True,
            env=dict(env) if env is not None else None,
            timeout=timeout,
            stdin=None if input_text is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise StackError(service, f"{what}: timed out after {timeout}s: {' '.join(cmd)}", log_file) from None
    except FileNotFoundError as exc:
        raise StackError(service, f"{what}: {exc}", log_file) from None
    if check and result.returncode != 0:
        output = (result.stdout[-3000:] + "\n" + result.stderr[-3000:]).strip()
        raise StackError(
            service,
            f"{what} failed (exit {result.returncode}): {' '.join(cmd)}\n{output}",
            log_file,
        )
    return result


def ensure_traversable(path: Path, user: str) -> None:
    """Let OS user ``user`` traverse every ancestor of ``path`` (adds o+x where missing).

    Needed as root: PostgreSQL runs as ``postgres`` and CI may clone under a private
    folder. Only the execute (search) bit is added, never read.
    """
    info = pwd.getpwnam(user)
    for parent in reversed(path.resolve().parents):
        st = parent.stat()
        if st.st_uid == info.pw_uid:
            continue
        if st.st_mode & 0o001:
            continue
        if st.st_gid == info.pw_gid and st.st_mode & 0o010:
            continue
        os.chmod(parent, st.st_mode | 0o001)


def chown_tree(path: Path, user: str) -> None:
    info = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, info.pw_uid, info.pw_gid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), info.pw_uid, info.pw_gid)


def stack_processes(stack_dir: Path) -> list[tuple[int, str]]:
    """Every live server process of the stack in ``stack_dir``.

    That is the JVMs started with ``-Dcdc.stack.dir=<stack_dir>``, the ``mariadbd``
    reading ``<stack_dir>/mariadb/my.cnf``, and the PostgreSQL postmaster and its
    backends. Backends do not repeat the data directory on their command line, but they
    run with it as their working directory, so that is checked too. Other processes
    that only mention the folder (``tail -f .../logs/kafka.log``) are not counted.
    """
    stack = str(stack_dir.resolve())
    markers = (f"-Dcdc.stack.dir={stack}", f"--defaults-file={stack}/", f"-D {stack}/")
    found: list[tuple[int, str]] = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == me or not pid_alive(pid):
            continue
        line = cmdline(pid)
        if any(marker in line for marker in markers):
            found.append((pid, line))
            continue
        if not line.startswith("postgres"):
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == stack or cwd.startswith(stack + os.sep):
            found.append((pid, line))
    return found
