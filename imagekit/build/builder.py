"""`imagekit build`: recipe -> plan -> context (in a temp dir) -> engine build -> tags.

Tags are applied only after the engine reports success, so a failed or interrupted build
never creates or moves a tag. Build-only inputs (CA bundle, wheelhouse, pip.conf) exist
only in builder stages; see templates/Dockerfile.j2.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from imagekit import grammar, workdirs
from imagekit.build.aptauth import build_through_mirror, parse_mirror
from imagekit.build.aptauth import display as display_url  # credentials masked
from imagekit.build.base import base_content_digest, ensure_base
from imagekit.build.lockfile import LockState, locked_plan
from imagekit.build.normalize import Normalized, normalize_image
from imagekit.build.plan import Plan
from imagekit.build.render import ContextOptions, render_context, write_context
from imagekit.credentials import find as find_credentials
from imagekit.credentials import secret_name
from imagekit.datafiles import UserYamlError, read_user_text
from imagekit.engine.client import Engine, Message, Reporter
from imagekit.errors import BuildError, LockError, UsageError
from imagekit.platforms import DEFAULT_PLATFORM
from imagekit.recipe.loader import load_recipe


@dataclass(frozen=True)
class BuildInputs:
    """Where packages and keys come from during a build, or during a lock's resolution.
    None of it reaches the final image (templates/Dockerfile.j2 keeps it in builder stages)."""

    ca_bundle: Path | None = None
    wheelhouse: Path | None = None
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    apt_mirror: str | None = None
    final_apt_sources: str = "mirror"  # or "public": the image's sources name the archive
    ssh_keys: Path | None = None  # baked keys from this directory instead of ssh-keygen
    memory: int | None = None  # bytes each RUN step may use; None: the engine's default share
    platform: str | None = None  # A1: one of the recipe's platforms; None: its first


@dataclass(frozen=True)
class BuildOptions:
    """What a build does with its inputs: tags, cache, reproducibility."""

    inputs: BuildInputs = BuildInputs()
    tags: tuple[str, ...] = ()
    no_cache: bool = False
    pull: bool = False
    build_args: dict[str, str] = field(default_factory=dict)
    source_date_epoch: int | None = None
    locked: bool = False  # fail unless the recipe's lock exists and is fresh
    normalize: bool = True  # with source_date_epoch: rewrite times out of layers and config


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    tags: tuple[str, ...]
    size: int
    seconds: float
    plan: Plan
    normalized: Normalized | None = None


def check_inputs(inputs: BuildInputs) -> None:
    """Reject bad build inputs before anything is built (one line, naming the flag)."""
    if inputs.ca_bundle is not None:
        ca = inputs.ca_bundle
        if not ca.is_file():
            raise UsageError(f"--ca-bundle {ca}: no such file")
        head = ca.read_bytes()[: 1 << 20]
        if b"-----BEGIN CERTIFICATE-----" not in head:
            raise UsageError(f"--ca-bundle {ca}: not a PEM certificate bundle")
    if inputs.apt_mirror:
        parse_mirror(inputs.apt_mirror)
    indexes = [("--index-url", inputs.index_url)] if inputs.index_url else []
    indexes += [("--extra-index-url", url) for url in inputs.extra_index_urls]
    for flag, url in indexes:
        try:
            grammar.check_http_url(url)
        except ValueError:
            # pip runs inside the build: a path or file:// URL of this machine is not there.
            # A newline would add a key to pip.conf.
            raise UsageError(
                f"{flag} {grammar.shown(display_url(url))}: not an http(s) URL (local wheels: --wheelhouse)"
            ) from None
    if inputs.wheelhouse is not None:
        wh = inputs.wheelhouse
        if not wh.is_dir():
            raise UsageError(f"--wheelhouse {wh}: no such directory")
        if not any(wh.glob("*.whl")):
            raise UsageError(f"--wheelhouse {wh}: contains no .whl files")
    if inputs.ssh_keys is not None and not inputs.ssh_keys.is_dir():
        raise UsageError(f"--ssh-keys {inputs.ssh_keys}: no such directory")


# Build arguments the Dockerfile gives meaning to: each has its own checked flag, and a
# `--build-arg` would reach the build around that check.
OWN_BUILD_ARGS = {
    "APT_MIRROR": "--apt-mirror",
    "APT_AUTH_URL": "--apt-mirror (its credentials)",
    "APT_CA_URL": "--ca-bundle",
    "SOURCE_DATE_EPOCH": "--source-date-epoch",
}


def check_options(options: BuildOptions) -> None:
    check_inputs(options.inputs)
    for key, value in options.build_args.items():
        if key in OWN_BUILD_ARGS:
            raise UsageError(f"--build-arg {key}: imagekit sets it; use {OWN_BUILD_ARGS[key]}")
        try:
            grammar.check_env_name(key)
            grammar.check_text(value)
        except ValueError as exc:
            raise UsageError(f"--build-arg {grammar.shown(key)}: {exc}") from None
        # The legacy builder writes every build argument a RUN sees into the image history.
        if secret_name(key) or find_credentials(value):
            raise UsageError(
                f"--build-arg {key}: looks like a secret, and build arguments are recorded in "
                "the image history; use --apt-mirror/--index-url credentials or mount it at "
                "run time"
            )
    for tag in options.tags:
        check_tag_flag(tag)


def check_tag_flag(tag: str) -> None:
    """`--tag`: an image reference to tag with, by the one grammar (grammar.IMAGE_REF)."""
    try:
        grammar.check_tag_ref(tag)
    except ValueError:
        raise UsageError(
            f"--tag {grammar.quoted(tag)}: not a valid image reference ([host/]name[:tag])"
        ) from None


def context_options(inputs: BuildInputs, plan: Plan | None = None) -> ContextOptions:
    return ContextOptions(
        index_url=inputs.index_url,
        extra_index_urls=inputs.extra_index_urls,
        wheelhouse=inputs.wheelhouse,
        ca_bundle=inputs.ca_bundle,
        ssh_keys=read_ssh_keys(inputs.ssh_keys, plan) if plan and inputs.ssh_keys else None,
        public_apt_sources=bool(inputs.apt_mirror) and inputs.final_apt_sources == "public",
    )


HOST_KEY_TYPES = ("rsa", "ecdsa", "ed25519")
USER_KEY_FILES = ("id_rsa", "id_rsa.pub")


# What an OpenSSH key file holds, whole: one public key line, or one PEM-armoured private key.
PUBLIC_KEY = re.compile(r"(?:ssh|ecdsa|sk)-[a-z0-9@.-]+ [A-Za-z0-9+/]+={0,3}(?: [ -~]*)?\n?")
PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:OPENSSH|RSA|EC|DSA) PRIVATE KEY-----\n[A-Za-z0-9+/=:,\n -]+"
    r"-----END (?:OPENSSH|RSA|EC|DSA) PRIVATE KEY-----\n?"
)
MAX_KEY_BYTES = 64 * 1024


def read_ssh_keys(directory: Path, plan: Plan) -> dict[str, str]:
    """`--ssh-keys DIR`: host/ssh_host_<type>_key[.pub] when the recipe bakes host keys,
    user/id_rsa[.pub] when it bakes the root key pair. Laid out for the build context."""
    wanted = []
    if plan.host_keys == "build":
        for kind in HOST_KEY_TYPES:
            wanted += [f"host/ssh_host_{kind}_key", f"host/ssh_host_{kind}_key.pub"]
    if plan.user_keys == "image":
        wanted += [f"user/{name}" for name in USER_KEY_FILES]
    if not wanted:
        raise UsageError(
            f"--ssh-keys {directory}: recipe {plan.name} bakes no keys "
            "(ssh.host_keys is not build and ssh.user_keys is not image)"
        )
    keys = {}
    inside = directory.resolve()
    for rel in wanted:
        path = directory / rel
        if not path.exists():
            raise UsageError(f"--ssh-keys {directory}: missing {rel}")
        # A link out of DIR (to /etc/shadow, say) would be copied into the image as a key.
        if not path.resolve().is_relative_to(inside):
            raise UsageError(f"--ssh-keys {directory}: {rel} leads out of the directory")
        try:
            text = read_user_text(path, max_bytes=MAX_KEY_BYTES)
        except UserYamlError as exc:
            raise UsageError(f"--ssh-keys {directory}: {rel}: {exc}") from None
        pattern = PUBLIC_KEY if rel.endswith(".pub") else PRIVATE_KEY
        if not pattern.fullmatch(text):
            raise UsageError(f"--ssh-keys {directory}: {rel} is not an OpenSSH key file")
        keys[rel] = text
    if "user/id_rsa.pub" in keys:
        keys["user/authorized_keys"] = keys["user/id_rsa.pub"]
    return keys


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
    plan, _ = locked_plan(load_recipe(recipe_path), options.locked, options.inputs.platform)
    return plan, render_context(plan, context_options(options.inputs, plan)).dockerfile


def build(recipe_path: Path, options: BuildOptions, report: Reporter) -> BuildResult:
    check_options(options)
    plan, lock = locked_plan(load_recipe(recipe_path), options.locked, options.inputs.platform)
    report(Message(_lock_line(lock)))
    if options.source_date_epoch is not None and options.normalize:
        for warning in reproducibility_gaps(plan, options):
            report(Message(f"warning: not reproducible: {warning}"))
    engine = Engine.connect()
    started = time.monotonic()
    if plan.bootstrap is not None:
        ensure_base(plan.bootstrap, engine, report)
    if plan.platform != DEFAULT_PLATFORM:
        # The engine runs every RUN step in the base: a missing qemu handler is one line
        # here (exit 6), not an exec format error at the first step.
        engine.run_once(plan.base_image, ["/bin/true"], user="0")
    if plan.locked:
        _check_base(plan, lock, engine, options, report)
    build_args = dict(options.build_args)
    if (
        options.source_date_epoch is not None
        and options.normalize
        and (plan.prebuild_ops or plan.ds_build_env)
    ):
        build_args["SOURCE_DATE_EPOCH"] = str(options.source_date_epoch)
    workdir = workdirs.make("build")
    try:
        context_dir = write_context(
            render_context(plan, context_options(options.inputs, plan)), workdir / "context"
        )
        try:
            outcome = build_through_mirror(
                engine,
                context_dir,
                report,
                options.inputs.apt_mirror,
                options.inputs.ca_bundle,
                build_args,
                no_cache=options.no_cache,
                pull=options.pull and plan.bootstrap is None,
                memory=options.inputs.memory,
                labels=build_labels(plan, recipe_path, options.source_date_epoch),
            )
        except BuildError as exc:
            raise _vanished_pins(exc, lock, recipe_path) or exc from None
    finally:
        workdirs.remove(workdir)
    image_id = outcome.image_id
    normalized = None
    if options.source_date_epoch is not None and options.normalize:
        normalized = normalize_image(engine, image_id, options.source_date_epoch, report)
        image_id = normalized.image_id
    tags = plan.tags + tuple(options.tags)
    for tag in tags:
        engine.tag(image_id, tag)
        report(Message(f"tagged {tag}"))
    info = engine.inspect_image(image_id)
    return BuildResult(
        image_id=info["Id"],
        tags=tags,
        size=int(info.get("Size", 0)),
        seconds=time.monotonic() - started,
        plan=plan,
        normalized=normalized,
    )


def reproducibility_gaps(plan: Plan, options: BuildOptions) -> list[str]:
    """Why two builds of this plan with these options would still differ (the reproducible-builds page lists
    what normalization covers; these are the inputs it cannot fix)."""
    gaps = []
    if not plan.locked:
        gaps.append("no fresh lock: apt and pip versions float (`imagekit lock`)")
    if options.inputs.ssh_keys is None and (plan.host_keys == "build" or plan.user_keys == "image"):
        gaps.append("ssh keys are generated during the build (pass --ssh-keys DIR)")
    return gaps


def _lock_line(lock: LockState) -> str:
    if lock.usable:
        apt, pip = lock.lock.counts
        return f"lock {lock.path}: {apt} apt and {pip} pip packages pinned"
    if lock.stale:
        return (
            f"warning: {lock.path} is stale (the recipe changed what it installs); "
            "building unpinned; run `imagekit lock` to refresh it"
        )
    return f"no lock file ({lock.path}): apt and pip versions float; `imagekit lock` pins them"


def _check_base(
    plan: Plan, lock: LockState, engine: Engine, options: BuildOptions, report: Reporter
) -> None:
    """The base must be what the lock saw: a re-bootstrap from a mirror that moved on, or a
    tag that moved, would change every layer."""
    have, want = base_content_digest(plan, engine), lock.lock.base.content_digest
    if have == want:
        return
    message = (
        f"{lock.path}: base {plan.base_image} is {have[:19]}, the lock has {want[:19]} "
        "(the mirror or the tag moved on since the lock was written)"
    )
    if options.locked:
        raise LockError(message + "; run `imagekit lock --upgrade`")
    report(Message("warning: " + message))


def _vanished_pins(exc: BuildError, lock: LockState, recipe_path: Path) -> LockError | None:
    """apt's marker line (templates/apt-install.sh) in a failed step's output -> one line
    naming the packages; None for any other failure."""
    match = re.search(r"imagekit-apt-missing: (.+)", f"{exc.message}\n{exc.hint or ''}")
    if match is None:
        return None
    pins = match[1].split()
    return LockError(
        f"{lock.path}: apt package{'s' if len(pins) > 1 else ''} {', '.join(pins)} pinned by "
        "the lock no longer available from the apt sources; run "
        f"`imagekit lock --upgrade {recipe_path}`, or point --apt-mirror at a snapshot "
        "that still has them"
    )
