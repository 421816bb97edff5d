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
