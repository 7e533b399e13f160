"""The command line: parse, call one function, print. The only module that prints.

Every ImagekitError is caught once, in `main`, and becomes one red line per problem plus
an exit code; `imagekit --debug CMD` (or IMAGEKIT_DEBUG=1) shows the traceback instead.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

import click
import yaml
from rich.console import Console
from rich.markup import escape

from imagekit import __version__, api, display
from imagekit.errors import CheckFailedError, ImagekitError, LintFailedError, UsageError
from imagekit.progress import PlainReporter, reporter_for

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

RecipeArg = click.Path(path_type=Path, dir_okay=False)
FileOut = click.Path(path_type=Path, dir_okay=False)


def echo_lines(lines: list[str], console: Console = out) -> None:
    for line in lines:
        console.print(line)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="imagekit")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """Build, verify and publish MPI + NCCL + DeepSpeed training images for MPIJobs."""


# -- recipes ----------------------------------------------------------------------------------


@cli.command()
@click.argument("recipes", nargs=-1, required=True, type=RecipeArg)
def validate(recipes: tuple[Path, ...]) -> None:
    """Validate RECIPES: schema, versions and compatibility rules."""
    for result in api.validate(list(recipes)):
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
    default=api.DEFAULT_RECIPES_DIR,
    show_default=True,
    help="Where to find recipes when none are given.",
)
@click.option(
    "--renders-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=api.DEFAULT_RENDERS_DIR,
    show_default=True,
    help="Where committed renders live.",
)
def render(recipes, output, check, recipes_dir, renders_dir) -> None:
    """Render RECIPES (default: every recipe in recipes/) to Docker build contexts."""
    paths = api.recipe_paths(list(recipes), recipes_dir)
    if check:
        for committed in api.check_renders(paths, renders_dir):
            out.print(f"[green]up to date[/] {escape(str(committed))}/")
        return
    for written in api.render(paths, output, renders_dir):
        out.print(f"[green]rendered[/] {escape(str(written))}/")


@cli.command()
@click.option("-o", "--output", type=FileOut, help="Write the schema to a file.")
def schema(output: Path | None) -> None:
    """Print the JSON Schema of recipes (for editors)."""
    from imagekit.recipe import json_schema

    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        out.print(f"[green]wrote[/] {escape(str(output))}")


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
    """Where packages come from during a build or a lock's resolution; never in the image."""
    for option in reversed(_BUILD_INPUT_OPTIONS):
        command = option(command)
    return command


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
        help="Debian/Ubuntu mirror URL replacing deb.debian.org / archive.ubuntu.com.",
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
    type=int,
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
def build(recipe: Path, plain: bool, dry_run: bool, sbom_path: Path | None, **kw) -> None:
    """Build RECIPE into an image on the Docker engine (DOCKER_HOST is honoured)."""
    from imagekit import build as builder

    options = builder.BuildOptions(**kw)
    if dry_run:
        plan, dockerfile = builder.dry_run(recipe, options)
        echo_lines(display.plan_lines(plan))
        click.echo(dockerfile, nl=False)
        return
    reporter = reporter_for(err, plain)
    try:
        result = builder.build(recipe, options, reporter)
    finally:
        reporter.close()
    echo_lines(display.build_lines(result))
    if sbom_path is not None:
        body = api.sbom(result.image_id)
        api.write_json(body, sbom_path)
        out.print(f"  sbom  {escape(str(sbom_path))} ({len(body['components'])} components)")


@cli.command()
@click.argument("recipe", type=RecipeArg)
@click.option("--upgrade", is_flag=True, help="Re-resolve everything, even when the lock is fresh.")
@build_inputs
@click.option("--plain", is_flag=True, help="Plain log instead of a progress display.")
def lock(recipe: Path, upgrade: bool, plain: bool, **kw) -> None:
    """Pin RECIPE's base, apt and pip packages (with sha256) in RECIPE.lock."""
    from imagekit import build as builder
    from imagekit.locking import lock_recipe

    reporter = reporter_for(err, plain)
    try:
        result = lock_recipe(recipe, builder.BuildOptions(**kw), reporter, upgrade=upgrade)
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
    help="Built-in profile (seed, kubeflow-mpi-operator-v2) or a profile .yaml file.",
)
@click.option("--recipe", type=RecipeArg, help="Take expected versions from this recipe.")
@click.option(
    "--port", type=click.IntRange(1, 65535), help="Expected sshd port (overrides the profile)."
)
@click.option("--report", "report_path", type=FileOut, help="Also write the report to this file.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "junit", "markdown"]),
    default="json",
    show_default=True,
    help="Format of --report.",
)
def check_cmd(image, profile, recipe, port, report_path, fmt) -> None:
    """Check IMAGE (any image, built by imagekit or not; or a RECIPE's image) against a profile."""
    from imagekit.checks.profiles import load_profile
    from imagekit.checks.report import write_report
    from imagekit.checks.runner import run_checks

    chosen = load_profile(profile)
    image, target_recipe = api.resolve_target(image)
    result = run_checks(
        image, chosen, lambda event: None, recipe=recipe or target_recipe, port=port
    )
    table, summary = display.check_table(result)
    out.print(table)
    out.print(summary)
    if report_path is not None:
        write_report(result, report_path, fmt)
        out.print(f"report written to {escape(str(report_path))} ({fmt})")
    if not result.passed:
        failed = ", ".join(sorted(result.failed_requirements()))
        raise CheckFailedError(f"{image}: failed {failed} under profile {chosen.name}")


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
@click.option("--timeout", default=600, show_default=True, help="Seconds the command may run.")
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
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def smoke(image: str, **kw) -> None:
    """Run an MPIJob the way the operator does: launcher + workers over real ssh and mpirun.

    COMMAND (after --) runs in the launcher; the default is the platform's recommended mpirun
    line running a probe that reports every rank's host, rank and world size."""
    from imagekit.smoke import SmokeFailedError, SmokeOptions
    from imagekit.smoke import smoke as run_smoke

    result = run_smoke(api.resolve_target(image)[0], SmokeOptions(**kw), PlainReporter(err))
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
@click.option("--timeout", default=3600, show_default=True, help="mpirun -timeout seconds (L10).")
@click.option("--workdir", help="-wdir for every rank (L11).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["shell", "json", "yaml"]),
    default="shell",
    show_default=True,
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def mpirun_cmd(profile, recipe, fmt, env, **kw):
    """Print the recommended mpirun line for WORKERS x SLOTS ranks running COMMAND."""
    line = api.mpirun_line({**kw, "env": tuple(env)}, recipe, profile)
    echo_lines([f"[dim]# {escape(note)}[/]" for note in line.notes], err)
    if fmt == "json":
        click.echo(json.dumps(line.argv))
    elif fmt == "yaml":
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
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def lint_cmd(command, source, workers, slots, debugging, root_env, fmt):
    """Check an mpirun COMMAND line against the platform's launch rules (L1-L14)."""
    from imagekit.launch import LintContext, lint

    if (command is None) == (source is None):
        raise UsageError("give the command as an argument or with --file (not both)")
    text = sys.stdin.read() if command == "-" else command if command is not None else source.read()
    findings = lint(text, LintContext(workers, slots, not debugging, root_env))
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
@click.option("-o", "--output", type=FileOut)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def mpijob(target, name, workers, slots, gpus_per_worker, shm_size, output, command):
    """Render a Kubeflow MPIJob (kubeflow.org/v2beta1) for TARGET (a recipe or an image)."""
    manifest = api.mpijob_manifest(target, name, workers, slots, command, gpus_per_worker, shm_size)
    text = yaml.safe_dump(manifest, sort_keys=False)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        out.print(f"[green]wrote[/] {escape(str(output))}")


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
    from imagekit.publish import PublishOptions
    from imagekit.publish import publish as run_publish

    image, recipe_moving = api.publish_target(target)
    if require_check is None:
        require_check = os.environ.get("CI") == "true"
    options = PublishOptions(moving_tags=moving or recipe_moving, require_check=require_check, **kw)
    result = run_publish(image, options, PlainReporter(err))
    out.print(f"[green]published[/] {result.repository}@{result.digest}")
    echo_lines([f"  {escape(ref)}" for ref in result.references[1:]])
    if options.record is not None:
        out.print(f"record written to {escape(str(options.record))}")


@cli.command("diff")
@click.argument("image_a")
@click.argument("image_b")
@click.option("--no-files", is_flag=True, help="Skip the file level (faster: no layer export).")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def diff_cmd(image_a, image_b, no_files, fmt):
    """What differs between two images: config, packages (dpkg, pip) and files."""
    with err.status(f"reading {escape(image_a)} and {escape(image_b)}"):
        result = api.diff_images(image_a, image_b, with_files=not no_files)
    if fmt == "json":
        sections = {k: [asdict(c) for c in v] for k, v in result.sections().items()}
        click.echo(json.dumps(sections, indent=2))
    else:
        echo_lines(display.diff_lines(result))


@cli.command()
@click.argument("image")
@click.option(
    "-o", "--output", type=FileOut, help="Write the SBOM here instead of standard output."
)
def sbom(image, output):
    """A CycloneDX SBOM (dpkg and pip packages with versions) of IMAGE or a RECIPE's image."""
    body = api.sbom(image)
    if output is None:
        click.echo(json.dumps(body, indent=2))
    else:
        api.write_json(body, output)
        out.print(f"[green]wrote[/] {escape(str(output))} ({len(body['components'])} components)")


# -- entry point -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    # Only `imagekit --debug CMD` is the global flag (`imagekit mpirun --debug` is not).
    first_word = next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))
    debug = "--debug" in args[:first_word] or os.environ.get("IMAGEKIT_DEBUG") == "1"
    try:
        cli.main(args=args, prog_name="imagekit", standalone_mode=False)
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
    except (click.exceptions.Abort, KeyboardInterrupt):
        err.print("[bold red]ERROR[/] interrupted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
