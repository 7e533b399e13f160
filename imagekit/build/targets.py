"""RECIPE|IMAGE arguments (check, smoke, diff, sbom, publish, mpijob): a .yaml path means that
recipe's own image. The recipe machinery (pydantic models, compat rules: a tenth of a second
of imports) is loaded only when a recipe is named, so `imagekit check IMAGE` never pays it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from imagekit.errors import UsageError
from imagekit.grammar import parse_ref, shown
from imagekit.platforms import without_tag_suffix

if TYPE_CHECKING:
    from imagekit.build.plan import Plan


def is_recipe(target: str) -> bool:
    return target.endswith((".yaml", ".yml"))


def recipe_plan(recipe: Path | None, platform: str | None = None) -> Plan | None:
    if recipe is None:
        return None
    from imagekit.build.plan import make_plan
    from imagekit.recipe.loader import load_recipe

    return make_plan(load_recipe(recipe), platform)


def recipe_expected(recipe: Path | None) -> tuple[dict[str, str], str] | None:
    """The versions a recipe's image must report (R12), and where they came from."""
    plan = recipe_plan(recipe)
    return None if plan is None else (plan.expected, f"recipe {recipe}")


def resolve_target(target: str, platform: str | None = None) -> tuple[str, Path | None]:
    """(the image, the recipe it came from or None). `platform` picks one of a recipe's
    platforms; an image is what it is, so naming a platform for one is a usage error."""
    if not is_recipe(target):
        if platform is not None:
            raise UsageError(
                f"--platform {platform}: picks a recipe's image; {shown(target)} is an image "
                "(its config says its platform)"
            )
        return target, None
    return recipe_plan(Path(target), platform).image, Path(target)


def publish_targets(
    targets: tuple[str, ...], platforms: tuple[str, ...] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The images to publish (a recipe's for each of `platforms`, or for its first) and their
    recipes' moving tags (none for plain images). With several images the index takes the
    moving tags, so each loses its platform's suffix."""
    plans = []
    images = []
    for target in targets:
        for platform in platforms or (None,):
            image, recipe = resolve_target(target, platform)
            images.append(image)
            plans.append(recipe_plan(recipe, platform))
    moving: list[str] = []
    for plan in filter(None, plans):
        for ref in plan.moving_tags:
            tag = parse_ref(ref).tag or "latest"
            if len(images) > 1:
                tag = without_tag_suffix(tag, plan.platform)
            if tag not in moving:
                moving.append(tag)
    return tuple(images), tuple(moving)
