"""The command line: parse, call one function, print. The only module that prints.

Every ImagekitError is caught once, in `main`, and becomes one red line per problem plus
an exit code; `imagekit --debug CMD` (or IMAGEKIT_DEBUG=1) shows the traceback instead.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

import click
from click.core import ParameterSource

from imagekit import __version__, operators, signals
from imagekit.cli import display
from imagekit.cli.console import LazyConsole, escape
from imagekit.errors import (
    CheckFailedError,
    ImagekitError,
    LintFailedError,
    SmokeFailedError,
    UsageError,
)
from imagekit.grammar import MAX_EPOCH
from imagekit.paths import DEFAULT_RECIPES_DIR, DEFAULT_RENDERS_DIR

# Start-up time is part of the interface (`imagekit mpirun` runs in job scripts): each
# command imports what it needs (recipes and pydantic, templates, docker, pytest) itself.

out = LazyConsole(highlight=False, soft_wrap=True)
err = LazyConsole(stderr=True, highlight=False, soft_wrap=True)

RecipeArg = click.Path(path_type=Path, dir_okay=False)
FileOut = click.Path(path_type=Path, dir_okay=False)


def echo_lines(lines: list[str], console: LazyConsole = out) -> None:
    for line in lines:
        console.print(line)


def _gpus(ctx, param, value: str | None) -> str | None:
    if value is None or value == "all" or (value.isdigit() and int(value) > 0):
        return value
    raise click.BadParameter(f"{value!r} is not 'all' or a number of GPUs", ctx=ctx, param=param)


# Runs on hosts with the NVIDIA container runtime; without it the engine refuses the request.
GPUS_OPTION = click.option(
    "--gpus",
    callback=_gpus,
    metavar="all|N",
    help="GPUs for the containers, as docker run --gpus (hosts with the NVIDIA runtime).",
)


class Command(click.Command):
    """A bad value that came from an environment variable (IMAGEKIT_WHEELHOUSE...) is named
    as such: '--wheelhouse (from $IMAGEKIT_WHEELHOUSE) X: ...', since the user may not have
    typed any flag at all."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            flag = exc.message.split(" ", 1)[0]
            for param in self.params:
                source = ctx.get_parameter_source(param.name)
                if flag in param.opts and param.envvar and source is ParameterSource.ENVIRONMENT:
                    rest = exc.message[len(flag) :]
                    raise UsageError(f"{flag} (from ${param.envvar}){rest}") from None
            raise


class Group(click.Group):
    command_class = Command


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="imagekit")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """Build, verify and publish MPI + NCCL + DeepSpeed training images for MPIJobs."""


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
    _emit(text, output)


@cli.command()
@click.option("-o", "--output", type=FileOut, help="Write the table to a file.")
def requirements(output: Path | None) -> None:
    """Print every check as a Markdown table: ID, requirement, what it proves, how profiles
    change it, and its fix (read from the check suite and imagekit's requirement units)."""
    from imagekit.checks.catalog import catalog, markdown_table

    _emit(markdown_table(catalog()), output)


# -- build --------------------------------------------------------------------------------------


def _key_value(ctx, param, values: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", ctx=ctx, param=param)
        pairs[key] = value
    return pairs


def build_inputs(command):
    """Where packages come from during a build or a lock's resolution; never in the image.
    The options arrive in the command as one `inputs` argument (a build.BuildInputs)."""

    @functools.wraps(command)
    def with_inputs(**kw):
        from imagekit.build.builder import BuildInputs

        fields = {name: kw.pop(name) for name in _BUILD_INPUT_NAMES if name in kw}
        return command(inputs=BuildInputs(**fields), **kw)

    for option in reversed(_BUILD_INPUT_OPTIONS):
        with_inputs = option(with_inputs)
    return with_inputs


_BUILD_INPUT_NAMES = (
    "ca_bundle",
    "wheelhouse",
    "index_url",
    "extra_index_urls",
    "apt_mirror",
    "final_apt_sources",
    "memory",
)

# Below this a RUN step cannot start a shell and apt (and the engine refuses under 6 MB).
MIN_BUILD_MEMORY = 64 << 20


def _memory_size(ctx, param, value: str | None) -> int | None:
    from imagekit.grammar import human_size, shown, size_in_bytes

    if value is None:
        return None
    size = size_in_bytes(value)
    if size is None or not MIN_BUILD_MEMORY <= size <= 1 << 50:
        raise click.BadParameter(
            f"{shown(value)}: not a size of at least {human_size(MIN_BUILD_MEMORY)} "
            "(e.g. 16g, 512m)",
            ctx=ctx,
            param=param,
        )
    return size


_BUILD_INPUT_OPTIONS = [
    click.option(
        "--ca-bundle",
        type=FileOut,
        envvar="IMAGEKIT_CA_BUNDLE",
        help="PEM CA bundle trusted by pip and curl during the build only; never in the image.",
    ),
    click.option(
        "--wheelhouse",
        type=click.Path(path_type=Path, file_okay=False),
        envvar="IMAGEKIT_WHEELHOUSE",
        help="Directory of wheels pip may install from (stands in for the torch index).",
    ),
    click.option("--index-url", envvar="IMAGEKIT_INDEX_URL", help="pip index (a PyPI mirror)."),
    click.option(
        "--extra-index-url", "extra_index_urls", multiple=True, help="Extra pip index (repeatable)."
    ),
    click.option(
        "--apt-mirror",
        envvar="IMAGEKIT_APT_MIRROR",
        help="Debian/Ubuntu mirror URL replacing deb.debian.org / archive.ubuntu.com. "
        "Credentials in it (http://user:TOKEN@host/...) reach apt during the build only.",
    ),
    click.option(
        "--final-apt-sources",
        type=click.Choice(["mirror", "public"]),
        default="mirror",
        show_default=True,
        help="With --apt-mirror: the image's apt sources name the mirror (never its "
        "credentials) or go back to the public archive.",
    ),
    click.option(
        "--memory",
        envvar="IMAGEKIT_BUILD_MEMORY",
        callback=_memory_size,
        metavar="SIZE",
        help="Memory each build step may use (e.g. 16g); a step over it is stopped and named. "
        "Default: 3/4 of the engine host's memory.",
    ),
]


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
    callback=_key_value,
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


# -- check and smoke ------------------------------------------------------------------------------


@cli.command("check")
@click.argument("image")
@click.option(
    "--profile",
    default="seed",
    show_default=True,
    help="Built-in profile (seed, kubeflow-mpi-operator-v2, kubeflow-mpi-operator-v2-nonroot, "
    "kubeflow-trainer-v2) or a profile .yaml file.",
)
@click.option("--recipe", type=RecipeArg, help="Take expected versions from this recipe.")
@click.option(
    "--port", type=click.IntRange(1, 65535), help="Expected sshd port (overrides the profile)."
)
@click.option(
    "--report",
    "report_paths",
    type=FileOut,
    multiple=True,
    help="Also write the report to this file (repeatable; format from .json/.xml/.md).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "junit", "markdown"]),
    help="Format of every --report (default: from each file's suffix).",
)
@GPUS_OPTION
def check_cmd(image, profile, recipe, port, report_paths, fmt, gpus) -> None:
    """Check IMAGE (any image, built by imagekit or not; or a RECIPE's image) against a profile."""
    from imagekit.build.targets import resolve_target
    from imagekit.checks.report import report_format
    from imagekit.profiles import load_profile

    chosen = load_profile(profile)
    reports = [(path, report_format(path, fmt)) for path in report_paths]  # before any work
    image, target_recipe = resolve_target(image)
    _check_and_report(image, chosen, reports, recipe=recipe or target_recipe, port=port, gpus=gpus)


def _check_and_report(image, chosen, reports, recipe=None, port=None, gpus=None) -> None:
    from imagekit.checks.report import write_report
    from imagekit.checks.runner import run_checks

    result = run_checks(image, chosen, lambda event: None, recipe=recipe, port=port, gpus=gpus)
    table, summary = display.check_table(result)
    out.print(table)
    out.print(summary)
    for path, kind in reports:  # one check run, every report from it
        write_report(result, path, kind)
        out.print(f"report written to {escape(str(path))} ({kind})")
    if not result.passed:
        failed = ", ".join(sorted(result.failed_requirements()))
        raise CheckFailedError(f"{image}: failed {failed} under profile {chosen.name}")


@cli.command()
@click.argument("image")
@click.option(
    "--profile",
    default="seed",
    show_default=True,
    help="Built-in profile (seed, kubeflow-mpi-operator-v2, kubeflow-mpi-operator-v2-nonroot, "
    "kubeflow-trainer-v2) or a profile .yaml file.",
)
@click.option("-t", "--tag", help="Tag for the adapted image (default: IMAGE's tag + -PROFILE).")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, file_okay=False),
    help="Also write the build context (Dockerfile and files) to this directory.",
)
@click.option("--port", type=click.IntRange(1, 65535), help="sshd port (overrides the profile's).")
@click.option(
    "--install-mpi", is_flag=True, help="Install the distro's openmpi-bin when IMAGE has no mpirun."
)
@click.option(
    "--apt-mirror",
    envvar="IMAGEKIT_APT_MIRROR",
    help="Mirror URL apt installs the missing packages from (the image keeps its own "
    "sources). Credentials in it reach apt during the build only.",
)
@click.option(
    "--ca-bundle",
    type=FileOut,
    envvar="IMAGEKIT_CA_BUNDLE",
    help="PEM CA bundle apt trusts for an https --apt-mirror, during the build only.",
)
@click.option("--plain", is_flag=True, help="Plain build log instead of a progress display.")
@click.option(
    "--report",
    "report_paths",
    type=FileOut,
    multiple=True,
    help="Also write the check report to this file (.json/.xml/.md; repeatable).",
)
def adapt(
    image, profile, tag, output, port, install_mpi, apt_mirror, ca_bundle, plain, report_paths
) -> None:
    """Make an existing Debian/Ubuntu IMAGE MPIJob-ready for a profile: one thin layer adding
    only what it lacks (ssh server and client settings, /run/sshd, host keys, the session
    environment, Open MPI's and PRRTE's launch defaults, a non-root profile's user), then
    `imagekit check` of the result."""
    from imagekit.checks.report import report_format
    from imagekit.cli.progress import reporter_for
    from imagekit.profiles import load_profile
    from imagekit.run.adapt import adapt as run_adapt

    chosen = load_profile(profile)
    reports = [(path, report_format(path, None)) for path in report_paths]
    reporter = reporter_for(err.real, plain)
    try:
        result = run_adapt(
            image,
            chosen,
            reporter,
            tag=tag,
            output=output,
            port=port,
            install_mpi=install_mpi,
            apt_mirror=apt_mirror,
            ca_bundle=ca_bundle,
        )
    finally:
        reporter.close()
    echo_lines(display.adapt_lines(result))
    if result.tag is not None:
        _check_and_report(result.tag, chosen, reports, port=result.plan.port)


def _command_words(ctx, param, words: tuple[str, ...]) -> tuple[str, ...]:
    """COMMAND keeps its own flags (`python train.py --lr 3`), but no program starts with
    '-': a first word that does is a mistyped option of ours, not something to run."""
    if words and words[0].startswith("-"):
        options = [o for p in ctx.command.params for o in p.opts if o.startswith("-")]
        raise click.NoSuchOption(words[0], possibilities=options, ctx=ctx)
    return words


def _env_spec(ctx, param, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise click.BadParameter(f"{item!r} is not VAR=VALUE", ctx=ctx, param=param)
        pairs.append((name, value))
    return tuple(pairs)


def _copy_spec(ctx, param, values: tuple[str, ...]) -> tuple[tuple[Path, str], ...]:
    pairs = []
    for item in values:
        source, sep, target = item.partition(":")
        if not sep or not source or not target.startswith("/"):
            raise click.BadParameter(f"{item!r} is not SRC:/absolute/dest", ctx=ctx, param=param)
        pairs.append((Path(source), target))
    return tuple(pairs)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("image")
@click.option("--workers", default=2, show_default=True, help="Worker containers (pods).")
@click.option("--slots", default=2, show_default=True, help="Slots (ranks) per worker.")
@click.option(
    "--keys",
    type=click.Choice(["mounted", "image"]),
    default="mounted",
    show_default=True,
    help="mounted: a fresh key pair mounted at /root/.ssh like a Secret; image: the image's.",
)
@click.option(
    "--port", type=click.IntRange(1, 65535), help="ssh port, when the image's ssh_config lacks it."
)
@click.option(
    "--timeout",
    default=600,
    show_default=True,
    type=click.IntRange(min=1),
    help="Seconds the command may run.",
)
@click.option("--shm-size", default="1g", show_default=True, help="/dev/shm per container.")
@click.option(
    "--copy",
    "copies",
    multiple=True,
    callback=_copy_spec,
    metavar="SRC:DEST",
    help="Copy a file or directory into every container (repeatable).",
)
@click.option("--workdir", help="Directory the command runs in (inside the launcher).")
@click.option(
    "--operator",
    type=click.Choice(operators.NAMES),
    default=operators.DEFAULT,
    show_default=True,
    help="Whose layout to imitate: host names, hostfile, launcher environment, Secret keys.",
)
@click.option(
    "--profile",
    help="Run as this profile's operator does: its user, key mount, sshd config and port "
    "(e.g. kubeflow-mpi-operator-v2-nonroot: mpiuser, /home/mpiuser/.ssh, 2222).",
)
@click.option(
    "--env",
    multiple=True,
    callback=_env_spec,
    metavar="VAR=VALUE",
    help="Set VAR in every container and pass it to the ranks with mpirun -x (repeatable; "
    "e.g. DS_ACCELERATOR=cpu for a GPU image on a host without GPUs).",
)
@GPUS_OPTION
@click.argument("command", nargs=-1, type=click.UNPROCESSED, callback=_command_words)
def smoke(image: str, profile: str | None, **kw) -> None:
    """Run an MPIJob the way the operator does: launcher + workers over real ssh and mpirun.

    COMMAND (after --) runs in the launcher; the default is the platform's recommended mpirun
    line running a probe that reports every rank's host, rank and world size."""
    from imagekit.build.targets import resolve_target
    from imagekit.cli.progress import PlainReporter
    from imagekit.run.smoke import SmokeOptions
    from imagekit.run.smoke import smoke as run_smoke

    if profile is not None:
        from imagekit.profiles import load_profile

        chosen = load_profile(profile)
        default_config = chosen.sshd_config == "/etc/ssh/sshd_config"
        source = click.get_current_context().get_parameter_source("operator")
        if source is ParameterSource.DEFAULT:  # the operator whose Secret layout it is (K2)
            kw["operator"] = operators.by_secret_files(chosen.secret_files).name
        kw.update(
            user=chosen.user,
            key_dir=chosen.key_dir,
            sshd_config=None if default_config else chosen.sshd_config,
            port=kw["port"] or chosen.port,
        )
    result = run_smoke(resolve_target(image)[0], SmokeOptions(**kw), PlainReporter(err.real))
    table, lines = display.smoke_table(result)
    if table is not None:
        out.print(table)
    echo_lines(lines)
    if not result.passed:
        raise SmokeFailedError(f"{image}: the MPIJob failed: {result.problems[0]}")


# -- launch tooling ------------------------------------------------------------------------------


@cli.command("mpirun", context_settings={"ignore_unknown_options": True})
@click.option("--workers", type=int, required=True, help="Worker pods.")
@click.option("--slots", type=int, required=True, help="Ranks (GPUs) per worker.")
@click.option(
    "--profile", default="seed", show_default=True, help="Platform profile (its ssh port)."
)
@click.option(
    "--gpu/--cpu", default=None, help="Add NCCL variables (default: from --recipe, else CPU)."
)
@click.option("--debug", is_flag=True, help="The debugging set (L9) instead of production.")
@click.option("--env", multiple=True, metavar="VAR[=VALUE]", help="Extra -x variable (repeatable).")
@click.option("--recipe", type=RecipeArg, help="Leave out MCA parameters the image already sets.")
@click.option(
    "--openmpi",
    "openmpi_major",
    type=click.Choice(["4", "5"]),
    help="The image's Open MPI major (default: from --recipe, else 4); 5 uses PRRTE's names.",
)
@click.option(
    "--timeout",
    default=3600,
    show_default=True,
    type=click.IntRange(min=1),
    help="mpirun -timeout seconds (L10).",
)
@click.option("--workdir", help="-wdir for every rank (L11).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["shell", "json", "yaml"]),
    default="shell",
    show_default=True,
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, callback=_command_words)
def mpirun_cmd(profile, recipe, fmt, env, **kw):
    """Print the recommended mpirun line for WORKERS x SLOTS ranks running COMMAND."""
    from imagekit.run.launch import mpirun_line

    line = mpirun_line({**kw, "env": tuple(env)}, recipe, profile)
    echo_lines([f"[dim]# {escape(note)}[/]" for note in line.notes], err)
    if fmt == "json":
        click.echo(json.dumps(line.argv))
    elif fmt == "yaml":
        import yaml

        click.echo(yaml.safe_dump(line.argv, default_flow_style=False), nl=False)
    else:
        click.echo(shlex.join(line.argv))


@cli.command("lint-cmd")
@click.argument("command", required=False)
@click.option(
    "--file", "source", type=click.File("r"), help="Read the command from a file ('-': stdin)."
)
@click.option("--workers", type=int, help="Workers, to check -np (L1).")
@click.option("--slots", type=int, help="Slots per worker, to check -np (L1).")
@click.option("--debugging", is_flag=True, help="A debugging run: allow -v, --oversubscribe, ...")
@click.option(
    "--root-env",
    type=click.Choice(["yes", "no", "unknown"]),
    default="unknown",
    show_default=True,
    help="Does the image set OMPI_ALLOW_RUN_AS_ROOT=1 (R8/L14)?",
)
@click.option(
    "--openmpi",
    "openmpi_major",
    type=click.Choice(["4", "5"]),
    help="The image's Open MPI major: 5 flags what PRRTE ignores or refuses (K3).",
)
@click.option("--recipe", type=RecipeArg, help="Take the Open MPI major from this recipe.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def lint_cmd(command, source, workers, slots, debugging, root_env, openmpi_major, recipe, fmt):
    """Check an mpirun COMMAND line against the platform's launch rules (L1-L14, K3)."""
    from imagekit.run.launch import openmpi_major_of
    from imagekit.run.lint import LintContext, lint

    if (command is None) == (source is None):
        raise UsageError("give the command as an argument or with --file (not both)")
    text = sys.stdin.read() if command == "-" else command if command is not None else source.read()
    major = openmpi_major_of(openmpi_major, recipe)
    findings = lint(text, LintContext(workers, slots, not debugging, root_env, major))
    errors = sorted({f.lid for f in findings if f.severity == "error"})
    if fmt == "json":
        click.echo(
            json.dumps({"ok": not errors, "findings": [asdict(f) for f in findings]}, indent=2)
        )
    else:
        echo_lines(display.lint_lines(findings))
    if errors:
        raise LintFailedError(f"{len(errors)} kind(s) of error: {', '.join(errors)}")


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("target")
@click.option("--name", required=True, help="MPIJob name.")
@click.option("--workers", type=int, required=True)
@click.option("--slots", type=int, required=True)
@click.option("--gpus-per-worker", type=int, default=0, show_default=True)
@click.option("--shm-size", default="1Gi", show_default=True, help="/dev/shm emptyDir size.")
@click.option(
    "--operator",
    type=click.Choice(operators.NAMES),
    default=operators.DEFAULT,
    show_default=True,
    help="mpi-operator: an MPIJob (kubeflow.org/v2beta1); trainer-v2: a TrainingRuntime and "
    "the TrainJob using it (trainer.kubeflow.org/v1alpha1).",
)
@click.option(
    "--profile",
    help="A profile's user, key mount and sshd config (kubeflow-mpi-operator-v2-nonroot: "
    "runAsUser 1000, /home/mpiuser/.ssh, sshd -De -f ~/.sshd_config).",
)
@click.option("-o", "--output", type=FileOut)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, callback=_command_words)
def mpijob(
    target, name, workers, slots, gpus_per_worker, shm_size, operator, profile, output, command
):
    """Render the manifests of an MPI training job for TARGET (a recipe or an image)."""
    import yaml

    from imagekit.profiles import load_profile
    from imagekit.run.launch import mpijob_manifest

    documents = mpijob_manifest(
        target, name, workers, slots, command, gpus_per_worker, shm_size, operator, profile
    )
    text = yaml.safe_dump_all(documents, sort_keys=False)
    group_readable = operators.OPERATORS[operator].secret_files == "group-readable"
    if group_readable and not (profile and load_profile(profile).non_root):
        err.print(
            "[yellow]WARNING[/] Trainer v2 mounts its Secret's key with mode 0640 for a non-root "
            "user (fsGroup); the ssh client of an image running as root ignores such a key (K5). "
            "Prove the pair with `imagekit smoke IMAGE --operator trainer-v2` first."
        )
    _emit(text, output)


# -- publish and inventory -----------------------------------------------------------------------


@cli.command()
@click.argument("target")
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
    "--check-report", type=FileOut, help="JSON report of `imagekit check IMAGE --report`."
)
@click.option("--force", is_flag=True, help="Overwrite a version tag that points at another image.")
@click.option("--record", type=FileOut, help="Write a JSON record of what was pushed.")
@click.option(
    "--retries", default=3, show_default=True, help="Attempts on transient registry errors."
)
def publish(target, moving, require_check, **kw):
    """Push TARGET (a recipe's image, or any image) to a registry, checked and immutable."""
    from imagekit.build.targets import publish_target
    from imagekit.cli.progress import PlainReporter
    from imagekit.image.publish import PublishOptions
    from imagekit.image.publish import publish as run_publish

    image, recipe_moving = publish_target(target)
    if require_check is None:
        require_check = os.environ.get("CI") == "true"
    options = PublishOptions(moving_tags=moving or recipe_moving, require_check=require_check, **kw)
    result = run_publish(image, options, PlainReporter(err.real))
    out.print(f"[green]published[/] {result.repository}@{result.digest}")
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


def _emit(text: str, output: Path | None) -> None:
    """Standard output, or the whole file at once (never half of it)."""
    if output is None:
        click.echo(text, nl=False)
        return
    from imagekit.files import write_text_atomic

    write_text_atomic(output, text)
    out.print(f"[green]wrote[/] {escape(str(output))}")


# -- entry point -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    # Only `imagekit --debug CMD` is the global flag (`imagekit mpirun --debug` is not).
    first_word = next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))
    debug = "--debug" in args[:first_word] or os.environ.get("IMAGEKIT_DEBUG") == "1"
    previous = signals.install()
    try:
        cli.main(args=args, prog_name="imagekit", standalone_mode=False)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: cleanup has run on the way
        stopped = signals.interruption(exc)
        err.print(f"[bold red]ERROR[/] interrupted by {stopped.name}; removed what this run made")
        sys.exit(stopped.exit_code)
    except ImagekitError as exc:
        if debug:
            raise
        for line in exc.message.splitlines():
            err.print(f"[bold red]ERROR[/] {escape(line)}")
        if exc.hint:
            echo_lines([f"[dim]  {escape(line)}[/]" for line in exc.hint.splitlines()], err)
        if exc.debug_tip:  # not for plain bad input or verdicts: the message says it all
            err.print("[dim]TIP run `imagekit --debug ...` for a traceback[/]")
        sys.exit(exc.exit_code)
    except click.exceptions.Abort as exc:  # click's own wrapping of a KeyboardInterrupt
        stopped = signals.interruption(exc.__cause__ or KeyboardInterrupt())
        err.print(f"[bold red]ERROR[/] interrupted by {stopped.name}; removed what this run made")
        sys.exit(stopped.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:  # one the modules did not expect: still one line, not a traceback
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        err.print(f"[bold red]ERROR[/] {escape(where + (exc.strerror or str(exc)))}")
        err.print("[dim]TIP run `imagekit --debug ...` for a traceback[/]")
        sys.exit(ImagekitError.exit_code)
    finally:
        signals.restore(previous)
