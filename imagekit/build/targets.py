"""RECIPE|IMAGE arguments (check, smoke, diff, sbom, publish, mpijob): a .yaml path means that
recipe's own image. The recipe machinery (pydantic models, compat rules: a tenth of a second
of imports) is loaded only when a recipe is named, so `imagekit check IMAGE` never pays it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from imagekit.grammar import parse_ref

if TYPE_CHECKING:
    from imagekit.build.plan import Plan


def is_recipe(target: str) -> bool:
    return target.endswith((".yaml", ".yml"))


def recipe_plan(recipe: Path | None) -> Plan | None:
    if recipe is None:
        return None
    from imagekit.build.plan import make_plan
    from imagekit.recipe.loader import load_recipe

    return make_plan(load_recipe(recipe))


def resolve_target(target: str) -> tuple[str, Path | None]:
    """(the image, the recipe it came from or None)."""
    if not is_recipe(target):
        return target, None
    return recipe_plan(Path(target)).image, Path(target)


def publish_target(target: str) -> tuple[str, tuple[str, ...]]:
    """The image to publish and the recipe's moving tags (none for a plain image)."""
    image, recipe = resolve_target(target)
    plan = recipe_plan(recipe)
    moving = tuple(parse_ref(t).tag or "latest" for t in plan.moving_tags) if plan else ()
    return image, moving
