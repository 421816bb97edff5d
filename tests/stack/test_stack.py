"""Smoke test of the real CDC stack (python -m stack): start it, snapshot both sources
through Debezium, restart Kafka Connect, stop it, and leave no process behind.

It runs in its own folder and on its own ports, so a developer's `make cdc-up` stack
keeps running beside it. Nothing is skipped: if a service cannot start, the test fails
with the service's log tail (StackError).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import stack
from stack.proc import pid_alive
from stack.settings import ports_above_defaults

pytestmark = pytest.mark.stack

# 20 above the `make cdc-up` defaults (the e2e tests use 10 above).
PORTS = ports_above_defaults(20)


@pytest.fixture
def stack_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    stack_dir = tmp_path / "stack"
    monkeypatch.setenv("CDC_STACK_DIR", str(stack_dir))
    for name, value in PORTS.items():
        monkeypatch.setenv(name, value)
    for name in ("CDC_PG_USER", "CDC_PG_PASSWORD", "CDC_MARIADB_USER", "CDC_MARIADB_PASSWORD"):
        monkeypatch.delenv(name, raising=False)  # exercise the generated credentials
    return stack_dir


def test_stack_snapshot_restart_and_down(stack_env: Path) -> None:
    try:
        info = stack.up()
        assert info.stack_dir == stack_env
        assert info.kafka_bootstrap == f"127.0.0.1:{PORTS['CDC_KAFKA_PORT']}"
        credentials = stack_env / "credentials.env"
        assert credentials.stat().st_mode & 0o777 == 0o600
        assert info.credentials.pg_password and info.credentials.pg_password in credentials.read_text()

        for name in ("pagila-envelope", "movies-envelope"):
            stack.register(name)
        stack.wait_caught_up(r"(pagila\.public|mariadb\.movies_db)\..*")

        actors = int(stack.psql("select count(*) from actor")[0][0] or 0)
        actor_offsets = stack.end_offsets(r"pagila\.public\.actor")
        assert actors == 200
        assert sum(actor_offsets.values()) == actors, actor_offsets

        movies = int(stack.mariadb("select count(*) from movies")[0][0] or 0)
        movie_offsets = stack.end_offsets(r"mariadb\.movies_db\.movies")
        assert movies > 0
        assert sum(movie_offsets.values()) == movies, movie_offsets

        stack.restart_connect()
        connectors = stack.status()["connectors"]
        for name in ("pagila-envelope", "movies-envelope"):
            assert connectors[name] == {"state": "RUNNING", "tasks": ["RUNNING"]}, connectors

        pids = [state["pid"] for state in stack.status().values() if isinstance(state, dict) and state.get("pid")]
        assert len(pids) == 4
    finally:
        stack.down()
    assert stack.leftover_processes() == []
    assert not any(pid_alive(pid) for pid in pids)
    assert not list((stack_env / "logs").glob("*.pid"))
