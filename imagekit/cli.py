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
from imagekit import build as build_mod
from imagekit.build import BuildOptions
from imagekit.errors import ImagekitError, UsageError
from imagekit.progress import PlainReporter, reporter_for

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

RecipeArg = click.Path(path_type=Path, dir_okay=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="imagekit")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """Build, verify and publish MPI + NCCL + DeepSpeed training images for MPIJobs."""


def _resolve_target(target: str) -> tuple[str, Path | None]:
    """RECIPE|IMAGE arguments: a .yaml path means the recipe's own image."""
    if not target.endswith((".yaml", ".yml")):
        return target, None
    from imagekit.plan import make_plan
    from imagekit.recipe import load_recipe

    return make_plan(load_recipe(Path(target))).image, Path(target)


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
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory for the build context (default: dockerfiles/<name>/).",
)
@click.option(
    "--check", is_flag=True, help="Fail (exit 3) when a committed render in dockerfiles/ is stale."
)
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
def render(
    recipes: tuple[Path, ...],
    output: Path | None,
    check: bool,
    recipes_dir: Path,
    renders_dir: Path,
) -> None:
    """Render RECIPES (default: every recipe in recipes/) to Docker build contexts."""
    paths = api.recipe_paths(list(recipes), recipes_dir)
    if check:
        for committed in api.check_renders(paths, renders_dir):
            out.print(f"[green]up to date[/] {committed}/")
        return
    for written in api.render(paths, output, renders_dir):
        out.print(f"[green]rendered[/] {written}/")


@cli.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the schema to a file instead of standard output.",
)
def schema(output: Path | None) -> None:
    """Print the JSON Schema of recipes (for editors)."""
    from imagekit.recipe import json_schema

    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        out.print(f"[green]wrote[/] {output}")


def _key_value(ctx, param, values: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", ctx=ctx, param=param)
        pairs[key] = value
    return pairs


def _build_options(**kw) -> BuildOptions:
    return BuildOptions(
        tags=kw["tag"],
        no_cache=kw["no_cache"],
        pull=kw["pull"],
        build_args=kw["build_arg"],
        ca_bundle=kw["ca_bundle"],
        wheelhouse=kw["wheelhouse"],
        index_url=kw["index_url"],
        extra_index_urls=kw["extra_index_url"],
        apt_mirror=kw["apt_mirror"],
        source_date_epoch=kw["source_date_epoch"],
    )


@cli.command()
@click.argument("recipe", type=RecipeArg)
@click.option(
    "-t", "--tag", multiple=True, help="Extra tag (repeatable); the recipe's tag is always applied."
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
    multiple=True,
    callback=_key_value,
    metavar="KEY=VALUE",
    help="Docker build argument (repeatable).",
)
@click.option(
    "--ca-bundle",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="IMAGEKIT_CA_BUNDLE",
    help="PEM CA bundle trusted by pip and curl during the build only; never in the image.",
)
@click.option(
    "--wheelhouse",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="IMAGEKIT_WHEELHOUSE",
    help="Directory of wheels pip may install from (stands in for the torch index).",
)
@click.option("--index-url", envvar="IMAGEKIT_INDEX_URL", help="pip index (a PyPI mirror).")
@click.option("--extra-index-url", multiple=True, help="Extra pip index (repeatable).")
@click.option(
    "--apt-mirror",
    envvar="IMAGEKIT_APT_MIRROR",
    help="Debian/Ubuntu mirror URL replacing deb.debian.org / archive.ubuntu.com.",
)
@click.option(
    "--source-date-epoch",
    type=int,
    envvar="SOURCE_DATE_EPOCH",
    help="Timestamp for the created label (reproducible builds).",
)
@click.option("--plain", is_flag=True, help="Plain build log instead of a progress display.")
@click.option("--dry-run", is_flag=True, help="Render and print the plan; build nothing.")
@click.option(
    "--sbom",
    "sbom_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write a CycloneDX SBOM of the built image to this file.",
)
def build(recipe: Path, plain: bool, dry_run: bool, sbom_path: Path | None, **kw) -> None:
    """Build RECIPE into an image on the Docker engine (DOCKER_HOST is honoured)."""
    options = _build_options(**kw)
    if dry_run:
        plan, dockerfile = build_mod.dry_run(recipe, options)
        _print_plan(plan)
        click.echo(dockerfile, nl=False)
        return
    reporter = reporter_for(err, plain)
    try:
        result = build_mod.build(recipe, options, reporter)
    finally:
        reporter.close()
    out.print(f"[green]built[/] {result.image_id}")
    for tag in result.tags:
        out.print(f"  tag   {tag}")
    out.print(f"  size  {result.size / 1e9:.2f} GB   time {result.seconds:.0f}s")
    if sbom_path is not None:
        from imagekit.engine import Engine
        from imagekit.inventory import cyclonedx, inventory

        body = cyclonedx(inventory(Engine.connect(), result.image_id, with_files=False))
        sbom_path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        out.print(f"  sbom  {escape(str(sbom_path))} ({len(body['components'])} components)")


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
@click.option(
    "--report",
    "report_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the report to this file.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "junit", "markdown"]),
    default="json",
    show_default=True,
    help="Format of --report.",
)
def check_cmd(
    image: str,
    profile: str,
    recipe: Path | None,
    port: int | None,
    report_path: Path | None,
    fmt: str,
) -> None:
    """Check IMAGE (any image, built by imagekit or not; or a RECIPE's image) against a profile."""
    from imagekit.checks.profiles import load_profile
    from imagekit.checks.report import write_report
    from imagekit.checks.runner import run_checks
    from imagekit.errors import CheckFailedError

    chosen = load_profile(profile)
    image, target_recipe = _resolve_target(image)
    result = run_checks(
        image, chosen, lambda event: None, recipe=recipe or target_recipe, port=port
    )
    _print_check_report(result)
    if report_path is not None:
        write_report(result, report_path, fmt)
        out.print(f"report written to {escape(str(report_path))} ({fmt})")
    if not result.passed:
        failed = sorted(result.failed_requirements())
        raise CheckFailedError(f"{image}: failed {', '.join(failed)} under profile {chosen.name}")


STATUS_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "info": "cyan",
    "skip": "dim",
    "fail": "bold red",
}


def _print_check_report(report) -> None:
    from rich.table import Table

    table = Table(
        title=f"imagekit check {report.image} (profile {report.profile})",
        title_justify="left",
        show_lines=False,
        expand=False,
    )
    for column in ("check", "req", "status", "evidence / fix"):
        table.add_column(column, overflow="fold")
    for r in report.results:
        style = STATUS_STYLE.get(r.status, "")
        detail = escape(r.evidence)
        if r.fix:
            detail += f"\n[bold]fix:[/] {escape(r.fix)}"
        table.add_row(r.id, r.requirement, f"[{style}]{r.status}[/]", detail)
    out.print(table)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report.counts().items()))
    verdict = "[green]PASSED[/]" if report.passed else "[bold red]FAILED[/]"
    out.print(
        f"{verdict} {counts} in {report.seconds:.1f}s "
        f"(expected versions: {escape(report.expected_source or 'none declared')})"
    )


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
    help="mounted: a fresh key pair mounted at /root/.ssh like a Secret; image: the image's keys.",
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
def smoke(image: str, command: tuple[str, ...], **kw) -> None:
    """Run an MPIJob the way the operator does: launcher + workers over real ssh and mpirun.

    COMMAND (after --) runs in the launcher; the default is the platform's recommended mpirun
    line running a probe that reports every rank's host, rank and world size."""
    from imagekit.smoke import SmokeFailedError, SmokeOptions
    from imagekit.smoke import smoke as run_smoke

    options = SmokeOptions(
        workers=kw["workers"],
        slots=kw["slots"],
        keys=kw["keys"],
        port=kw["port"],
        timeout=kw["timeout"],
        shm_size=kw["shm_size"],
        command=command,
        copies=kw["copies"],
        workdir=kw["workdir"],
    )
    result = run_smoke(_resolve_target(image)[0], options, PlainReporter(err))
    _print_smoke(result)
    if not result.passed:
        raise SmokeFailedError(f"{image}: the MPIJob failed: {result.problems[0]}")


def _print_smoke(result) -> None:
    top = result.topology
    if result.ranks:
        from rich.table import Table

        table = Table(title=f"ranks (hosts are {top.job}-...)", title_justify="left")
        for column in ("rank", "host", "local rank", "world size", "allreduce", "expected host"):
            table.add_column(column)
        for r in result.ranks:
            ok = r.host == top.expected_host(r.rank)
            table.add_row(
                str(r.rank),
                f"[{'green' if ok else 'red'}]{r.host}[/]",
                str(r.local_rank),
                str(r.size),
                str(r.allreduce),
                top.expected_host(r.rank),
            )
        out.print(table)
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items())
    verdict = "[green]PASSED[/]" if result.passed else "[bold red]FAILED[/]"
    out.print(f"{verdict} {len(top.workers)} workers x {top.slots} slots; {timings}")
    for problem in result.problems:
        out.print(f"  [red]-[/] {escape(problem)}")


class LintFailedError(ImagekitError):
    exit_code = 10
    debug_tip = False


def _launch_defaults(recipe: Path | None) -> tuple[dict[str, str], bool | None]:
    if recipe is None:
        return {}, None
    from imagekit.plan import make_plan
    from imagekit.recipe import load_recipe

    plan = make_plan(load_recipe(recipe))
    return {k: v for k, v, _ in plan.mca}, plan.accel == "gpu"


@cli.command("mpirun", context_settings={"ignore_unknown_options": True})
@click.option("--workers", type=int, required=True, help="Worker pods.")
@click.option("--slots", type=int, required=True, help="Ranks (GPUs) per worker.")
@click.option(
    "--profile", default="seed", show_default=True, help="Platform profile (its ssh port)."
)
@click.option(
    "--gpu/--cpu", default=None, help="Add NCCL variables (default: from --recipe, else CPU)."
)
@click.option(
    "--debug", "debug_set", is_flag=True, help="The debugging set (L9) instead of production."
)
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
def mpirun_cmd(
    workers, slots, profile, gpu, debug_set, env, recipe, timeout, workdir, fmt, command
):
    """Print the recommended mpirun line for WORKERS x SLOTS ranks running COMMAND."""
    from imagekit.checks.profiles import load_profile
    from imagekit.launch import LaunchRequest, recommend

    baked, recipe_gpu = _launch_defaults(recipe)
    port = load_profile(profile).port
    request = LaunchRequest(
        workers=workers,
        slots=slots,
        command=command,
        gpu=gpu if gpu is not None else bool(recipe_gpu),
        debug=debug_set,
        env=tuple(env),
        timeout=timeout,
        baked_mca=baked,
        workdir=workdir,
    )
    line = recommend(request)
    argv = line.argv
    if port != 22:
        argv = argv[:1] + ["-mca", "plm_rsh_args", f"-p {port}"] + argv[1:]
    for note in line.notes:
        err.print(f"[dim]# {escape(note)}[/]")
    if fmt == "json":
        click.echo(json.dumps(argv))
    elif fmt == "yaml":
        import yaml

        click.echo(yaml.safe_dump(argv, default_flow_style=False), nl=False)
    else:
        import shlex

        click.echo(shlex.join(argv))


@cli.command("lint-cmd")
@click.argument("command", required=False)
@click.option(
    "--file", "path", type=click.File("r"), help="Read the command from a file ('-': stdin)."
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
def lint_cmd(command, path, workers, slots, debugging, root_env, fmt):
    """Check an mpirun COMMAND line against the platform's launch rules (L1-L14)."""
    from dataclasses import asdict

    from imagekit.launch import LintContext, lint

    if (command is None) == (path is None):
        raise UsageError("give the command as an argument or with --file (not both)")
    text = command if command is not None else path.read()
    if command == "-":
        text = sys.stdin.read()
    findings = lint(text, LintContext(workers, slots, not debugging, root_env))
    errors = [f for f in findings if f.severity == "error"]
    if fmt == "json":
        click.echo(
            json.dumps({"ok": not errors, "findings": [asdict(f) for f in findings]}, indent=2)
        )
    else:
        style = {"error": "bold red", "warning": "yellow", "info": "cyan"}
        for f in findings:
            out.print(f"[{style[f.severity]}]{f.severity:<7}[/] {f.lid:<4} {escape(f.message)}")
            out.print(f"             fix: {escape(f.fix)}")
        if not findings:
            out.print("[green]ok[/] no problems found")
    if errors:
        raise LintFailedError(
            f"{len(errors)} error(s): {', '.join(sorted({f.lid for f in errors}))}"
        )


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("target")
@click.option("--name", required=True, help="MPIJob name.")
@click.option("--workers", type=int, required=True)
@click.option("--slots", type=int, required=True)
@click.option("--gpus-per-worker", type=int, default=0, show_default=True)
@click.option("--shm-size", default="1Gi", show_default=True, help="/dev/shm emptyDir size.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def mpijob(target, name, workers, slots, gpus_per_worker, shm_size, output, command):
    """Render a Kubeflow MPIJob (kubeflow.org/v2beta1) for TARGET (a recipe or an image)."""
    import yaml

    from imagekit.launch import LaunchRequest, recommend
    from imagekit.launch import mpijob as render_mpijob

    image, recipe = _resolve_target(target)
    baked, gpu = _launch_defaults(recipe)
    line = recommend(
        LaunchRequest(
            workers=workers,
            slots=slots,
            command=command,
            gpu=bool(gpu) or gpus_per_worker > 0,
            baked_mca=baked,
        )
    )
    manifest = render_mpijob(name, image, workers, slots, line.argv, gpus_per_worker, shm_size)
    text = yaml.safe_dump(manifest, sort_keys=False)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        out.print(f"[green]wrote[/] {escape(str(output))}")


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
    "--check-report",
    type=click.Path(path_type=Path, dir_okay=False),
    help="JSON report from `imagekit check IMAGE --report FILE`.",
)
@click.option("--force", is_flag=True, help="Overwrite a version tag that points at another image.")
@click.option(
    "--record",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a JSON record of what was pushed (repository, tags, digest, ...).",
)
@click.option(
    "--retries", default=3, show_default=True, help="Attempts on transient registry errors."
)
def publish(target, registry, tags, moving, require_check, check_report, force, record, retries):
    """Push TARGET (a recipe's image, or any image) to a registry, checked and immutable."""
    from imagekit.publish import PublishOptions
    from imagekit.publish import publish as run_publish

    image, recipe = _resolve_target(target)
    recipe_moving: tuple[str, ...] = ()
    if recipe is not None:
        from imagekit.plan import make_plan
        from imagekit.recipe import load_recipe

        recipe_moving = tuple(
            t.rsplit(":", 1)[1] for t in make_plan(load_recipe(recipe)).moving_tags
        )
    if require_check is None:
        require_check = os.environ.get("CI") == "true"
    options = PublishOptions(
        registry=registry,
        tags=tags,
        moving_tags=moving or recipe_moving,
        require_check=require_check,
        check_report=check_report,
        force=force,
        record=record,
        retries=retries,
    )
    result = run_publish(image, options, PlainReporter(err))
    out.print(f"[green]published[/] {result.repository}@{result.digest}")
    for ref in result.references[1:]:
        out.print(f"  {ref}")
    if record is not None:
        out.print(f"record written to {escape(str(record))}")


@cli.command("diff")
@click.argument("image_a")
@click.argument("image_b")
@click.option("--no-files", is_flag=True, help="Skip the file level (faster: no layer export).")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def diff_cmd(image_a, image_b, no_files, fmt):
    """What differs between two images: config, packages (dpkg, pip) and files."""
    from dataclasses import asdict

    from imagekit.engine import Engine
    from imagekit.inventory import diff, inventory

    engine = Engine.connect()
    a, b = (
        inventory(engine, _resolve_target(x)[0], with_files=not no_files)
        for x in (image_a, image_b)
    )
    result = diff(a, b)
    if fmt == "json":
        click.echo(
            json.dumps({k: [asdict(c) for c in v] for k, v in result.sections().items()}, indent=2)
        )
        return
    if result.same:
        out.print(f"[green]no differences[/] between {escape(a.image)} and {escape(b.image)}")
        return
    for section, changes in result.sections().items():
        out.print(f"[bold]{section}[/] ({len(changes)} changed)")
        for change in changes[:200]:
            out.print("  " + escape(_change_line(section, change)))
        if len(changes) > 200:
            out.print(f"  ... and {len(changes) - 200} more (--format json for all)")


def _change_line(section: str, c) -> str:
    def show(value):
        if section == "files" and value is not None:
            return f"{value[0]} bytes"
        return json.dumps(value) if not isinstance(value, str) else value

    if c.before is None:
        return f"+ {c.key}: {show(c.after)}"
    if c.after is None:
        return f"- {c.key}: {show(c.before)}"
    return f"~ {c.key}: {show(c.before)} -> {show(c.after)}"


@cli.command()
@click.argument("image")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the SBOM here instead of standard output.",
)
def sbom(image, output):
    """A CycloneDX SBOM (dpkg and pip packages with versions) of IMAGE or a RECIPE's image."""
    from imagekit.engine import Engine
    from imagekit.inventory import cyclonedx, inventory

    body = cyclonedx(inventory(Engine.connect(), _resolve_target(image)[0], with_files=False))
    text = json.dumps(body, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        out.print(f"[green]wrote[/] {escape(str(output))} ({len(body['components'])} components)")


def _print_plan(plan) -> None:
    out.print(f"[bold]plan[/] {plan.name}: {', '.join(plan.tags)}")
    out.print(f"  base   {plan.base_image}" + (" (bootstrapped locally)" if plan.bootstrap else ""))
    for key, value in plan.expected.items():
        out.print(f"  {key:<10} {value}")
    out.print(f"  stages {', '.join('pip-' + s.stage for s in plan.pip_steps)}")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    # Only `imagekit --debug CMD` is the global flag (`imagekit mpirun --debug` is not).
    global_opts = [
        a for a in args[: next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))]
    ]
    debug = "--debug" in global_opts or os.environ.get("IMAGEKIT_DEBUG") == "1"
    try:
        cli.main(args=args, prog_name="imagekit", standalone_mode=False)
    except ImagekitError as exc:
        if debug:
            raise
        for line in exc.message.splitlines():
            err.print(f"[bold red]ERROR[/] {escape(line)}")
        if exc.hint:
            for line in exc.hint.splitlines():
                err.print(f"[dim]  {escape(line)}[/]")
        if exc.debug_tip:  # not for plain bad input or verdicts: the message says it all
            err.print("[dim]TIP run with --debug for a traceback[/]")
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
