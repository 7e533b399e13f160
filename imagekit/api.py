"""What each CLI command does, as plain functions returning data (the CLI prints it).

These glue the one-way pipeline together: recipe -> plan -> context -> image -> report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imagekit import compat
from imagekit.errors import RecipeError, StaleRenderError
from imagekit.files import write_json_atomic
from imagekit.launch import LaunchLine, LaunchRequest, mpijob, recommend
from imagekit.lock import locked_plan
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
        plan, lock = locked_plan(loaded)
        if lock.stale:
            warnings.append(f"{lock.path}: stale (the recipe changed); run `imagekit lock {path}`")
        results.append(Validated(loaded, plan, warnings))
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
    plan, _ = locked_plan(load_recipe(path))
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


# -- RECIPE|IMAGE targets and the commands built on them -------------------------------------


def resolve_target(target: str) -> tuple[str, Path | None]:
    """RECIPE|IMAGE arguments: a .yaml path means that recipe's own image."""
    if not target.endswith((".yaml", ".yml")):
        return target, None
    return make_plan(load_recipe(Path(target))).image, Path(target)


def recipe_plan(recipe: Path | None) -> Plan | None:
    return make_plan(load_recipe(recipe)) if recipe is not None else None


def mpirun_line(request_kw: dict, recipe: Path | None, profile: str) -> LaunchLine:
    """The recommended launch line; MCA parameters the recipe bakes in are left out, and a
    profile whose sshd is not on port 22 gets the rsh agent pointed at its port."""
    from imagekit.checks.profiles import load_profile

    plan = recipe_plan(recipe)
    if plan is not None:
        request_kw.setdefault("baked_mca", {k: v for k, v, _ in plan.mca})
        if request_kw.get("gpu") is None:
            request_kw["gpu"] = plan.accel == "gpu"
    request_kw["gpu"] = bool(request_kw.get("gpu"))
    request_kw["ssh_port"] = load_profile(profile).port
    return recommend(LaunchRequest(**request_kw))


def mpijob_manifest(
    target: str,
    name: str,
    workers: int,
    slots: int,
    command: tuple[str, ...],
    gpus_per_worker: int,
    shm_size: str,
) -> dict:
    image, recipe = resolve_target(target)
    line = mpirun_line(
        {
            "workers": workers,
            "slots": slots,
            "command": command,
            "gpu": True if gpus_per_worker else None,
        },
        recipe,
        "seed",
    )
    return mpijob(name, image, workers, slots, line.argv, gpus_per_worker, shm_size)


def publish_target(target: str) -> tuple[str, tuple[str, ...]]:
    """The image to publish and the recipe's moving tags (none for a plain image)."""
    image, recipe = resolve_target(target)
    plan = recipe_plan(recipe)
    moving = tuple(t.rsplit(":", 1)[1] for t in plan.moving_tags) if plan else ()
    return image, moving


def sbom(image: str) -> dict:
    from imagekit.engine import Engine
    from imagekit.inventory import cyclonedx, inventory

    return cyclonedx(inventory(Engine.connect(), resolve_target(image)[0], with_files=False))


def write_json(body: dict, path: Path) -> Path:
    return write_json_atomic(path, body)


def diff_images(a: str, b: str, with_files: bool):
    from imagekit.engine import Engine
    from imagekit.inventory import diff, inventory

    engine = Engine.connect()
    first, second = (inventory(engine, resolve_target(x)[0], with_files) for x in (a, b))
    return diff(first, second)
