"""What mpirun needs of the image (R1, R11, R2, R8, K3): root, bash, mpirun, a run as root,
Open MPI 5's default hostfile."""

from __future__ import annotations

import re

import pytest

from imagekit.checks import check
from imagekit.checks.facts import bash_path, both_mpiruns, expect, expect_mpirun, has
from imagekit.ompi import OPERATOR_HOSTFILE, openmpi_major

# -- R1, R11, R2 --------------------------------------------------------------------------


@check(
    "root-user",
    "R1",
    "the container runs as root (uid 0)",
    fix="remove the USER instruction, or end the Dockerfile with `USER root`",
    varies="a non-root profile: its user exists and the image runs as it (K1)",
)
def check_root_user(ctx):
    if ctx.profile.non_root:  # K1: the operator runs the pod as this user (runAsUser)
        uid = ctx.initial.get("uid")
        expect(
            uid is not None, f"profile {ctx.profile.name} runs as {ctx.profile.user}: no such user"
        )
        pytest.skip(f"profile {ctx.profile.name} runs as {ctx.profile.user} (uid {uid}), not root")
    user = ctx.config.get("User") or ""
    code, out = ctx.container.read(["id", "-u"], user=user or "root")  # the image's own user
    uid = out.strip()
    expect(
        user in ("", "root", "0", "0:0", "root:root") and uid == "0",
        (f"image USER is {user!r}; a container runs as uid {uid}"),
    )


@check(
    "bash",
    "R11",
    "bash exists (mpirun ... bash run.sh)",
    fix="install bash (apt-get install -y bash)",
)
def check_bash(ctx, host):
    expect(bash_path(ctx, host) is not None, "no /bin/bash")


@check(
    "mpirun",
    "R2",
    "mpirun is on PATH",
    fix="install Open MPI (apt-get install -y openmpi-bin) or put its bin/ on PATH",
)
def check_mpirun(ctx, user_host, note):
    host = user_host
    if not has(ctx, host, "mpirun"):  # PATH read only as the failure's evidence
        missing = "mpirun not found on PATH " + host.run("echo $PATH").stdout.strip()
        pytest.fail(missing, pytrace=False)
    banner = ctx.version_facts().get("mpirun-banner")  # `mpirun --version`, read in background
    note("info", banner or "mpirun present")


# -- R8 ----------------------------------------------------------------------------------------


def _need_mpirun(ctx, host) -> None:
    if not has(ctx, host, "mpirun"):
        pytest.skip("no mpirun (see R2)")


@check(
    "mpirun-as-root",
    "R8",
    "mpirun runs as root without aborting",
    fix="set ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1, "
    "or launch with --allow-run-as-root",
    varies="`run_as_root: flag` passes --allow-run-as-root, `env` must work bare; skipped for non-root profiles",
)
def check_mpirun_as_root(ctx, host, note):
    if ctx.profile.non_root:
        pytest.skip(f"profile {ctx.profile.name} runs mpirun as {ctx.profile.user}")
    _need_mpirun(ctx, host)
    bare, flagged = both_mpiruns(host)
    if ctx.profile.run_as_root == "env":
        expect_mpirun(bare[0] == 0, f"mpirun -np 1 true: {bare[1][:300]}")
    else:
        expect_mpirun(flagged[0] == 0, f"mpirun --allow-run-as-root -np 1 true: {flagged[1][:300]}")
        if bare[0] != 0:
            note("warn", "bare mpirun aborts as root: every launch needs --allow-run-as-root")


@check(
    "mpirun-two-ranks",
    "R8",
    "a 2-rank mpirun runs inside the container",
    fix="check Open MPI's install and openmpi-mca-params.conf; run the command shown",
)
def check_mpirun_two_ranks(ctx, user_host, note):
    host = user_host  # as the profile's user: root, or K1's mpiuser
    _need_mpirun(ctx, host)
    cmd = (
        "timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "
        "sh -c 'echo rank=$OMPI_COMM_WORLD_RANK size=$OMPI_COMM_WORLD_SIZE'"
    )
    result = host.run(cmd, prints=True)
    ranks = sorted(re.findall(r"rank=(\d) size=2", result.stdout))
    expect_mpirun(
        result.rc == 0 and ranks == ["0", "1"],
        (f"{cmd}: rc {result.rc}: {(result.stderr or result.stdout).strip()[:300]}"),
    )
    note("info", "ranks 0 and 1 of 2 ran")


# -- K3 ----------------------------------------------------------------------------------------


@check(
    "prrte-default-hostfile",
    "K3",
    "Open MPI 5 reads the operators' hostfile when a launch names none",
    fix=f"set `prte_default_hostfile = {OPERATOR_HOSTFILE}` in PRRTE's prte-mca-params.conf (next to "
    "openmpi-mca-params.conf; `imagekit adapt` does), or ENV "
    f"PRTE_MCA_prte_default_hostfile={OPERATOR_HOSTFILE}",
)
def check_prrte_default_hostfile(ctx, note):
    """The operators' launchers set only OMPI_MCA_orte_default_hostfile, which Open MPI 5
    ignores: with PRRTE's default elsewhere, `mpirun -n N` without --hostfile runs every rank
    on the launcher and exits 0."""
    facts = ctx.version_facts()
    version = facts.get("openmpi", "")
    if (openmpi_major(version) or 0) < 5:
        pytest.skip(f"Open MPI {version or 'not found'}: ORTE reads the operators' variables")
    found = facts.get("prte-default-hostfile")
    if found is None:
        pytest.skip(f"Open MPI {version}: no prte_info to read PRRTE's parameters with")
    source, _, path = found.partition(":")
    expect(
        path == OPERATOR_HOSTFILE,
        f"PRRTE's default hostfile is {path or 'unset'!r} ({source}); a launch without "
        "--hostfile runs every rank on the launcher and exits 0 (the operators' "
        "OMPI_MCA_orte_default_hostfile is ignored by Open MPI 5)",
    )
    note("info", f"{path} ({source})")
