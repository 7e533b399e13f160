"""Default locations, relative to where imagekit runs (a checkout of a recipes repository).
Kept apart so the command line can show them without importing the recipe machinery."""

from __future__ import annotations

from pathlib import Path

DEFAULT_RECIPES_DIR = Path("recipes")
DEFAULT_RENDERS_DIR = Path("dockerfiles")
