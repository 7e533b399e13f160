"""Load recipe files: strict YAML (a key given twice is an error naming both lines),
`extends` merged, the schema validated with "did you mean", then the compatibility rules.

Every problem becomes one line naming the file and the field path
(``recipes/x.yaml: torch.version: ...``). Nothing here touches Docker or the disk
beyond reading the recipe files themselves.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from imagekit import credentials, grammar, schema_errors
from imagekit.datafiles import UserYamlError, read_user_yaml
from imagekit.errors import RecipeError
from imagekit.recipe import compat
from imagekit.recipe.model import LoadedRecipe, Recipe


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
    return LoadedRecipe(recipe=recipe, path=path, sha256=recipe_digest(recipe), sources=sources)


# Sections added after recipes had digests: at its default, such a section means what every
# recipe meant before it existed, so it is left out of the digest and the digests (in locks
# and image labels) of those recipes stay as they were.
LATER_SECTIONS = ("network", "platforms")


def recipe_digest(recipe: Recipe) -> str:
    data = recipe.model_dump(mode="json")
    for name in LATER_SECTIONS:
        if getattr(recipe, name) == type(recipe).model_fields[name].default:
            del data[name]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


# How far `extends` may chain: the shipped recipes use one step; a chain is read file by file.
MAX_EXTENDS_DEPTH = 8
# An explicit root for `extends` (a monorepo whose recipes extend shared ones elsewhere in it).
RECIPE_ROOT_ENV = "IMAGEKIT_RECIPE_ROOT"


def recipe_roots(path: Path) -> tuple[Path, ...]:
    """The trees a recipe's `extends` chain may read from: the recipe's own directory
    (symlinks resolved), and $IMAGEKIT_RECIPE_ROOT when set."""
    explicit = os.environ.get(RECIPE_ROOT_ENV)
    own = path.resolve().parent
    return (own, Path(explicit).resolve()) if explicit else (own,)


def _load_merged(
    path: Path, chain: tuple[Path, ...], roots: tuple[Path, ...] = ()
) -> tuple[dict[str, Any], tuple[Path, ...]]:
    """The recipe merged over its `extends` chain, and every file read (the recipe first)."""
    roots = roots or recipe_roots(path)
    data = _read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data, (path,)
    if not isinstance(parent, str):
        raise RecipeError([f"{path}: extends: must be a file name, got {type(parent).__name__}"])
    if len(chain) + 1 >= MAX_EXTENDS_DEPTH:
        raise RecipeError([f"{path}: extends: more than {MAX_EXTENDS_DEPTH} recipes deep"])
    if grammar.control_characters(parent) or len(parent) > 1024:
        raise RecipeError([f"{path}: extends: not a file name"])
    parent_path = (path.parent / parent).resolve()
    if not any(parent_path.is_relative_to(root) for root in roots):
        # Not read, so nothing of the outside file can reach an error message.
        raise RecipeError(
            [
                f"{path}: extends: {parent!r} leaves the recipe's directory {roots[0]} "
                f"(set {RECIPE_ROOT_ENV} to a directory above both to allow it)"
            ]
        )
    if parent_path in chain or parent_path == path.resolve():
        raise RecipeError([f"{path}: extends: cycle through {parent}"])
    if not parent_path.is_file():
        raise RecipeError([f"{path}: extends: no such recipe {parent}"])
    base, sources = _load_merged(parent_path, chain + (path.resolve(),), roots)
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
        data = read_user_yaml(path)
    except UserYamlError as exc:
        raise RecipeError([f"{path}: {exc}"]) from None
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
