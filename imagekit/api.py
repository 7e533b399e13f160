"""What each CLI command does, as plain functions returning data (the CLI prints it).

These glue the one-way pipeline together: recipe -> plan -> context -> image -> report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imagekit import compat
from imagekit.errors import RecipeError, StaleRenderError
from imagekit.plan import Plan, make_plan
from imagekit.recipe import LoadedRecipe, load_recipe
from imagekit.render import (
    Context,
    ContextOptions,
    render_context,
    stale_files,
    write_context,
)

DEFAULT_RECIPES_DIR = Path("recipes")
DEFAULT_RENDERS_DIR = Path("dockerfiles")


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
        results.append(Validated(loaded, make_plan(loaded), warnings))
    if problems:
        raise RecipeError(problems)
    return results


def recipe_paths(paths: list[Path], recipes_dir: Path = DEFAULT_RECIPES_DIR) -> list[Path]:
    """The given recipes, or every recipe in `recipes_dir` when none is given."""
    if paths:
        return list(paths)
    found = sorted(recipes_dir.glob("*.yaml"))
    if not found:
        raise RecipeError([f"{recipes_dir}: no recipes (*.yaml) found"])
    return found


def plan_context(path: Path, options: ContextOptions | None = None) -> tuple[Plan, Context]:
    loaded = load_recipe(path)
    plan = make_plan(loaded)
    return plan, render_context(plan, options)


def render(
    paths: list[Path], out: Path | None, renders_dir: Path = DEFAULT_RENDERS_DIR
) -> list[Path]:
    """Write each recipe's build context (to `out`, or dockerfiles/<name>/)."""
    if out is not None and len(paths) != 1:
        raise RecipeError([f"-o {out}: give exactly one recipe with -o"])
    rendered = [(v.plan, render_context(v.plan)) for v in validate(paths)]
    return [write_context(ctx, out or renders_dir / plan.name) for plan, ctx in rendered]


def check_renders(paths: list[Path], renders_dir: Path = DEFAULT_RENDERS_DIR) -> list[Path]:
    """Raise StaleRenderError naming every recipe whose committed render is stale."""
    checked, stale = [], []
    for v in validate(paths):
        committed = renders_dir / v.plan.name
        files = stale_files(render_context(v.plan), committed)
        if files:
            stale.append(
                f"{v.loaded.path}: committed render {committed}/ is stale ({', '.join(files)})"
            )
        checked.append(committed)
    if stale:
        raise StaleRenderError("\n".join(stale), hint="run `imagekit render` and commit the result")
    return checked
