"""`imagekit smoke`: a real MPIJob in containers (launcher + workers, real sshd/ssh/mpirun),
including the platform's worked example (E1) trained for real on CPU."""

from __future__ import annotations

import shlex
import time

import pytest

from imagekit.run.smoke import SMOKE_LABEL

from .conftest import ROOT, assert_e1_trained, imagekit, marked
from .images import NON_ROOT, build, build_broken

E1 = [
    "mpirun",
    "-np",
    "4",
    "--hostfile",
    "/etc/mpi/hostfile",
    "--allow-run-as-root",
    "-bind-to",
    "none",
    "-map-by",
    "slot",
    "-mca",
    "pml",
    "ob1",
    "-mca",
    "btl",
    "^openib",
    "-x",
    "PATH",
    "python3",
    "cifar10_deepspeed.py",
    "--deepspeed",
    "--epochs",
    "6",
    "--stage",
    "2",
    "--dtype",
    "fp32",
    "--log-interval",
    "100",
    "--micro-batch-size",
    "16",
    "--gradient-accumulation-steps",
    "1",
]


def nothing_left(engine) -> None:
    assert engine.client.containers.list(all=True, filters={"label": SMOKE_LABEL}) == []
    assert engine.client.networks.list(filters={"label": SMOKE_LABEL}) == []


@pytest.mark.parametrize("keys", ["mounted", "image"])
def test_probe_runs_on_the_hostfile_workers(engine, cpu_image, keys):
    result = imagekit("smoke", cpu_image.ref, "--keys", keys, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    probes = marked(result.stderr, "IMAGEKIT_PROBE")
    assert sorted(p["rank"] for p in probes) == [0, 1, 2, 3]
    for p in probes:
        assert p["host"].endswith(f"-worker-{p['rank'] // 2}") and p["size"] == 4
        assert p["allreduce"] == 4  # mpi4py moved data between the containers
    assert "PASSED 2 workers x 2 slots" in result.stdout
    nothing_left(engine)


@pytest.mark.parametrize("keys", ["mounted", "image"])
def test_seed_example_trains_on_four_ranks(engine, cpu_image, keys):
    """E1: 2 workers x 2 slots, DeepSpeed ZeRO stage 2 on CPU; every rank on its host and
    the loss goes down."""
    result = imagekit(
        "smoke",
        cpu_image.ref,
        "--keys",
        keys,
        "--timeout",
        "900",
        "--copy",
        f"{ROOT / 'examples' / 'cifar10_deepspeed.py'}:/workspace/cifar10_deepspeed.py",
        "--workdir",
        "/workspace",
        "--",
        *E1,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert_e1_trained(result.stderr)
    nothing_left(engine)


@pytest.mark.parametrize(
    "name,keys,diagnosis",
    [
        ("sshd-cannot-start", "mounted", "R4: sshd cannot start: no host keys"),
        ("strictmodes-yes", "mounted", "R5: sshd refuses the mounted keys"),
        ("host-key-prompt", "image", "R9: ssh stops at a host-key prompt"),
    ],
)
def test_broken_image_fails_fast_with_diagnosis(engine, mini, tmp_path, name, keys, diagnosis):
    ref = build_broken(engine, mini, name, tmp_path)
    started = time.monotonic()
    result = imagekit("smoke", ref, "--keys", keys, "--timeout", "300", timeout=400)
    elapsed = time.monotonic() - started
    assert result.returncode == 9, result.stdout + result.stderr
    assert diagnosis in result.stdout, result.stdout
    assert elapsed < 90, f"took {elapsed:.0f}s; should fail well under its 300s timeout"
    nothing_left(engine)


def test_generated_mpirun_line_runs_unchanged(engine, cpu_image):
    """Issue 7: `imagekit mpirun` output, run as printed, passes under smoke."""
    printed = imagekit(
        "mpirun",
        "--workers",
        "2",
        "--slots",
        "2",
        "--cpu",
        "--",
        "python3",
        "/opt/imagekit-smoke/probe.py",
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    argv = shlex.split(printed.stdout)
    result = imagekit("smoke", cpu_image.ref, "--", *argv, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stderr.count("IMAGEKIT_PROBE ") == 4 and "PASSED" in result.stdout
    nothing_left(engine)


def test_trainer_v2_layout_finds_that_a_root_image_cannot_use_its_secret(engine, cpu_image):
    """K2/K5: JobSet host names, a read-only hostfile, Trainer's launcher environment and its
    ECDSA P-521 key stored as id_rsa with mode 0640 (for a non-root user with fsGroup). The
    ssh client of a root image ignores a root-owned 0640 key, so the job cannot start: smoke
    says so, naming the cause, instead of a bare "publickey denied"."""
    result = imagekit("smoke", cpu_image.ref, "--operator", "trainer-v2", timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 9, output[-3000:]
    assert "-node-0-0" in output and "-node-0-1" in output
    assert "K5: the ssh client ignores the mounted private key" in output
    assert "Permissions 0640" in output  # the evidence line, from the launcher's ssh
    nothing_left(engine)


def test_a_run_that_never_leaves_the_launcher_fails_with_the_k3_diagnosis(engine, cpu_image):
    """K3, reproduced on Open MPI 4: without the operator's default hostfile (which Open MPI 5
    ignores), mpirun runs every rank on the launcher and exits 0. The command prints nothing
    about hosts; the workers' sshd logs show nobody logged in, and smoke says why."""
    command = ["env", "-u", "OMPI_MCA_orte_default_hostfile", "mpirun", "--allow-run-as-root"]
    command += ["--oversubscribe", "-np", "2", "true"]
    result = imagekit("smoke", cpu_image.ref, "--", *command, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 9, output[-3000:]
    assert "K3: the command exited 0 without reaching any worker" in output
    assert "PRTE_MCA_prte_default_hostfile" in output
    nothing_left(engine)


def test_non_root_workers_the_way_mpi_operator_examples_run_them(engine, mini, tmp_path):
    """K1: workers run `sshd -De -f /home/mpiuser/.sshd_config` as mpiuser on 2222, keys
    mounted at /home/mpiuser/.ssh, mpirun as mpiuser: every rank on its worker, as uid 1000."""
    ref = build(engine, tmp_path / "nr", "imagekit-test/non-root-smoke:latest", NON_ROOT, {})
    profile = ("--profile", "kubeflow-mpi-operator-v2-nonroot")
    result = imagekit("smoke", ref, *profile, "--workers", "2", "--slots", "2", timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "mounted at /home/mpiuser/.ssh" in output
    uids = {p["uid"] for p in marked(output, "IMAGEKIT_PROBE")}
    assert uids == {1000}, output[-3000:]
    # Without the profile, workers run the root operator's `sshd -De` as the image's USER
    # (mpiuser): it cannot read root's host keys and the job fails with that diagnosis.
    root = imagekit("smoke", ref, "--workers", "1", "--slots", "1", "--timeout", "60", timeout=300)
    assert root.returncode == 9 and "no hostkeys available" in root.stderr, root.stderr[-3000:]
    missing = imagekit("smoke", mini, *profile, timeout=300)
    assert missing.returncode == 2 and "no user mpiuser in the image" in missing.stderr
