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
