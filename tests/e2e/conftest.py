"""The real CDC stack for the end-to-end tests: started here, stopped (and purged) after.

It runs in this test run's own folder and on its own ports, so a developer's
`make cdc-up` stack can keep running beside it. If anything cannot start, the
fixture fails the tests with the service's log; nothing is skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stack.settings import ports_above_defaults

# Ports 10 above the `make cdc-up` defaults.
TEST_PORTS = ports_above_defaults(10)
CONNECTORS = ("pagila-envelope", "movies-envelope")


@pytest.fixture(scope="module")  # stopped after the end-to-end tests, not at the end of the run
def cdc_stack(run_dir: Path):
    import stack

    # PostgreSQL runs as the `postgres` user when the tests run as root: it must reach its folder.
    run_dir.chmod(0o755)
    os.environ["CDC_STACK_DIR"] = str(run_dir / "stack")
    for name, value in TEST_PORTS.items():
        os.environ.setdefault(name, value)
    try:
        info = stack.up()
        for name in CONNECTORS:
            stack.register(name)
    except Exception as exc:  # noqa: BLE001 - fail (never skip) with the reason
        stack.down(purge=False)
        pytest.fail(f"the CDC stack did not start: {exc}", pytrace=False)
    try:
        yield info
    finally:
        stack.down(purge=False)
