"""Commands that prove an image: check, adapt (make it pass, then check), smoke (an MPIJob
on one machine)."""

from __future__ import annotations

import re
from pathlib import Path

import click
from click.core import ParameterSource

from imagekit import operators
from imagekit.cli import display
from imagekit.cli.base import (
    GPUS_OPTION,
    PLATFORM_OPTION,
    FileOut,
    RecipeArg,
    cli,
    command_words,
    echo_lines,
    err,
    out,
)
from imagekit.cli.console import escape
from imagekit.errors import (
    CheckFailedError,
    SmokeFailedError,
)

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
@PLATFORM_OPTION
def check_cmd(image, profile, recipe, port, report_paths, fmt, gpus, platform) -> None:
    """Check IMAGE (any image, built by imagekit or not; or a RECIPE's image) against a profile."""
    from imagekit.build.targets import resolve_target
    from imagekit.checks.report import report_format
    from imagekit.profiles import load_profile

    chosen = load_profile(profile)
    reports = [(path, report_format(path, fmt)) for path in report_paths]  # before any work
    image, target_recipe = resolve_target(image, platform)
    _check_and_report(image, chosen, reports, recipe=recipe or target_recipe, port=port, gpus=gpus)


def _check_and_report(image, chosen, reports, recipe=None, port=None, gpus=None) -> None:
    from imagekit.build.targets import recipe_expected
    from imagekit.checks.report import write_report
    from imagekit.checks.runner import run_checks

    expected = recipe_expected(recipe)
    result = run_checks(image, chosen, lambda event: None, expected, port=port, gpus=gpus)
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
@click.option(
    "--fabric",
    type=click.Choice(["tcp", "rdma"]),
    help="rdma: run the default line over Open MPI's UCX PML (UCX over TCP: no HCA needed) and "
    "prove every rank selected it (default: the profile's fabric, else the image's label).",
)
@GPUS_OPTION
@PLATFORM_OPTION
@click.argument("command", nargs=-1, type=click.UNPROCESSED, callback=command_words)
def smoke(image: str, profile: str | None, platform: str | None, **kw) -> None:
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
        if kw["fabric"] is None and chosen.fabric == "rdma":
            kw["fabric"] = "rdma"
    target = resolve_target(image, platform)[0]
    result = run_smoke(target, SmokeOptions(**kw), PlainReporter(err.real))
    table, lines = display.smoke_table(result)
    if table is not None:
        out.print(table)
    echo_lines(lines)
    if not result.passed:
        raise SmokeFailedError(f"{image}: the MPIJob failed: {result.problems[0]}")
