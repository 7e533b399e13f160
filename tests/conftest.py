"""Shared fixtures. Docker-backed tests carry the `docker` marker and live in
tests/integration; `.ci/run` runs both suites and never lets them skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "recipes"
# The test recipes under tests/ extend the shipped ones in recipes/: the explicit `extends`
# root a user would set for such a tree (tests of the default root delete it).
os.environ.setdefault("IMAGEKIT_RECIPE_ROOT", str(ROOT))


@pytest.fixture
def root() -> Path:
    return ROOT
