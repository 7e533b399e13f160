"""Commands on built images: publish, diff, sbom, and clean (what killed runs left)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import click

from imagekit.cli import display
from imagekit.cli.base import (
    FileOut,
    cli,
    echo_lines,
    err,
    out,
)
from imagekit.cli.console import escape
from imagekit.errors import (
    UsageError,
)
from imagekit.platforms import PLATFORMS

# -- publish and inventory -----------------------------------------------------------------------


@cli.command()
@click.argument("targets", metavar="TARGET...", nargs=-1, required=True)
@click.option("--registry", required=True, help="HOST[:PORT][/NAMESPACE] to push to.")
@click.option(
    "--tag", "tags", multiple=True, help="Version tag (repeatable; default: the image's own)."
)
@click.option(
    "--moving-tag",
    "moving",
    multiple=True,
    help="Moving tag such as latest, updated after the version tags (repeatable).",
)
@click.option(
    "--require-check/--no-require-check",
    default=None,
    help="Refuse without a passing check report (default: on when CI=true).",
)
@click.option(
    "--check-report",
    "check_reports",
    type=FileOut,
    multiple=True,
    help="JSON report of `imagekit check IMAGE --report` (one per image; repeatable).",
)
@click.option("--force", is_flag=True, help="Overwrite a version tag that points at another image.")
@click.option("--record", type=FileOut, help="Write a JSON record of what was pushed.")
@click.option(
    "--retries", default=3, show_default=True, help="Attempts on transient registry errors."
)
@click.option(
    "--platform",
    "platforms",
    type=click.Choice(PLATFORMS),
    multiple=True,
    help="With a RECIPE: its image for this platform (repeatable: several make one index).",
)
def publish(targets, moving, require_check, platforms, **kw):
    """Push TARGET (a recipe's image, or any image) to a registry, checked and immutable.

    Several TARGETs, one per platform, are pushed as one multi-platform image index."""
    from imagekit.build.targets import publish_targets
    from imagekit.cli.progress import PlainReporter
    from imagekit.image.publish import PublishOptions
    from imagekit.image.publish import publish as run_publish

    images, recipe_moving = publish_targets(targets, platforms)
    if require_check is None:
        require_check = os.environ.get("CI") == "true"
    options = PublishOptions(moving_tags=moving or recipe_moving, require_check=require_check, **kw)
    result = run_publish(images, options, PlainReporter(err.real))
    out.print(f"[green]published[/] {escape(result.repository)}@{result.digest}")
    echo_lines([f"  {p.platform}: {escape(p.tag)} {p.digest}" for p in result.platforms])
    echo_lines([f"  {escape(ref)}" for ref in result.references[1:]])
    if options.record is not None:
        out.print(f"record written to {escape(str(options.record))}")


@cli.command("diff")
@click.argument("image_a")
@click.argument("image_b")
@click.option("--no-files", is_flag=True, help="Skip the file level (faster: no layer is read).")
@click.option(
    "--strict",
    is_flag=True,
    help="Also show what normalisation would change: file and history times, layer digests.",
)
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write both versions of each differing file (a/, b/: for diffoscope) and summary.json.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def diff_cmd(image_a, image_b, no_files, strict, report_dir, fmt):
    """What differs between two images: config, packages, layers and files (type, mode,
    owner, link target, xattrs, content). Exit 0 when identical, 1 when they differ."""
    from imagekit.build.targets import resolve_target
    from imagekit.image.inventory import diff_images

    if no_files and report_dir is not None:
        raise UsageError("--report-dir needs the file level: drop --no-files")
    if report_dir is not None:
        from imagekit.files import check_writable

        check_writable(report_dir)
    a, b = resolve_target(image_a)[0], resolve_target(image_b)[0]
    with err.status(f"reading {escape(image_a)} and {escape(image_b)}"):
        result = diff_images(a, b, not no_files, strict, report_dir)
    if fmt == "json":
        sections = {k: [asdict(c) for c in v] for k, v in result.sections().items()}
        click.echo(json.dumps(sections, indent=2))
    else:
        echo_lines(display.diff_lines(result))
    if report_dir is not None:
        err.print(f"[green]wrote[/] {escape(str(report_dir))}/ (a/, b/, summary.json)")
    if not result.same:
        sys.exit(1)  # like diff(1): CI can gate on it


@cli.command()
@click.argument("image")
@click.option(
    "-o", "--output", type=FileOut, help="Write the SBOM here instead of standard output."
)
def sbom(image, output):
    """A CycloneDX SBOM (dpkg and pip packages with versions) of IMAGE or a RECIPE's image."""
    from imagekit.build.targets import resolve_target
    from imagekit.files import write_json_atomic
    from imagekit.image.inventory import sbom_of

    body = sbom_of(*resolve_target(image))
    if output is None:
        click.echo(json.dumps(body, indent=2))
    else:
        write_json_atomic(output, body)
        out.print(f"[green]wrote[/] {escape(str(output))} ({len(body['components'])} components)")


@cli.command()
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option(
    "--caches",
    is_flag=True,
    help="Also empty imagekit's caches (layer scans, probe answers, recorded renders, "
    "compiled templates); each refills on demand.",
)
def clean(dry_run: bool, caches: bool) -> None:
    """Remove containers, networks and scratch directories that earlier imagekit runs left
    (killed, crashed, or the engine went away). Only what carries imagekit's run labels, and
    scratch directories of runs whose process is gone, are touched."""
    from imagekit.run.clean import clean as run_clean
    from imagekit.run.clean import clean_caches

    verb = "would remove" if dry_run else "removed"
    if caches:  # first: they need no engine
        emptied = clean_caches(dry_run)
        echo_lines([display.cache_line(verb, c) for c in emptied] or ["no caches"])
    found = run_clean(dry_run)
    echo_lines([f"{verb} {x.kind} {escape(x.name)} ({escape(x.run)})" for x in found])
    out.print(f"{len(found)} left over from earlier runs" if found else "nothing left over")
