"""`imagekit validate` and the renders' first step: recipe files -> validated recipes, their
plans and locks, every problem of every file collected before failing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imagekit.build.lockfile import locked_plan
from imagekit.build.plan import Plan
from imagekit.errors import RecipeError
from imagekit.recipe import compat
from imagekit.recipe.loader import load_recipe
from imagekit.recipe.model import LoadedRecipe


@dataclass(frozen=True)
class Validated:
    loaded: LoadedRecipe
    plan: Plan
    warnings: list[str]


def validate(paths: list[Path]) -> list[Validated]:
    """Validate every recipe; collect every problem of every file before failing."""
    results, problems = [], []
    for path in paths:
        try:
            loaded = load_recipe(path)
        except RecipeError as exc:
            problems.extend(exc.problems)
            continue
        warnings = [f"{path}: {w}" for w in compat.warnings(loaded.recipe)]
        plan, lock = locked_plan(loaded)
        if lock.stale:
            warnings.append(f"{lock.path}: stale (the recipe changed); run `imagekit lock {path}`")
        results.append(Validated(loaded, plan, warnings))
    if problems:
        raise RecipeError(problems)
    return results
