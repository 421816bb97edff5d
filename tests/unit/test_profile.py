"""The `local` profile's driver options: CDC_DRIVER_JAVA_OPTIONS comes after the
profile's own (the tests give their short processes `-XX:TieredStopAtLevel=1` this way)."""

from __future__ import annotations

import pytest

from ingestion.spark import profile_spark_settings

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
