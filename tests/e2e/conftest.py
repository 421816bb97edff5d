"""The real CDC stack for the end-to-end tests: started here, stopped after.

It runs in this test run's own folder and on its own ports, so a developer's
`make cdc-up` stack can keep running beside it. If anything cannot start, the
fixture fails the tests with the service's log; nothing is skipped. It is also the
stack's own smoke test (one stack start for both): the generated credentials are
checked after `up`, and after `down` no process and no pid file may be left. One stack
serves every module of tests/e2e (package scope): test_schema_evolution.py adds its own
scratch connectors and removes them.

One lakehouse serves two of them: test_verify.py reconciles the tables
test_cdc_end_to_end.py landed and built, instead of landing and building them again, so
it runs right after it (before the modules that empty the project's schemas)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from stack.proc import pid_alive
from stack.settings import ports_above_defaults

# The modules that share the lakehouse (e2e_lake), in their order; the others follow.
LAKE_MODULES = ("test_cdc_end_to_end.py", "test_verify.py")
# The stack's topics the shared lakehouse lands (the Avro twins land apart).
LAKE_TOPIC_PATTERN = r"(pagila\.public|mariadb\.movies_db|outbox\.northwind|query\.northwind)\..*"
# Ports 10 above the `make cdc-up` defaults.
TEST_PORTS = ports_above_defaults(10)
CONNECTORS = ("pagila-envelope", "movies-envelope", "northwind-outbox", "pagila-avro", "movies-avro")
# The Avro path is compared with the JSON path's bronze on these Pagila tables (every
# type Pagila has: numeric, arrays, enums, bytea, tsvector, dates and timestamps), not
# the large rental, payment, inventory and link tables, whose snapshot would take the
# test's time twice for no type the others lack.
AVRO_PAGILA_TABLES = ("actor", "address", "category", "customer", "film", "language", "staff")
OVERRIDES = {"pagila-avro": {"table.include.list": ",".join(f"public.{t}" for t in AVRO_PAGILA_TABLES)}}


@pytest.fixture(scope="package")  # one stack for every module of tests/e2e, stopped after them
def cdc_stack(run_dir: Path):
    import stack

    # PostgreSQL runs as the `postgres` user when the tests run as root: it must reach its folder.
    run_dir.chmod(0o755)
    os.environ["CDC_STACK_DIR"] = str(run_dir / "stack")
    for name, value in TEST_PORTS.items():
        os.environ.setdefault(name, value)
    for name in ("CDC_PG_USER", "CDC_PG_PASSWORD", "CDC_MARIADB_USER", "CDC_MARIADB_PASSWORD"):
        os.environ.pop(name, None)  # exercise the credentials the stack generates
    try:
        # no object store: not read here; the registry for the Avro connectors
        info = stack.up(["postgres", "mariadb", "kafka", "connect", "registry"])
        for name in CONNECTORS:
            stack.register(name, overrides=OVERRIDES.get(name))
    except Exception as exc:  # noqa: BLE001 - fail (never skip) with the reason
        stack.down(purge=False)
        pytest.fail(f"the CDC stack did not start: {exc}", pytrace=False)
    try:
        credentials = Path(info.stack_dir) / "credentials.env"
        assert credentials.stat().st_mode & 0o777 == 0o600, "the generated credentials are readable by others"
        assert info.credentials.pg_password and info.credentials.pg_password in credentials.read_text()
        yield info
    finally:
        pids = [state["pid"] for state in stack.status().values() if isinstance(state, dict) and state.get("pid")]
        stack.down(purge=False)  # raises if a process of the stack is still running
    assert len(pids) == 5 and not any(pid_alive(pid) for pid in pids), pids
    assert not list((Path(info.stack_dir) / "logs").glob("*.pid"))


@dataclass(frozen=True)
class Lake:
    """How the shared lakehouse lands the stack's topics: the pattern and the checkpoint
    of its Kafka ingestion, which a later landing continues from."""

    topic_pattern: str
    checkpoint: Path


@pytest.fixture(scope="package")
def e2e_lake(spark, run_dir: Path):
    """The lakehouse test_cdc_end_to_end.py builds and test_verify.py reconciles: the
    project's schemas empty before the first and after the last module of tests/e2e."""
    from tests.support.lakehouse import empty_project_schemas

    with empty_project_schemas(spark):
        yield Lake(LAKE_TOPIC_PATTERN, run_dir / "checkpoints" / "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """LAKE_MODULES first among this folder's tests, in that order; the rest keep theirs."""
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if item.path.parent == here]
    rank = {name: n for n, name in enumerate(LAKE_MODULES)}
    ordered = sorted((items[i] for i in slots), key=lambda item: rank.get(item.path.name, len(rank)))  # stable
    for slot, item in zip(slots, ordered):
        items[slot] = item
