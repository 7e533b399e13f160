"""Shared fixtures. Docker-backed tests carry the `docker` marker and live in
tests/integration; `.ci/run` runs both suites and never lets them skip."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "recipes"


@pytest.fixture
def root() -> Path:
    return ROOT
