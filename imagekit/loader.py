"""Load recipe files: strict YAML (a key given twice is an error naming both lines),
`extends` merged, the schema validated with "did you mean", then the compatibility rules.

Every problem becomes one line naming the file and the field path
(``recipes/x.yaml: torch.version: ...``). Nothing here touches Docker or the disk
beyond reading the recipe files themselves.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from imagekit import compat, credentials, schema_errors
from imagekit.datafiles import DuplicateKeyError, StrictLoader
from imagekit.errors import RecipeError
from imagekit.lockfile import locked_plan
from imagekit.plan import Plan
from imagekit.recipe import LoadedRecipe, Recipe


def load_recipe(path: str | Path) -> LoadedRecipe:
    """Read, merge `extends`, validate schema and compatibility rules. Raises RecipeError."""
    path = Path(path)
    data, sources = _load_merged(path, chain=())
    recipe = _validate(data, path)
    problems = [f"{path}: {p}" for p in compat.errors(recipe)]
    problems += [
        f"{path}: {p}" for p in credentials.recipe_env_problems(recipe.env, recipe.env_not_secret)
    ]
    problems += [
        f"{path}: {p}" for p in credentials.recipe_field_problems(recipe.model_dump(mode="json"))
    ]
    if problems:
        raise RecipeError(problems)
    digest = hashlib.sha256(
        json.dumps(recipe.model_dump(mode="json"), sort_keys=True).encode()
    ).hexdigest()
    return LoadedRecipe(recipe=recipe, path=path, sha256=digest, sources=sources)


def _load_merged(path: Path, chain: tuple[Path, ...]) -> tuple[dict[str, Any], tuple[Path, ...]]:
    """The recipe merged over its `extends` chain, and every file read (the recipe first)."""
    data = _read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data, (path,)
    if not isinstance(parent, str):
        raise RecipeError([f"{path}: extends: must be a file name, got {type(parent).__name__}"])
    parent_path = (path.parent / parent).resolve()
    if parent_path in chain or parent_path == path.resolve():
        raise RecipeError([f"{path}: extends: cycle through {parent}"])
    if not parent_path.is_file():
        raise RecipeError([f"{path}: extends: no such recipe {parent}"])
    base, sources = _load_merged(parent_path, chain + (path.resolve(),))
    return deep_merge(base, data), (path, *sources)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; everything else (lists included) is replaced whole."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError([f"{path}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError([f"{path}: cannot read: {exc}"]) from None
    try:
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except DuplicateKeyError as exc:
        raise RecipeError([f"{path}: {exc}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RecipeError([f"{path}: {where}malformed YAML: {problem}"]) from None
    if data is None:
        raise RecipeError([f"{path}: the recipe is empty"])
    if not isinstance(data, dict):
        raise RecipeError([f"{path}: a recipe must be a mapping, got {type(data).__name__}"])
    return data


def _validate(data: dict[str, Any], path: Path) -> Recipe:
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        raise RecipeError([f"{path}: {p}" for p in schema_errors.problems(exc, Recipe)]) from None


# -- what commands take: recipe files and RECIPE|IMAGE targets --------------------------------

from imagekit.paths import DEFAULT_RECIPES_DIR, recipe_paths  # noqa: E402,F401  (re-exported)


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
