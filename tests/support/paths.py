"""Where the tests find the Pagila dataset (read in place, never copied into the repo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGILA_DIR = Path(os.environ.get("PAGILA_DIR", ROOT.parent / "shared" / "datasets" / "pagila"))
if not PAGILA_DIR.is_absolute():
    PAGILA_DIR = ROOT / PAGILA_DIR


def require_pagila() -> Path:
    """The dataset folder; a missing dataset fails the test loudly (never a skip)."""
    if not (PAGILA_DIR / "pagila-data.sql").exists():
        pytest.fail(f"Pagila dataset not found at {PAGILA_DIR}: set PAGILA_DIR", pytrace=False)
    return PAGILA_DIR
