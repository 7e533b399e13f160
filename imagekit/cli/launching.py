"""Launch tooling: mpirun (the recommended line), lint-cmd, mpijob (manifests)."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict

import click

from imagekit import operators
from imagekit.cli import display
from imagekit.cli.base import (
    FileOut,
    RecipeArg,
    cli,
    command_words,
    echo_lines,
    emit,
    err,
    net_devices,
    rdma_resources,
)
from imagekit.cli.console import escape
from imagekit.errors import (
    LintFailedError,
    UsageError,
)

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
    "--fabric",
    type=click.Choice(["tcp", "rdma"]),
    help="The cluster's fabric (default: from --recipe, else tcp): rdma runs Open MPI over "
    "UCX and NCCL over IB, with nothing that turns them off (F1-F4).",
)
@click.option(
    "--net-devices",
    callback=net_devices,
    metavar="PORTS",
    help="rdma: the HCA ports to use, e.g. mlx5_0:1 (UCX_NET_DEVICES, NCCL_IB_HCA).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["shell", "json", "yaml"]),
    default="shell",
    show_default=True,
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, callback=command_words)
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
@click.option(
    "--recipe", type=RecipeArg, help="Take the Open MPI major and the fabric from this recipe."
)
@click.option(
    "--fabric",
    type=click.Choice(["tcp", "rdma"]),
    help="The cluster's fabric (default: from --recipe, else tcp): on rdma, what turns the "
    "fabric off is an error (F4) and L4/L5's TCP rules do not apply.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def lint_cmd(
    command, source, workers, slots, debugging, root_env, openmpi_major, recipe, fabric, fmt
):
    """Check an mpirun COMMAND line against the platform's launch rules (L1-L14, K3, F4)."""
    from imagekit.run.launch import lint_defaults
    from imagekit.run.lint import LintContext, lint

    if (command is None) == (source is None):
        raise UsageError("give the command as an argument or with --file (not both)")
    text = sys.stdin.read() if command == "-" else command if command is not None else source.read()
    major, fabric = lint_defaults(openmpi_major, fabric, recipe)
    context = LintContext(workers, slots, not debugging, root_env, major, fabric)
    findings = lint(text, context)
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
@click.option(
    "--rdma",
    multiple=True,
    callback=rdma_resources,
    metavar="RESOURCE=N",
    help="The cluster's RDMA device resource (e.g. rdma/hca_shared_devices_a=1, "
    "nvidia.com/hostdev=1; repeatable): requested on launcher and workers with IPC_LOCK and "
    "/dev/shm, and the launch line on UCX (F3).",
)
@click.option("-o", "--output", type=FileOut)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, callback=command_words)
def mpijob(
    target,
    name,
    workers,
    slots,
    gpus_per_worker,
    shm_size,
    operator,
    profile,
    rdma,
    output,
    command,
):
    """Render the manifests of an MPI training job for TARGET (a recipe or an image)."""
    import yaml

    from imagekit.profiles import load_profile
    from imagekit.run.launch import mpijob_manifest

    documents = mpijob_manifest(
        target, name, workers, slots, command, gpus_per_worker, shm_size, operator, profile, rdma
    )
    text = yaml.safe_dump_all(documents, sort_keys=False)
    group_readable = operators.OPERATORS[operator].secret_files == "group-readable"
    if group_readable and not (profile and load_profile(profile).non_root):
        err.print(
            "[yellow]WARNING[/] Trainer v2 mounts its Secret's key with mode 0640 for a non-root "
            "user (fsGroup); the ssh client of an image running as root ignores such a key (K5). "
            "Prove the pair with `imagekit smoke IMAGE --operator trainer-v2` first."
        )
    emit(text, output)
