"""`imagekit build`: recipe -> plan -> context (in a temp dir) -> engine build -> tags.

Tags are applied only after the engine reports success, so a failed or interrupted build
never creates or moves a tag. Build-only inputs (CA bundle, wheelhouse, pip.conf) exist
only in builder stages; see templates/Dockerfile.j2.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from imagekit.base import ensure_base
from imagekit.engine import Engine, Message, Reporter
from imagekit.errors import UsageError
from imagekit.plan import Plan, make_plan
from imagekit.recipe import load_recipe
from imagekit.render import ContextOptions, render_context, write_context

IMAGE_REF = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::\d+)?/)?"  # optional registry host[:port]/
    r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"  # repository path
    r"(?::[\w][\w.-]{0,127})?$"  # optional :tag
)


@dataclass(frozen=True)
class BuildOptions:
    tags: tuple[str, ...] = ()
    no_cache: bool = False
    pull: bool = False
    build_args: dict[str, str] = field(default_factory=dict)
    ca_bundle: Path | None = None
    wheelhouse: Path | None = None
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    apt_mirror: str | None = None
    source_date_epoch: int | None = None


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    tags: tuple[str, ...]
    size: int
    seconds: float
    plan: Plan


def check_options(options: BuildOptions) -> None:
    """Reject bad build inputs before anything is built (one line, naming the flag)."""
    if options.ca_bundle is not None:
        ca = options.ca_bundle
        if not ca.is_file():
            raise UsageError(f"--ca-bundle {ca}: no such file")
        head = ca.read_bytes()[: 1 << 20]
        if b"-----BEGIN CERTIFICATE-----" not in head:
            raise UsageError(f"--ca-bundle {ca}: not a PEM certificate bundle")
    if options.wheelhouse is not None:
        wh = options.wheelhouse
        if not wh.is_dir():
            raise UsageError(f"--wheelhouse {wh}: no such directory")
        if not any(wh.glob("*.whl")):
            raise UsageError(f"--wheelhouse {wh}: contains no .whl files")
    for tag in options.tags:
        if not IMAGE_REF.match(tag):
            raise UsageError(f"--tag {tag!r}: not a valid image reference ([host/]name[:tag])")


def context_options(options: BuildOptions) -> ContextOptions:
    return ContextOptions(
        index_url=options.index_url,
        extra_index_urls=options.extra_index_urls,
        wheelhouse=options.wheelhouse,
        ca_bundle=options.ca_bundle,
    )


def build_labels(plan: Plan, recipe_path: Path, epoch: int | None) -> dict[str, str]:
    """Labels only known at build time; the rest are in the rendered Dockerfile."""
    created = (
        datetime.fromtimestamp(epoch, timezone.utc)
        if epoch is not None
        else datetime.now(timezone.utc)
    )
    labels = {"org.opencontainers.image.created": created.strftime("%Y-%m-%dT%H:%M:%SZ")}
    labels.update(_git_labels(recipe_path))
    return labels


def _git_labels(recipe_path: Path) -> dict[str, str]:
    def git(*args: str) -> str | None:
        try:
            result = subprocess.run(
                ["git", *args],
                cwd=recipe_path.resolve().parent,
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else None

    labels = {}
    revision = git("rev-parse", "HEAD")
    if revision:
        labels["org.opencontainers.image.revision"] = revision
    source = git("config", "--get", "remote.origin.url")
    if source:
        labels["org.opencontainers.image.source"] = source
    return labels


def dry_run(recipe_path: Path, options: BuildOptions) -> tuple[Plan, str]:
    check_options(options)
    plan = make_plan(load_recipe(recipe_path))
    return plan, render_context(plan, context_options(options)).dockerfile


def build(recipe_path: Path, options: BuildOptions, report: Reporter) -> BuildResult:
    check_options(options)
    plan = make_plan(load_recipe(recipe_path))
    engine = Engine.connect()
    started = time.monotonic()
    if plan.bootstrap is not None:
        ensure_base(plan.bootstrap, engine, report)
    build_args = dict(options.build_args)
    if options.apt_mirror:
        build_args["APT_MIRROR"] = options.apt_mirror
    workdir = Path(tempfile.mkdtemp(prefix=f"imagekit-{plan.name}-"))
    try:
        context_dir = write_context(
            render_context(plan, context_options(options)), workdir / "context"
        )
        outcome = engine.build(
            context_dir,
            report=report,
            no_cache=options.no_cache,
            pull=options.pull and plan.bootstrap is None,
            build_args=build_args,
            labels=build_labels(plan, recipe_path, options.source_date_epoch),
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    tags = plan.tags + tuple(options.tags)
    for tag in tags:
        engine.tag(outcome.image_id, tag)
        report(Message(f"tagged {tag}"))
    info = engine.inspect_image(outcome.image_id)
    return BuildResult(
        image_id=info["Id"],
        tags=tags,
        size=int(info.get("Size", 0)),
        seconds=time.monotonic() - started,
        plan=plan,
    )
