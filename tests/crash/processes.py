"""What the crash tests share: the change stream they land, and the processes they
start and kill (each in its own process group, so that SIGKILL takes the JVM too)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
from pathlib import Path

from tests.property.streams import ACTOR, EPOCH_MS, SinkFile, Stream, _Position, _record, _wrap
from tests.support.paths import ROOT


def actor_stream(rng: random.Random, transactions: int = 60, keys: int = 10, batches: int = 2) -> Stream:
    """Inserts, updates and deletes of `keys` actors, two records per sink file, cut
    into `batches` batches of (nearly) equal size."""
    pos = _Position(postgres=True)
    state: dict[int, dict] = {}
    lines = []
    for tx in range(transactions):
        pos.next_statement(rng.randint(8, 300))
        key = rng.randint(1, keys)
        ts = EPOCH_MS + tx * 1000
        row = {"actor_id": key, "first_name": rng.choice(["ANNA", "BOB", "CHEN"]), "last_name": None,
               "last_update": ts * 1000}
        if key in state and rng.random() < 0.3:
            before = {"actor_id": key, "first_name": "", "last_name": None, "last_update": 0}
            lines.append(_wrap(_record(ACTOR, "envelope", "d", before, None, pos.fields(), ts, tx, "false"), False))
            del state[key]
        else:
            op = "u" if key in state else "c"
            state[key] = row
            lines.append(_wrap(_record(ACTOR, "envelope", op, None, row, pos.fields(), ts, tx, "false"), False))
    files = [SinkFile(0, i, lines[i:i + 2]) for i in range(0, len(lines), 2)]
    cuts = [len(files) * n // batches for n in range(batches + 1)]
    return Stream(ACTOR, "envelope", False, 1, [files[cuts[n]:cuts[n + 1]] for n in range(batches)],
                  transactions=transactions)


def environment(lakehouse: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"CDC_LAKEHOUSE_DIR": str(lakehouse), "DBT_PROFILES_DIR": str(ROOT / "profiles"), "TZ": "UTC",
                "PYTHONPATH": str(ROOT)})
    return env


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def finish(cmd: list[str], env: dict[str, str], log: Path, ok: tuple[int, ...] = (0,)) -> None:
    code = start(cmd, env, log).wait()
    assert code in ok, f"{' '.join(cmd)} exited {code}; see {log}"
