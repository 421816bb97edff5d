"""The `local` profile's driver options: CDC_DRIVER_JAVA_OPTIONS comes after the
profile's own (the tests give their short processes `-XX:TieredStopAtLevel=1` this way).
And run from the repository root, dbt and the ingestion find the profile and its
defaults with nothing exported."""

from __future__ import annotations

import re

import pytest

from core.spark import PROFILES_FILE, ProfileError, check_metastore, profile_spark_settings
from tests.support.paths import ROOT

OPTIONS = "spark.driver.extraJavaOptions"


def test_driver_java_options_are_appended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDC_DRIVER_JAVA_OPTIONS", raising=False)
    own = profile_spark_settings("local")[OPTIONS].split()
    monkeypatch.setenv("CDC_DRIVER_JAVA_OPTIONS", "-Dcdc.test.marker=1 -Xss4m")
    options = profile_spark_settings("local")[OPTIONS].split()
    assert options[-2:] == ["-Dcdc.test.marker=1", "-Xss4m"], options
    assert "-XX:+UseParallelGC" in options  # the profile's own are kept
    assert options[:-2] == own, options  # ... all of them, in their order, and nothing else


def test_no_driver_java_options_adds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDC_DRIVER_JAVA_OPTIONS", raising=False)
    options = profile_spark_settings("local")[OPTIONS].split()
    assert options[-1].startswith("-XX:SharedArchiveFile="), options


def test_dbt_finds_the_profile_from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dbt build` run from the root needs no --profiles-dir / DBT_PROFILES_DIR."""
    from dbt.cli.resolvers import default_profiles_dir

    monkeypatch.chdir(ROOT)
    assert default_profiles_dir() == ROOT
    assert (ROOT / "profiles.yml").resolve() == PROFILES_FILE.resolve()


def test_profile_defaults_are_what_the_makefile_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing exported, the profile names the jars, JVM archive and lakehouse the
    Makefile sets (relative to the root, where the by-hand commands run)."""
    for name in ("CDC_SPARK_JARS", "CDC_JVM_ARCHIVE", "CDC_LAKEHOUSE_DIR", "CDC_WAREHOUSE_DIR", "CDC_DRIVER_CLASSPATH"):
        monkeypatch.delenv(name, raising=False)
    makefile = (ROOT / "Makefile").read_text()
    jars = re.search(r"^SPARK_JARS := ((?:.*\\\n)*.*)$", makefile, re.M).group(1).replace("\\\n", " ").split()
    settings = profile_spark_settings("local")
    assert settings["spark.jars"].split(",") == [f".jars/{jar}.jar" for jar in jars]
    assert re.search(r"^export CDC_JVM_ARCHIVE \?= \$\(CURDIR\)/\$\(JARS\)/(\S+)$", makefile, re.M).group(1) \
        == "spark-driver.jsa"
    assert "-XX:SharedArchiveFile=.jars/spark-driver.jsa" in settings[OPTIONS].split()
    assert "export CDC_DRIVER_CLASSPATH ?= $(CURDIR)/$(JARS)/postgresql.jar" in makefile
    assert settings["spark.driver.extraClassPath"] == ".jars/postgresql.jar"
    assert "export CDC_LAKEHOUSE_DIR ?= $(CURDIR)/lakehouse" in makefile
    assert settings["spark.sql.warehouse.dir"] == "lakehouse/warehouse"


def test_the_shared_metastore_leaves_derby_out_of_the_driver_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """CDC_METASTORE=shared: no Derby URL as a system property, which would override the
    hive-site.xml of SPARK_CONF_DIR (HiveConf lets system properties win)."""
    monkeypatch.delenv("CDC_METASTORE", raising=False)
    assert any(o.startswith("-Djavax.jdo.option.ConnectionURL=jdbc:derby:")
               for o in profile_spark_settings("local")[OPTIONS].split())
    monkeypatch.setenv("CDC_METASTORE", "shared")
    options = profile_spark_settings("local")[OPTIONS].split()
    assert not [o for o in options if "javax.jdo.option.ConnectionURL" in o], options
    assert "-Ddatanucleus.schema.autoCreateAll=true" in options


@pytest.mark.parametrize(("environ", "message"), [
    ({"CDC_METASTORE": "postgres"}, "CDC_METASTORE='postgres': choose embedded"),
    ({"CDC_METASTORE": "shared"}, "CDC_METASTORE=shared but SPARK_CONF_DIR='' holds no hive-site.xml"),
    ({"CDC_METASTORE": "shared", "SPARK_CONF_DIR": "/nonexistent"}, "SPARK_CONF_DIR='/nonexistent' holds no"),
])
def test_a_metastore_setting_that_cannot_work_is_refused(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)):
        check_metastore(environ)


def test_the_metastore_settings_that_work_are_taken(tmp_path) -> None:
    assert check_metastore({}) == "embedded"
    (tmp_path / "hive-site.xml").write_text("<configuration/>")
    assert check_metastore({"CDC_METASTORE": "shared", "SPARK_CONF_DIR": str(tmp_path)}) == "shared"
