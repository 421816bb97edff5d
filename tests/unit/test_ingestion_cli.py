"""CLI exit codes for usage errors and failures (no Hudi writes, so these are fast)."""

from __future__ import annotations

from ingestion.cli import main


def test_help_documents_exit_codes(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for text in ("--input", "--target", "--bronze-schema", "--sources-yml", "--topics", "exit codes", "quarantined"):
        assert text in out


def test_missing_input_argument_is_usage_error(capsys):
    assert main([]) == 2
    assert "--input" in capsys.readouterr().err


def test_bad_schema_name_is_usage_error(spark, tmp_path, caplog):
    assert main(["--input", str(tmp_path), "--bronze-schema", "Bronze-1"]) == 2
    assert "bronze schema 'Bronze-1'" in caplog.text


def test_bad_topics_regex_is_usage_error(spark, tmp_path, caplog):
    assert main(["--input", str(tmp_path), "--topics", "(", "--bronze-schema", "bronze_cli_test"]) == 2
    assert "--topics" in caplog.text


def test_missing_input_folder_is_failure(spark, tmp_path, caplog):
    missing = tmp_path / "nope"
    assert main(["--input", str(missing), "--bronze-schema", "bronze_cli_test"]) == 1
    assert f"input {str(missing)!r} does not exist" in caplog.text


def test_empty_input_is_ok(spark, tmp_path, capsys):
    assert main(["--input", str(tmp_path), "--bronze-schema", "bronze_cli_test", "--sources-yml", str(tmp_path / "x.yml")]) == 0
    assert "0 new file(s)" in capsys.readouterr().out


def test_avro_needs_kafka_and_a_registry_url(tmp_path, caplog, monkeypatch):
    """Checked before Spark starts: Avro is read from Kafka only, through a registry."""
    monkeypatch.delenv("CDC_SCHEMA_REGISTRY_URL", raising=False)
    assert main(["--input", str(tmp_path), "--value-format", "avro"]) == 2
    assert "--value-format goes with --kafka-bootstrap-servers" in caplog.text
    kafka = ["--kafka-bootstrap-servers", "127.0.0.1:9", "--topic-pattern", "t", "--value-format", "avro"]
    assert main(kafka) == 2
    assert "--value-format avro needs the schema registry's URL in CDC_SCHEMA_REGISTRY_URL" in caplog.text
    monkeypatch.setenv("CDC_SCHEMA_REGISTRY_URL", "registry:8081")
    assert main(kafka) == 2
    assert "must start with http:// or https://" in caplog.text
    monkeypatch.setenv("CDC_SCHEMA_REGISTRY_URL", "http://registry:8081")
    monkeypatch.setenv("CDC_SCHEMA_REGISTRY_USER", "reader")
    monkeypatch.delenv("CDC_SCHEMA_REGISTRY_PASSWORD", raising=False)
    assert main(kafka) == 2
    assert "set both CDC_SCHEMA_REGISTRY_USER and CDC_SCHEMA_REGISTRY_PASSWORD, or neither" in caplog.text
