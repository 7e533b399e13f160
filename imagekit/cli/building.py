"""Commands that build: build (recipe -> image) and lock (recipe -> lock file)."""

from __future__ import annotations

from pathlib import Path

import click

from imagekit.cli import display
from imagekit.cli.base import (
    FileOut,
    RecipeArg,
    build_inputs,
    cli,
    echo_lines,
    err,
    key_value,
    out,
)
from imagekit.cli.console import escape
from imagekit.grammar import MAX_EPOCH


@cli.command()
@click.argument("recipe", type=RecipeArg)
@click.option(
    "-t",
    "--tag",
    "tags",
    multiple=True,
    help="Extra tag (repeatable); the recipe's tag is always applied.",
)
@click.option("--no-cache", is_flag=True, help="Do not use the build cache.")
@click.option(
    "--pull/--no-pull",
    default=False,
    show_default=True,
    help="Pull a newer base image first (registry bases only).",
)
@click.option(
    "--build-arg",
    "build_args",
    multiple=True,
    callback=key_value,
    metavar="KEY=VALUE",
    help="Docker build argument (repeatable).",
)
@build_inputs
@click.option(
    "--source-date-epoch",
    type=click.IntRange(min=0, max=MAX_EPOCH),
    envvar="SOURCE_DATE_EPOCH",
    help="Reproducible build: clamp file times to this epoch and normalize the image config.",
)
@click.option(
    "--normalize/--no-normalize",
    default=True,
    show_default=True,
    help="With --source-date-epoch: rewrite the built image so its ID depends only on inputs.",
)
@click.option(
    "--locked",
    is_flag=True,
    help="Fail unless RECIPE's lock file (RECIPE.lock) exists and is up to date.",
)
@click.option(
    "--ssh-keys",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="IMAGEKIT_SSH_KEYS",
    help="Bake these keys (host/ssh_host_*_key, user/id_rsa) instead of generating new ones.",
)
@click.option("--plain", is_flag=True, help="Plain build log instead of a progress display.")
@click.option("--dry-run", is_flag=True, help="Render and print the plan; build nothing.")
@click.option(
    "--sbom",
    "sbom_path",
    type=FileOut,
    help="Also write a CycloneDX SBOM of the built image to this file.",
)
def build(
    recipe: Path, inputs, ssh_keys: Path | None, plain: bool, dry_run: bool, sbom_path, **kw
) -> None:
    """Build RECIPE into an image on the Docker engine (DOCKER_HOST is honoured)."""
    from dataclasses import replace

    from imagekit.build import builder
    from imagekit.cli.progress import reporter_for

    options = builder.BuildOptions(inputs=replace(inputs, ssh_keys=ssh_keys), **kw)
    if sbom_path is not None and not dry_run:
        from imagekit.files import check_writable

        check_writable(sbom_path)  # before the build, not after it
    if dry_run:
        plan, dockerfile = builder.dry_run(recipe, options)
        echo_lines(display.plan_lines(plan))
        click.echo(dockerfile, nl=False)
        return
    reporter = reporter_for(err.real, plain)
    try:
        result = builder.build(recipe, options, reporter)
    finally:
        reporter.close()
    echo_lines(display.build_lines(result))
    if sbom_path is not None:
        from imagekit.files import write_json_atomic
        from imagekit.image.inventory import sbom_of

        body = sbom_of(result.image_id, recipe)
        write_json_atomic(sbom_path, body)
        out.print(f"  sbom  {escape(str(sbom_path))} ({len(body['components'])} components)")


@cli.command()
@click.argument("recipe", type=RecipeArg)
@click.option("--upgrade", is_flag=True, help="Re-resolve everything, even when the lock is fresh.")
@build_inputs
@click.option("--plain", is_flag=True, help="Plain log instead of a progress display.")
def lock(recipe: Path, upgrade: bool, plain: bool, inputs) -> None:
    """Pin RECIPE's base, apt and pip packages (with sha256) in RECIPE.lock."""
    from imagekit.build.resolve import lock_recipe
    from imagekit.cli.progress import reporter_for

    reporter = reporter_for(err.real, plain)
    try:
        result = lock_recipe(recipe, inputs, reporter, upgrade=upgrade)
    finally:
        reporter.close()
    echo_lines(display.lock_lines(result))
