"""The GPU recipe path with no CUDA base (cuda.source: wheels): schema, compat rules, plan and
render, and the --gpus request. Pure logic; the image itself is built in
tests/integration/test_gpu.py."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from imagekit.build.base import mmdebstrap_command
from imagekit.build.lockfile import locked_plan
from imagekit.build.plan import BootstrapSpec, ds_build_name, make_plan
from imagekit.build.render import render_context
from imagekit.cli.main import cli
from imagekit.engine.client import gpu_requests
from imagekit.errors import RecipeError
from imagekit.recipe.loader import load_recipe

from ..conftest import RECIPES

GPU = RECIPES / "deepspeed-gpu.yaml"


def gpu_recipe() -> dict:
    return yaml.safe_load(GPU.read_text())


def problems(tmp_path: Path, data: dict) -> list[str]:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    return info.value.problems


def test_gpu_plan_builds_ops_at_install_with_the_toolkit_in_a_builder_stage():
    plan = make_plan(load_recipe(GPU))
    assert plan.accel == "gpu" and plan.cuda_source == "wheels"
    stages = {s.name: s for s in plan.apt_stages}
    assert stages["cuda-toolkit"].packages[0] == "nvidia-cuda-toolkit"
    assert stages["cuda-toolkit"].after == "python"
    # PyPI's torch 2.6.0 is the cu124 build and has no local version tag
    assert plan.pip_steps[0].requirements == ("torch==2.6.0",)
    assert plan.ds_build_env["DS_BUILD_FUSED_ADAM"] == "1"
    assert plan.ds_build_env["DS_BUILD_CPU_ADAM"] == "1"
    assert plan.ds_build_env["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"
    assert plan.prebuild_ops == ()  # no JIT load in the image stage
    assert plan.expected["cuda"] == "12.4" and plan.expected["nccl"] == "2.21.5"
    assert plan.labels["io.imagekit.deepspeed.installed-ops"] == "FusedAdamBuilder,CPUAdamBuilder"
    assert plan.tags[0].endswith("-gpu-py313-cu124-debian13")


def test_the_toolkit_reaches_only_the_deepspeed_builder_stage():
    dockerfile = render_context(make_plan(load_recipe(GPU))).files["Dockerfile"]
    stages = dockerfile.split("\nFROM ")
    with_toolkit = [s.split()[2] for s in stages if "nvidia-cuda-toolkit" in s]
    assert with_toolkit == ["pip-deepspeed"]
    final = stages[-1]
    assert final.startswith("with-torch AS image")
    assert "COPY --from=pip-deepspeed /stage/ /" in final
    deepspeed = next(s for s in stages if s.startswith("with-torch AS pip-deepspeed"))
    assert "--no-build-isolation" in deepspeed and "DS_BUILD_FUSED_ADAM=1" in deepspeed
    # torch is copied once, into the lineage both the ops' stage (the toolkit above it) and
    # the image start from: that very layer is the image's (issue 39: no second copy's walk)
    with_torch = next(s for s in stages if s.startswith("python AS with-torch"))
    assert "COPY --from=pip-torch /stage/ /" in with_torch
    assert dockerfile.count("COPY --from=pip-torch") == 1


def test_locked_ops_are_built_from_a_fixed_directory_one_compile_at_a_time():
    """pip's random build directory and nvcc's process ID end up in the op libraries; the
    locked render builds the sdist where the path is always the same (bench_repro shows the
    rebuild is bit-identical)."""
    plan, _ = locked_plan(load_recipe(GPU), locked=True)
    dockerfile = render_context(plan).files["Dockerfile"]
    stage = next(
        s for s in dockerfile.split("\nFROM ") if s.startswith("with-torch AS pip-deepspeed")
    )
    run = stage[stage.index("pip download") :]
    download, build, install = (run.index(w) for w in ("pip download", "pip wheel", "pip install"))
    assert download < build < install
    assert "--require-hashes" in run[:build]  # the locked files, each checked
    assert "/tmp/imagekit-build/src/" in run[download:build]  # unpacked to a fixed path
    wheel = run[run.index("compgen") : install]
    assert "DS_BUILD_FUSED_ADAM=1" in wheel and "MAX_JOBS=1" in wheel
    assert "--no-build-isolation" in wheel
    assert "--no-index --find-links /tmp/imagekit-build/dist" in run[install:]
    # nvcc records header mtimes: with SOURCE_DATE_EPOCH, torch's stage clamps its files to it
    torch_stage = next(
        s for s in dockerfile.split("\nFROM ") if s.startswith("python AS pip-torch")
    )
    assert 'ARG SOURCE_DATE_EPOCH=""' in torch_stage
    assert 'touch -h -d "@$SOURCE_DATE_EPOCH"' in torch_stage
    # unlocked, pip installs from the index as before (nothing pinned to download)
    unlocked = render_context(make_plan(load_recipe(GPU))).files["Dockerfile"]
    assert "pip wheel" not in unlocked


@pytest.mark.parametrize("locked", [True, False], ids=["locked", "unlocked"])
def test_pip_stages_unset_an_empty_source_date_epoch(locked):
    """The ARG is declared with an empty default and so is set, empty, in every RUN of a
    build without --source-date-epoch; wheel (building DeepSpeed) reads that as an epoch
    and fails on int(''). A CI build without the epoch failed that way once."""
    plan = locked_plan(load_recipe(GPU), locked=True)[0] if locked else make_plan(load_recipe(GPU))
    dockerfile = render_context(plan).files["Dockerfile"]
    stages = [s for s in dockerfile.split("\nFROM ") if " AS pip-" in s.split("\n", 1)[0]]
    assert len(stages) == 3
    for stage in stages:
        runs = [
            r for r in stage.split("\nRUN ")[1:] if r.startswith("if [ -s /tmp/imagekit-build/ca")
        ]
        assert runs, stage[:40]
        for run in runs:
            assert 'if [ -z "$SOURCE_DATE_EPOCH" ]; then unset SOURCE_DATE_EPOCH; fi' in run


def test_cpu_recipes_keep_the_jit_prebuild_and_no_toolkit():
    plan = make_plan(load_recipe(RECIPES / "deepspeed-cpu.yaml"))
    assert plan.cuda_source is None and plan.ds_build_env == {}
    assert plan.prebuild_ops == ("ShareMemCommBuilder",)
    assert "cuda-toolkit" not in {s.name for s in plan.apt_stages}


def test_default_components_keep_old_base_names_and_mmdebstrap_lines(tmp_path):
    old = BootstrapSpec(suite="trixie", mirror="http://deb.debian.org/debian", epoch=1700000000)
    assert "components" not in old.as_dict()
    assert "--components" not in " ".join(mmdebstrap_command(old, tmp_path / "b.tar"))
    nonfree = BootstrapSpec(
        suite="trixie",
        mirror="http://deb.debian.org/debian",
        epoch=1700000000,
        components=("main", "contrib", "non-free"),
    )
    assert nonfree.image_ref != old.image_ref
    assert "--components=main,contrib,non-free" in mmdebstrap_command(nonfree, tmp_path / "b.tar")


def _set(data: dict, dotted: str, value) -> dict:
    data = copy.deepcopy(data)
    *parents, last = dotted.split(".")
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return data


@pytest.mark.parametrize(
    "dotted, value, message",
    [
        ("cuda.version", "12.6", "cuda.version: is 12.6, but torch 2.6.0's wheels carry CUDA 12.4"),
        ("nccl.version", "2.22.3", "nccl.version: is 2.22.3, but torch 2.6.0's wheels carry NCCL"),
        ("torch.variant", "cu126", "PyPI's torch 2.6.0 is the cu124 build, not cu126"),
        ("torch.version", "2.13.0", "no CUDA wheel rule for torch 2.13.0"),
        ("base.bootstrap.components", ["main"], "needs contrib and non-free in base.bootstrap"),
        ("base.bootstrap.components", ["main", "non-free"], "needs contrib in base.bootstrap"),
        (
            "base.bootstrap.components",
            ["non-free"],
            "base.bootstrap.components: must start with main",
        ),
        (
            "deepspeed.prebuild_ops",
            ["FusedAdamBuildr"],
            "deepspeed.prebuild_ops[0]: FusedAdamBuildr cannot be prebuilt at install time "
            "(did you mean FusedAdamBuilder?)",
        ),
        ("torch.variant", "cpu", "cuda.source: wheels needs torch.source: pip with a CUDA variant"),
    ],
)
def test_bad_gpu_recipes_get_one_clear_line(tmp_path, dotted, value, message):
    found = problems(tmp_path, _set(gpu_recipe(), dotted, value))
    assert any(message in p for p in found), found
    assert all("\n" not in p for p in found)


def test_bookworm_has_no_toolkit_rule(tmp_path):
    data = _set(gpu_recipe(), "base.bootstrap.suite", "bookworm")
    data["distro"]["version"] = "12"
    data["python"]["version"] = "3.11"
    data["openmpi"]["version"] = "4.1.4"
    found = problems(tmp_path, data)
    assert any("base.bootstrap.suite: Debian bookworm has no CUDA toolkit" in p for p in found)


def test_ds_build_names_come_from_the_table():
    assert ds_build_name("FusedAdamBuilder") == "DS_BUILD_FUSED_ADAM"
    assert ds_build_name("CPUAdamBuilder") == "DS_BUILD_CPU_ADAM"


@pytest.mark.parametrize("gpus, count", [("all", -1), ("2", 2)])
def test_gpus_become_device_requests(gpus, count):
    (request,) = gpu_requests(gpus)
    assert request["Count"] == count
    assert request["Capabilities"] == [["gpu"]]
    assert request["Driver"] == ""


def test_no_gpus_no_device_requests():
    assert gpu_requests(None) is None


@pytest.mark.parametrize("command", ["check", "smoke"])
@pytest.mark.parametrize("bad", ["0", "two", "-1"])
def test_bad_gpus_flag_is_one_line(command, bad):
    result = CliRunner().invoke(cli, [command, "some-image", "--gpus", bad])
    assert result.exit_code == 2
    assert "'--gpus'" in result.output and "Traceback" not in result.output


def test_smoke_env_must_be_var_equals_value():
    result = CliRunner().invoke(cli, ["smoke", "some-image", "--env", "DS_ACCELERATOR"])
    assert result.exit_code == 2
    assert "is not VAR=VALUE" in result.output
