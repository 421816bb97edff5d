"""The object store's keys: from the environment, else generated once and kept private."""

from __future__ import annotations

import pytest

from stack.s3 import ACCESS_KEY, SECRET_KEY, load_s3_credentials, validate_bucket


def test_keys_come_from_the_environment_when_set(tmp_path, monkeypatch):
    monkeypatch.setenv(ACCESS_KEY, "mine")
    monkeypatch.setenv(SECRET_KEY, "my-secret")
    creds = load_s3_credentials(tmp_path / "s3-credentials.env")
    assert (creds.access_key, creds.secret_key) == ("mine", "my-secret")
    assert not (tmp_path / "s3-credentials.env").exists()
    assert "my-secret" not in repr(creds)


def test_generated_keys_are_kept_private_and_reused(tmp_path, monkeypatch):
    monkeypatch.delenv(ACCESS_KEY, raising=False)
    monkeypatch.delenv(SECRET_KEY, raising=False)
    path = tmp_path / "s3-credentials.env"
    first = load_s3_credentials(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert first == load_s3_credentials(path)
    assert first.secret_key in path.read_text() and len(first.secret_key) >= 24


@pytest.mark.parametrize("name", ["../x", "a", "Upper", "a_b", "x" * 64, "-lead"])
def test_bucket_names_are_checked_before_use(name):
    with pytest.raises(ValueError, match="bucket name"):
        validate_bucket(name)
