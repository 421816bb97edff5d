"""What stack/spark_cluster.py gives a cluster application, checked without starting one
(this module runs in `make test`; test_cluster.py only in `make test-cluster`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack import spark_cluster
from stack.settings import DEFAULT_PORTS, load_settings, ports_above_defaults


def test_components_bring_what_they_need() -> None:
    assert spark_cluster.normalize(["thrift"]) == (["metastore"], ["spark-master", "spark-workers", "thrift"])
    assert spark_cluster.normalize(["postgres", "spark-workers"]) == (["postgres"], ["spark-master", "spark-workers"])
    assert spark_cluster.normalize(["kafka"]) == (["kafka"], [])


def test_cluster_ports_move_with_the_others() -> None:
    moved = ports_above_defaults(30)
    for name in ("CDC_SPARK_MASTER_PORT", "CDC_SPARK_MASTER_UI_PORT", "CDC_SPARK_WORKER_UI_PORT", "CDC_THRIFT_PORT"):
        assert int(moved[name]) == DEFAULT_PORTS[name] + 30
    # the second worker's UI (one above CDC_SPARK_WORKER_UI_PORT) collides with no default
    assert DEFAULT_PORTS["CDC_SPARK_WORKER_UI_PORT"] + 1 not in DEFAULT_PORTS.values()


def test_applications_get_the_local_targets_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CDC_LAKEHOUSE_DIR", str(tmp_path / "lakehouse"))
    monkeypatch.delenv("CDC_WAREHOUSE_DIR", raising=False)
    monkeypatch.delenv("CDC_SPARK_JARS", raising=False)
    monkeypatch.delenv("CDC_HUDI_METADATA", raising=False)
    spark, hudi = spark_cluster.application_settings(load_settings())
    assert spark["spark.serializer"] == "org.apache.spark.serializer.KryoSerializer"
    assert spark["spark.sql.extensions"] == "org.apache.spark.sql.hudi.HoodieSparkSessionExtension"
    assert spark["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.hudi.catalog.HoodieCatalog"
    assert spark["spark.sql.filesourceTableRelationCacheSize"] == "0"
    assert spark["spark.sql.warehouse.dir"] == str(tmp_path / "lakehouse" / "warehouse")
    assert all(Path(jar).is_absolute() for jar in spark["spark.jars"].split(","))
    assert spark["spark.jars"].split(",")[0].endswith("hudi-spark3.5-bundle_2.12.jar")
    # the shared metastore, not Derby; no class data sharing archive built for another class path
    options = spark["spark.driver.extraJavaOptions"]
    assert "jdbc:derby" not in options and "SharedArchiveFile" not in options
    assert not {"spark.master", "spark.driver.memory"} & set(spark)
    # spark-submit drops non-Spark keys: Hudi's go to hudi-defaults.conf, with the shared
    # metastore's concurrency control (several applications write one lakehouse)
    assert hudi == {"hoodie.metadata.enable": "false", "hoodie.datasource.read.file.index.listing.mode": "eager",
                    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
                    "hoodie.clean.failed.writes.policy": "LAZY",
                    "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
                    "hoodie.write.lock.filesystem.expire": "5"}
    assert spark["spark.cores.max"] == "2" and spark["spark.executor.cores"] == "1"
