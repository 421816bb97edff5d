"""The real CDC stack on this machine, started by the project (no Docker, no systemd).

PostgreSQL 15 with Pagila, MariaDB 10.11 with ``movies_db.movies``, Kafka 4.1.1 (KRaft,
one node) and Kafka Connect 4.1.1 (distributed) with Debezium 3.5.0.Final, all on
127.0.0.1 under ``$CDC_STACK_DIR`` (default ``build/stack``). See ``stack/README.md``.

    import stack
    info = stack.up()                        # idempotent
    stack.register("pagila-envelope")        # waits until RUNNING
    stack.wait_caught_up(r"pagila\\.public\\..*")
    stack.end_offsets(r"pagila\\.public\\.actor")
    stack.down()

CLI: ``python -m stack up|down|status|register|unregister|restart-connect|offsets|caught-up``.
"""

from .api import (
    COMPONENTS,
    StackInfo,
    connector_config,
    connector_problem,
    connector_names,
    delete_topics,
    down,
    end_offsets,
    info,
    leftover_processes,
    load_pagila,
    mariadb,
    psql,
    register,
    restart_connect,
    status,
    unregister,
    up,
    wait_caught_up,
)
from .credentials import Credentials
from .errors import StackError

__all__ = [
    "COMPONENTS", "Credentials", "StackError", "StackInfo", "connector_config", "connector_problem",
    "connector_names", "delete_topics", "down", "end_offsets", "info", "leftover_processes",
    "load_pagila", "mariadb", "psql", "register", "restart_connect", "status", "unregister",
    "up", "wait_caught_up",
]
