"""The command line: parse, call one function, print. The only module that prints.

Every ImagekitError is caught once, in `main`, and becomes one red line per problem plus
an exit code; `--debug` (or IMAGEKIT_DEBUG=1) shows the traceback instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from imagekit import __version__, api
from imagekit.errors import ImagekitError

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

RecipeArg = click.Path(path_type=Path, dir_okay=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="imagekit")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """Build, verify and publish MPI + NCCL + DeepSpeed training images for MPIJobs."""


@cli.command()
@click.argument("recipes", nargs=-1, required=True, type=RecipeArg)
def validate(recipes: tuple[Path, ...]) -> None:
    """Validate RECIPES: schema, versions and compatibility rules."""
    for result in api.validate(list(recipes)):
        for warning in result.warnings:
            err.print(f"[yellow]WARNING[/] {escape(warning)}")
        out.print(f"[green]ok[/] {escape(str(result.loaded.path))}: {', '.join(result.plan.tags)}")


@cli.command()
@click.argument("recipes", nargs=-1, type=RecipeArg)
@click.option("-o", "--output", type=click.Path(path_type=Path, file_okay=False),
              help="Directory for the build context (default: dockerfiles/<name>/).")
@click.option("--check", is_flag=True,
              help="Fail (exit 3) when a committed render in dockerfiles/ is stale.")
@click.option("--recipes-dir", type=click.Path(path_type=Path, file_okay=False),
              default=api.DEFAULT_RECIPES_DIR, show_default=True,
              help="Where to find recipes when none are given.")
@click.option("--renders-dir", type=click.Path(path_type=Path, file_okay=False),
              default=api.DEFAULT_RENDERS_DIR, show_default=True,
              help="Where committed renders live.")
def render(recipes: tuple[Path, ...], output: Path | None, check: bool,
           recipes_dir: Path, renders_dir: Path) -> None:
    """Render RECIPES (default: every recipe in recipes/) to Docker build contexts."""
    paths = api.recipe_paths(list(recipes), recipes_dir)
    if check:
        for committed in api.check_renders(paths, renders_dir):
            out.print(f"[green]up to date[/] {committed}/")
        return
    for written in api.render(paths, output, renders_dir):
        out.print(f"[green]rendered[/] {written}/")


@cli.command()
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the schema to a file instead of standard output.")
def schema(output: Path | None) -> None:
    """Print the JSON Schema of recipes (for editors)."""
    from imagekit.recipe import json_schema

    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        out.print(f"[green]wrote[/] {output}")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args or os.environ.get("IMAGEKIT_DEBUG") == "1"
    try:
        cli.main(args=args, prog_name="imagekit", standalone_mode=False)
    except ImagekitError as exc:
        if debug:
            raise
        for line in exc.message.splitlines():
            err.print(f"[bold red]ERROR[/] {escape(line)}")
        if exc.hint:
            err.print(f"[dim]TIP[/] {escape(exc.hint)}")
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err.print("[bold red]ERROR[/] interrupted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("[bold red]ERROR[/] interrupted")
        sys.exit(130)
