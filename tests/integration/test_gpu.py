"""The GPU recipe (recipes/deepspeed-gpu.yaml: CUDA from PyPI wheels, nvcc from Debian's
toolkit, no registry) built for real from its lock, then proven without a GPU: `check` with
the CUDA facts (versions, every library resolves, the prebuilt ops import) and the RDMA
fabric's, smoke 2x2 on the CPU through UCX, and broken variants that each fail exactly
their checks (native-libraries, prebuilt-ops). The image and its builder stages are removed when the module ends (a cold
build peaks at ~31 GB)."""

from __future__ import annotations

import json

import pytest

from imagekit.build.plan import make_plan
from imagekit.recipe.loader import load_recipe

from .conftest import (
    RECIPES,
    ROOT,
    BuiltImage,
    assert_e1_trained,
    by_id,
    check_json,
    imagekit,
    marked,
    run_in,
)
from .images import build

GPU_RECIPE = RECIPES / "deepspeed-gpu.yaml"
SITE = "/usr/local/lib/python3.13/dist-packages"

# name -> (Dockerfile lines on top of the GPU image, what the check's evidence must name)
BROKEN_GPU = {
    # A CUDA library the torch wheel needs is gone (a slimmed image, a wheel left out).
    # native-libraries names the cause; torch then cannot import, so neither can an op.
    "missing-cublaslt": (
        f"RUN rm {SITE}/nvidia/cublas/lib/libcublasLt.so.12",
        {
            "native-libraries": "libtorch_cuda.so (needs libcublasLt.so.12)",
            "prebuilt-ops": "libcublasLt.so.12: cannot open shared object file",
        },
    ),
    # The ops were compiled against another torch: DeepSpeed records the torch it built
    # its ops with, and refuses to load them under another (as after a torch upgrade that
    # did not rebuild DeepSpeed).
    "ops-from-another-torch": (
        "RUN sed -i \"s/'version': '2.6'/'version': '2.5'/\" "
        f"{SITE}/deepspeed/git_version_info_installed.py "
        f"&& grep -q \"'version': '2.5'\" {SITE}/deepspeed/git_version_info_installed.py "
        # the image's bytecode is hash-checked never (reproducible builds): drop the stale one
        f"&& rm {SITE}/deepspeed/__pycache__/git_version_info_installed.*.pyc",
        {"prebuilt-ops": "PyTorch version mismatch"},
    ),
    # An op the image claims as prebuilt is not there.
    "op-library-missing": (
        f"RUN rm {SITE}/deepspeed/ops/adam/fused_adam_op*.so",
        {"prebuilt-ops": "FusedAdamBuilder"},
    ),
}


@pytest.fixture(scope="module")
def gpu_image(engine):
    """Built --locked from the committed lock, as CI publishes it; removed afterwards with
    everything only it used (its builder stages hold the toolkit and a second torch)."""
    result = imagekit("build", str(GPU_RECIPE), "--locked", "--plain", timeout=3600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    plan = make_plan(load_recipe(GPU_RECIPE))
    image = BuiltImage(plan.image, engine.inspect_image(plan.image)["Id"], result.stdout)
    yield image
    for ref in (*plan.tags, *plan.moving_tags):
        if engine.image_exists(ref):
            engine.api.remove_image(ref, force=True)


def test_gpu_image_passes_check_with_its_cuda_facts(gpu_image, tmp_path):
    code, report, output = check_json(gpu_image.ref, tmp_path)
    assert code == 0, output
    results = by_id(report)
    cuda = results["version-cuda"]
    assert cuda["status"] in ("pass", "info"), cuda
    text = json.dumps(cuda)
    # every place the image states its CUDA: torch's build, the runtime wheel
    assert "12.4 (torch.version.cuda)" in text and "12.4.127 (nvidia-cuda-runtime-cu12)" in text
    assert "nvcc" not in text  # the toolkit never reached the image
    nccl = json.dumps(results["version-nccl"])
    assert "2.21.5" in nccl
    ops = json.dumps(results["prebuilt-ops"])
    assert results["prebuilt-ops"]["status"] in ("pass", "info"), ops
    assert "FusedAdamBuilder" in ops and "CPUAdamBuilder" in ops
    libs = json.dumps(results["native-libraries"])
    assert results["native-libraries"]["status"] in ("pass", "info"), libs
    assert "libcuda.so.1" in libs  # left to the NVIDIA container runtime, and said so
    # The recipe declares fabric: rdma (mlx5, UCX): the fabric section judges it without a
    # profile saying so, and reports what NCCL and Open MPI 5 would load on an RDMA node.
    for unit in ("verbs-library", "verbs-providers", "ucx-pml"):
        assert results[unit]["status"] in ("pass", "info"), results[unit]
    assert "mlx5: registered" in results["verbs-providers"]["evidence"]
    assert "libuct_ib" in results["ucx-pml"]["evidence"]


def test_toolkit_stays_in_the_builder_stage(engine, gpu_image):
    code, out = run_in(
        engine,
        gpu_image.ref,
        f"command -v nvcc; ls /usr/lib/nvidia-cuda-toolkit 2>&1; ls {SITE}/deepspeed/ops/adam/",
    )
    assert "/nvcc" not in out.split("No such file")[0], out
    assert "No such file or directory" in out
    assert "fused_adam_op" in out and "cpu_adam_op" in out, out


def test_gpu_image_smoke_runs_2x2_on_cpu(engine, gpu_image):
    result = imagekit(
        "smoke",
        gpu_image.ref,
        "--env",
        "DS_ACCELERATOR=cpu",
        "--workers",
        "2",
        "--slots",
        "2",
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    probes = marked(result.stderr, "IMAGEKIT_PROBE")
    assert sorted(p["rank"] for p in probes) == [0, 1, 2, 3]
    assert all(p["allreduce"] == 4 for p in probes)
    assert "-x DS_ACCELERATOR" in result.stdout + result.stderr
    # The image's label says rdma: smoke ran Open MPI 5's UCX PML (over UCX's TCP transport
    # here) and proved every rank selected it.
    assert "PML selected by 4 ranks: ucx" in result.stdout + result.stderr


# E1 (the platform's worked example) on the GPU image with DeepSpeed's CPU accelerator: Open
# MPI 5's spelling of the seed's launch line, and DS_ACCELERATOR passed to the ranks (Docker's
# ENV never reaches processes sshd starts: L8).
E1_OMPI5 = [
    "mpirun", "-np", "4", "--hostfile", "/etc/mpi/hostfile", "--allow-run-as-root",
    "--bind-to", "none", "--map-by", "slot", "--mca", "pml", "ob1",
    "-x", "PATH", "-x", "DS_ACCELERATOR",
    "python3", "cifar10_deepspeed.py", "--deepspeed", "--epochs", "2", "--stage", "2",
    "--dtype", "fp32", "--log-interval", "100", "--micro-batch-size", "16",
    "--gradient-accumulation-steps", "1",
]  # fmt: skip


def test_gpu_image_trains_e1_on_four_cpu_ranks(engine, gpu_image):
    """The DeepSpeed half of the GPU image on a host without GPUs: ZeRO stage 2 over 2
    workers x 2 slots with DS_ACCELERATOR=cpu; every rank on its host, the loss goes down."""
    result = imagekit(
        "smoke",
        gpu_image.ref,
        "--env",
        "DS_ACCELERATOR=cpu",
        "--timeout",
        "900",
        "--copy",
        f"{ROOT / 'examples' / 'cifar10_deepspeed.py'}:/workspace/cifar10_deepspeed.py",
        "--workdir",
        "/workspace",
        "--",
        *E1_OMPI5,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert_e1_trained(result.stderr)


@pytest.mark.parametrize("name", list(BROKEN_GPU))
def test_broken_gpu_variant_fails_exactly_its_checks(engine, gpu_image, tmp_path, name):
    extra, expected = BROKEN_GPU[name]
    ref = build(
        engine,
        tmp_path / name,
        f"imagekit-test/gpu-{name}:latest",
        f"FROM {gpu_image.ref}\n{extra}\n",
        {},
    )
    code, report, output = check_json(ref, tmp_path)
    assert code == 7, output
    failed = {r["id"]: r for r in report["results"] if r["status"] == "fail"}
    assert set(failed) == set(expected), output
    for check_id, evidence in expected.items():
        assert evidence in failed[check_id]["evidence"], failed
