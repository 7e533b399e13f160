"""The recipes with a non-root MPI user (K1), Open MPI 4 (deepspeed-cpu-nonroot) and Open
MPI 5 (deepspeed-cpu-ompi5-nonroot), built for real: each passes the non-root mpi-operator
profile and Trainer v2's, fails the seed's on R1 alone, runs a 2x2 MPIJob as mpiuser under
both layouts, and shares every layer of its root recipe below its own."""

from __future__ import annotations

import json

import pytest

from .conftest import imagekit, marked

NONROOT = "kubeflow-mpi-operator-v2-nonroot"


def report_of(tmp_path, image: str, *args: str) -> tuple[int, dict, str]:
    path = tmp_path / "report.json"
    result = imagekit("check", image, "--report", str(path), *args, timeout=600)
    return result.returncode, json.loads(path.read_text()), result.stdout + result.stderr


def failing(report: dict) -> set[str]:
    return {r["id"] for r in report["results"] if r["status"] == "fail"}


@pytest.fixture(params=["openmpi4", "openmpi5"])
def images(request, cpu_image, nonroot_image, ompi5_image, ompi5_nonroot_image):
    """(the non-root image, the root image its recipe builds on), for each Open MPI."""
    return {
        "openmpi4": (nonroot_image, cpu_image),
        "openmpi5": (ompi5_nonroot_image, ompi5_image),
    }[request.param]


@pytest.fixture
def nonroot(images):
    return images[0]


def test_nonroot_recipe_shares_its_root_recipes_layers(engine, images):
    nonroot, root = images
    below = engine.inspect_image(root.image_id)["RootFS"]["Layers"]
    layers = engine.inspect_image(nonroot.image_id)["RootFS"]["Layers"]
    assert layers[: len(below)] == below  # the user's layers sit on top of the root image's
    assert len(layers) - len(below) == 3  # its sshd config, the user, the op directories


def test_nonroot_image_passes_its_profile_and_fails_seed_on_r1_only(nonroot, tmp_path):
    code, report, output = report_of(tmp_path, nonroot.ref, "--profile", NONROOT)
    assert code == 0, output
    by_id = {r["id"]: r for r in report["results"]}
    assert "listening on 2222" in by_id["sshd-start"]["evidence"], output
    for proven in ("ssh-login-mounted-key", "remote-environment", "sshd-port", "version-torch"):
        assert by_id[proven]["status"] in ("pass", "info"), (proven, output)
    code, report, output = report_of(tmp_path, nonroot.ref)
    assert code == 7 and failing(report) == {"root-user"}, output


def test_nonroot_image_runs_a_2x2_mpijob_as_mpiuser(nonroot):
    result = imagekit(
        "smoke",
        nonroot.ref,
        "--profile",
        NONROOT,
        "--workers",
        "2",
        "--slots",
        "2",
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    records = marked(output, "IMAGEKIT_PROBE")
    assert len(records) == 4 and {r["uid"] for r in records} == {1000}, output[-3000:]
    assert {r["allreduce"] for r in records} == {4}  # mpi4py across the workers, as mpiuser


def test_prebuilt_deepspeed_op_loads_as_mpiuser(engine, nonroot):
    """torch takes a lock file in the op's directory: root-owned, a non-root user could not."""
    script = (
        "from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder; "
        "print('loaded', ShareMemCommBuilder().load().__file__)"
    )
    with engine.container(nonroot.ref, command=["sleep", "infinity"], entrypoint=[]) as box:
        code, out = box.exec(["python3", "-c", script])
    assert code == 0 and "loaded /opt/imagekit/torch-extensions/" in out, out[-2000:]


def test_trainer_v2s_layout_works_for_the_non_root_image(nonroot, tmp_path):
    """K2: Trainer v2 mounts root's files (an ECDSA P-521 key as id_rsa, all 0640) read
    through fsGroup. Useless to a root image (K5, test_smoke), right for mpiuser."""
    code, report, output = report_of(tmp_path, nonroot.ref, "--profile", "kubeflow-trainer-v2")
    assert code == 0, output
    by_id = {r["id"]: r for r in report["results"]}
    assert by_id["ssh-login-mounted-key"]["status"] == "pass", output
    result = imagekit(
        "smoke",
        nonroot.ref,
        "--profile",
        "kubeflow-trainer-v2",
        "--workers",
        "2",
        "--slots",
        "1",
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "-node-0-1." in output  # JobSet host names: the profile picked Trainer's layout
