"""Default locations, relative to where imagekit runs (a checkout of a recipes repository).
Kept apart so the command line can show them without importing the recipe machinery."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_RECIPES_DIR = Path("recipes")
DEFAULT_RENDERS_DIR = Path("dockerfiles")


def recipe_paths(paths: list[Path], recipes_dir: Path = DEFAULT_RECIPES_DIR) -> list[Path]:
    """The given recipes, or every recipe in `recipes_dir` when none is given."""
    if paths:
        return list(paths)
    found = sorted(recipes_dir.glob("*.yaml"))
    if not found:
        from imagekit.errors import RecipeError

        raise RecipeError([f"{recipes_dir}: no recipes (*.yaml) found"])
    return found


def cache_dir(name: str) -> Path:
    """One of imagekit's caches: $XDG_CACHE_HOME/imagekit/NAME (layers, probes, renders,
    templates); every entry is valid by its key, so any of them can be removed at any time."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "imagekit" / name


CACHES = ("layers", "probes", "renders", "templates")


def cache_off(variable: str) -> bool:
    """A cache's off switch (IMAGEKIT_LAYER_CACHE=off, ...): off, 0 or no."""
    return os.environ.get(variable, "on").lower() in ("off", "0", "no")


def users_own(info: os.stat_result) -> bool:
    """A cache entry is trusted only if this user wrote it: owned by them, and writable by
    no group or other user (who could have planted it)."""
    return info.st_uid == os.getuid() and not info.st_mode & 0o022
