"""Platforms (A1) in recipes, plans, tags, labels and locks: the default platform shows
nowhere (recipes, tags and locks made before platforms existed keep their names); another
platform is named in its tags, its label, its base and its lock file."""

from __future__ import annotations

import pytest

from imagekit.build.lockfile import lock_path, locked_plan
from imagekit.build.plan import make_plan
from imagekit.errors import LockError, RecipeError
from imagekit.recipe.loader import load_recipe

from ..conftest import RECIPES
from .test_cli import run

CPU = RECIPES / "deepspeed-cpu.yaml"


def _recipe(tmp_path, platforms: str, base: str = ""):
    path = tmp_path / "multi.yaml"
    path.write_text(f"extends: {CPU}\nname: multi\nplatforms: {platforms}\n{base}")
    return path


def test_a_recipe_without_platforms_is_amd64_and_unchanged():
    loaded = load_recipe(CPU)
    plan = make_plan(loaded)
    assert loaded.recipe.platforms == ("linux/amd64",) and plan.platform == "linux/amd64"
    assert "io.imagekit.platform" not in plan.labels
    assert plan.bootstrap.architecture == "amd64" and "architecture" not in plan.bootstrap.as_dict()
    assert lock_path(CPU, plan.platform) == CPU.with_suffix(".lock")


def test_an_arm64_plan_names_its_platform_in_tags_label_base_and_lock(tmp_path):
    loaded = load_recipe(_recipe(tmp_path, "[linux/amd64, linux/arm64]"))
    amd64, arm64 = make_plan(loaded), make_plan(loaded, "linux/arm64")
    assert amd64.platform == "linux/amd64"  # the first listed is the default
    assert arm64.tags == tuple(f"{t}-arm64" for t in amd64.tags)
    assert arm64.moving_tags == tuple(f"{t}-arm64" for t in amd64.moving_tags)
    assert arm64.labels["io.imagekit.platform"] == "linux/arm64"
    assert arm64.bootstrap.architecture == "arm64"
    assert arm64.base_image != amd64.base_image  # never the amd64 base under another name
    assert lock_path(loaded.path, arm64.platform).name == "multi.arm64.lock"


def test_the_first_platform_is_the_default(tmp_path):
    loaded = load_recipe(_recipe(tmp_path, "[linux/arm64]"))
    assert make_plan(loaded).platform == "linux/arm64"


@pytest.mark.parametrize(
    "platforms, base, message",
    [
        ("[linux/arm64, linux/arm64]", "", "lists a platform twice"),
        ("[linux/s390x]", "", "platforms.0"),
        ("[]", "", "platforms"),
        ("[linux/arm64]", "base: {image: debian:12, bootstrap: null}\n", "needs base.bootstrap"),
    ],
)
def test_a_wrong_platforms_field_is_one_line(tmp_path, platforms, base, message):
    with pytest.raises(RecipeError) as info:
        load_recipe(_recipe(tmp_path, platforms, base))
    assert len(info.value.problems) == 1 and message in info.value.problems[0]


def test_a_platform_the_recipe_does_not_list_is_refused_naming_field_and_flag():
    with pytest.raises(RecipeError) as info:
        make_plan(load_recipe(CPU), "linux/arm64")
    assert "platforms: linux/amd64; not linux/arm64 (--platform)" in str(info.value)


def test_a_missing_arm64_lock_names_the_command_with_its_platform(tmp_path):
    loaded = load_recipe(_recipe(tmp_path, "[linux/amd64, linux/arm64]"))
    with pytest.raises(LockError) as info:
        locked_plan(loaded, locked=True, platform="linux/arm64")
    assert "multi.arm64.lock: no lock file" in info.value.message
    assert info.value.message.endswith("--platform linux/arm64")


def test_build_dry_run_renders_the_arm64_plan(tmp_path, capsys):
    recipe = _recipe(tmp_path, "[linux/amd64, linux/arm64]")
    code, out, err = run(capsys, "build", str(recipe), "--platform", "linux/arm64", "--dry-run")
    assert code == 0, out + err
    assert 'io.imagekit.platform="linux/arm64"' in out
    code, out, err = run(capsys, "build", str(CPU), "--platform", "linux/arm64", "--dry-run")
    assert code == 2 and "not linux/arm64 (--platform)" in err and "Traceback" not in err


ARM64 = RECIPES / "deepspeed-cpu-arm64.yaml"


@pytest.mark.parametrize(
    ("torch", "message"),
    [
        ('{version: "2.11.0"}', "torch 2.11.0 for linux/arm64 is a CUDA build (cu130)"),
        ('{version: "2.13.0"}', "its CPU builds end at 2.10"),
        ("{variant: cu126}", "torch 2.9.1 for linux/arm64 is a CPU build; use cpu"),
    ],
)
def test_pypi_torch_for_arm64_is_what_pypi_has(tmp_path, torch, message):
    path = tmp_path / "arm.yaml"
    path.write_text(f"extends: {ARM64}\nname: arm\ntorch: {torch}\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert any(message in p and "Traceback" not in p for p in info.value.problems), (
        info.value.problems
    )


def test_pypi_torch_for_arm64_within_the_cpu_builds_or_from_an_index_passes(tmp_path):
    load_recipe(ARM64)
    path = tmp_path / "arm.yaml"
    path.write_text(
        f"extends: {ARM64}\nname: arm\n"
        'torch: {version: "2.13.0", index_url: "https://download.pytorch.org/whl/cpu"}\n'
    )
    assert load_recipe(path).recipe.torch.version == "2.13.0"


def test_publish_takes_a_recipes_image_per_platform_for_one_index():
    from imagekit.build.targets import publish_targets

    ompi5 = str(RECIPES / "deepspeed-cpu-ompi5.yaml")
    images, moving = publish_targets((ompi5,), ("linux/amd64", "linux/arm64"))
    assert images == (
        "deepspeed-training:23.08-cpu-py313-debian13",
        "deepspeed-training:23.08-cpu-py313-debian13-arm64",
    )
    assert moving == ("latest-cpu-ompi5",)


@pytest.mark.parametrize("command", ["check", "smoke"])
def test_a_platform_for_an_image_target_is_one_line(capsys, command):
    code, _, err = run(capsys, command, "some/image:1", "--platform", "linux/arm64")
    assert code == 2 and err.count("\n") == 1, err
    assert "--platform linux/arm64: picks a recipe's image; some/image:1 is an image" in err


def test_a_recipe_target_resolves_to_the_named_platforms_image():
    from imagekit.build.targets import resolve_target

    ompi5 = RECIPES / "deepspeed-cpu-ompi5.yaml"
    assert resolve_target(str(ompi5), "linux/arm64") == (
        "deepspeed-training:23.08-cpu-py313-debian13-arm64",
        ompi5,
    )
    with pytest.raises(RecipeError, match="not linux/arm64"):
        resolve_target(str(CPU), "linux/arm64")


def test_a_cpu_torch_from_pypi_for_amd64_is_warned_of(tmp_path):
    from imagekit.recipe import compat

    path = tmp_path / "amd.yaml"
    path.write_text(f"extends: {ARM64}\nname: amd\nplatforms: [linux/amd64, linux/arm64]\n")
    warnings = compat.warnings(load_recipe(path).recipe)
    assert any("PyPI's torch for linux/amd64 is a CUDA build" in w for w in warnings), warnings


def test_pypi_torch_is_pinned_without_a_local_version_where_pypi_has_none():
    from imagekit.build.plan import torch_pin

    assert torch_pin(load_recipe(ARM64).recipe, "linux/arm64") == "2.9.1"
    assert torch_pin(load_recipe(CPU).recipe) == "2.13.0+cpu"
    assert make_plan(load_recipe(ARM64)).expected["torch"] == "2.9.1"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("x.lock", ("x", "linux/amd64")),
        ("x.arm64.lock", ("x", "linux/arm64")),
        ("deepspeed-cpu-arm64.arm64.lock", ("deepspeed-cpu-arm64", "linux/arm64")),
        ("deepspeed-cpu-arm64.lock", ("deepspeed-cpu-arm64", "linux/amd64")),
    ],
)
def test_a_lock_name_says_its_recipe_and_platform(name, expected):
    from imagekit.platforms import lock_suffix, split_lock_name

    assert split_lock_name(name) == expected
    assert expected[0] + lock_suffix(expected[1]) == name


GH200 = RECIPES / "deepspeed-gh200.yaml"


def test_the_gh200_recipe_is_pypis_cuda_13_torch_for_arm64_with_no_toolkit_stage():
    plan = make_plan(load_recipe(GH200))
    assert plan.platform == "linux/arm64" and plan.image.endswith("-cu130-debian13-arm64")
    assert plan.expected["torch"] == "2.11.0"  # PyPI's wheel: no local version
    assert not plan.cuda_toolkit_stage and not plan.ds_build_env  # no op compiled here


def test_ops_prebuilt_against_cuda_13_wheels_need_a_cuda_13_nvcc(tmp_path):
    path = tmp_path / "gh.yaml"
    path.write_text(
        f"extends: {GH200}\nname: gh\ndeepspeed: {{prebuild_ops: [FusedAdamBuilder]}}\n"
    )
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert any("nvcc is CUDA 12.4.131, torch's wheels CUDA 13.0" in p for p in info.value.problems)
