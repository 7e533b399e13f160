"""Commands on recipe files: validate, render, schema, and the check reference (requirements)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from imagekit.cli.base import (
    FileOut,
    RecipeArg,
    cli,
    echo_lines,
    emit,
    err,
    out,
)
from imagekit.cli.console import escape
from imagekit.paths import DEFAULT_RECIPES_DIR, DEFAULT_RENDERS_DIR

# -- recipes ----------------------------------------------------------------------------------


@cli.command()
@click.argument("recipes", nargs=-1, required=True, type=RecipeArg)
def validate(recipes: tuple[Path, ...]) -> None:
    """Validate RECIPES: schema, versions and compatibility rules."""
    from imagekit.build.validate import validate as validate_recipes

    for result in validate_recipes(list(recipes)):
        echo_lines([f"[yellow]WARNING[/] {escape(w)}" for w in result.warnings], err)
        out.print(f"[green]ok[/] {escape(str(result.loaded.path))}: {', '.join(result.plan.tags)}")


@cli.command()
@click.argument("recipes", nargs=-1, type=RecipeArg)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory for the build context (default: dockerfiles/<name>/).",
)
@click.option("--check", is_flag=True, help="Fail (exit 3) when a committed render is stale.")
@click.option(
    "--recipes-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_RECIPES_DIR,
    show_default=True,
    help="Where to find recipes when none are given.",
)
@click.option(
    "--renders-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_RENDERS_DIR,
    show_default=True,
    help="Where committed renders live.",
)
def render(recipes, output, check, recipes_dir, renders_dir) -> None:
    """Render RECIPES (default: every recipe in recipes/) to Docker build contexts."""
    from imagekit.build.rendercache import render_recipes
    from imagekit.paths import recipe_paths

    paths = recipe_paths(list(recipes), recipes_dir)
    if check:
        from imagekit.build.render import check_renders

        for committed in check_renders(paths, renders_dir):
            out.line("up to date", "green", f"{committed}/")
        return
    for written in render_recipes(paths, output, renders_dir):
        out.line("rendered", "green", f"{written}/")


@cli.command()
@click.option("-o", "--output", type=FileOut, help="Write the schema to a file.")
def schema(output: Path | None) -> None:
    """Print the JSON Schema of recipes (for editors)."""
    from imagekit.recipe.model import json_schema

    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    emit(text, output)


@cli.command()
@click.option("-o", "--output", type=FileOut, help="Write the table to a file.")
def requirements(output: Path | None) -> None:
    """Print every check as a Markdown table: ID, requirement, what it proves, how profiles
    change it, and its fix (read from the check suite and imagekit's requirement units)."""
    from imagekit.cli.reference import checks_table

    emit(checks_table(), output)
