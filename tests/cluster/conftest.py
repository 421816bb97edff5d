"""tests/cluster/test_cluster.py runs only under `make test-cluster` (CDC_CLUSTER_TESTS=1):
it starts a Spark cluster of its own, longer than `make test` should wait for."""

from __future__ import annotations

import os

import pytest

collect_ignore = [] if os.environ.get("CDC_CLUSTER_TESTS") == "1" else ["test_cluster.py"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: starts a Spark standalone cluster and Thrift Server (make test-cluster)")
