"""The environment of a stack a test starts for itself (a metastore, a Thrift Server, a
cluster) beside a developer's own, and a HiveServer2 session on its Thrift Server."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest

from stack.settings import ports_above_defaults


@contextmanager
def stack_environment(stack_dir: Path, lakehouse: Path, port_offset: int,
                      extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """CDC_STACK_DIR, the lakehouse (a Thrift Server's warehouse is in it), every port
    `port_offset` above its default and `extra` set while the block runs; the metastore's
    credentials left for the stack to generate."""
    stack_dir.parent.chmod(0o755)  # PostgreSQL runs as the `postgres` user when the tests run as root
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CDC_STACK_DIR", str(stack_dir))
        env.setenv("CDC_LAKEHOUSE_DIR", str(lakehouse))
        env.delenv("CDC_WAREHOUSE_DIR", raising=False)
        for name, value in {**ports_above_defaults(port_offset), **(extra or {})}.items():
            env.setenv(name, value)
        for name in ("CDC_METASTORE_USER", "CDC_METASTORE_PASSWORD"):
            env.delenv(name, raising=False)
        yield


def thrift_connection(env: Mapping[str, str]) -> Any:
    """A HiveServer2 session on the Thrift Server `env` names (spark_cluster.thrift_env())."""
    from pyhive import hive

    return hive.connect(host=env["CDC_THRIFT_HOST"], port=int(env["CDC_THRIFT_PORT"]),
                        username=env["CDC_THRIFT_USER"], auth=env["CDC_THRIFT_AUTH"])
