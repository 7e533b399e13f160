"""Recorded renders (rendercache.py): a render of unchanged inputs writes the recorded context
without the render machinery; a change to the recipe, a recipe it extends, its lock or
imagekit itself renders again. Real recipes, real files; the full render is only watched
(counted), to tell which path ran."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from imagekit.build import rendercache
from imagekit.errors import RecipeError

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "deepspeed-cpu.yaml"


@pytest.fixture
def recipes(tmp_path, monkeypatch) -> Path:
    """The CPU recipe and its lock, copied; an empty render cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("IMAGEKIT_RENDER_CACHE", raising=False)
    directory = tmp_path / "recipes"
    directory.mkdir()
    shutil.copy(RECIPE, directory / RECIPE.name)
    shutil.copy(RECIPE.with_suffix(".lock"), directory / "deepspeed-cpu.lock")
    return directory


def render(recipe: Path, out: Path, monkeypatch, fast: bool) -> str:
    """Render through the cache; `fast` asserts that no full render happened, else that
    one did. The Dockerfile written."""
    from imagekit.build import render as full

    calls = []
    original = full.render_recipes
    with monkeypatch.context() as m:
        m.setattr(full, "render_recipes", lambda *a, **k: calls.append(a) or original(*a, **k))
        rendercache.render_recipes([recipe], out, Path("unused"))
    assert bool(calls) != fast, "a full render" if fast else "no full render"
    return (out / "Dockerfile").read_text()


def test_an_unchanged_recipe_is_written_from_the_record(recipes, tmp_path, monkeypatch):
    recipe = recipes / RECIPE.name
    cold = render(recipe, tmp_path / "a", monkeypatch, fast=False)
    warm = render(recipe, tmp_path / "b", monkeypatch, fast=True)
    assert warm == cold
    a = {p.relative_to(tmp_path / "a"): p for p in (tmp_path / "a").rglob("*")}
    b = {p.relative_to(tmp_path / "b"): p for p in (tmp_path / "b").rglob("*")}
    assert a.keys() == b.keys() and len(a) > 5
    for rel, path in a.items():
        assert path.stat().st_mode == b[rel].stat().st_mode, rel  # executable scripts too
        if path.is_file():
            assert path.read_bytes() == b[rel].read_bytes(), rel


def test_editing_the_recipe_renders_again(recipes, tmp_path, monkeypatch):
    recipe = recipes / RECIPE.name
    render(recipe, tmp_path / "a", monkeypatch, fast=False)
    text = recipe.read_text()
    recipe.write_text(text.replace("deepspeed-cpu", "deepspeed-cpu-edited", 1))
    render(recipe, tmp_path / "b", monkeypatch, fast=False)
    render(recipe, tmp_path / "c", monkeypatch, fast=True)  # recorded again


@pytest.mark.parametrize("swap", ["dev-zero", "fifo"])
def test_a_recorded_recipe_swapped_for_a_device_is_not_read(recipes, tmp_path, swap):
    """#38: the record's input check read a recipe swapped for a link to /dev/zero forever."""
    recipe = recipes / RECIPE.name
    rendercache.render_recipes([recipe], tmp_path / "a", Path("unused"))
    recipe.unlink()
    if swap == "dev-zero":
        recipe.symlink_to("/dev/zero")
    else:
        os.mkfifo(recipe)
    with pytest.raises(RecipeError, match="not a regular file"):
        rendercache.render_recipes([recipe], tmp_path / "b", Path("unused"))


def test_editing_a_recipe_it_extends_renders_again(recipes, tmp_path, monkeypatch):
    child = recipes / "child.yaml"
    child.write_text(f"extends: {RECIPE.name}\nname: child\n")
    render(child, tmp_path / "a", monkeypatch, fast=False)
    render(child, tmp_path / "b", monkeypatch, fast=True)
    parent = recipes / RECIPE.name
    parent.write_text(parent.read_text() + "\n# a comment changes the bytes\n")
    render(child, tmp_path / "c", monkeypatch, fast=False)


def test_a_lock_that_changes_or_goes_renders_again(recipes, tmp_path, monkeypatch):
    recipe = recipes / RECIPE.name
    lock = recipes / "deepspeed-cpu.lock"
    locked = render(recipe, tmp_path / "a", monkeypatch, fast=False)
    lock.unlink()
    unlocked = render(recipe, tmp_path / "b", monkeypatch, fast=False)
    assert unlocked != locked  # the lock's pins are gone from the Dockerfile
    render(recipe, tmp_path / "c", monkeypatch, fast=True)  # "no lock" is recorded too
    lock.write_text(RECIPE.with_suffix(".lock").read_text())
    assert render(recipe, tmp_path / "d", monkeypatch, fast=False) == locked


def test_another_imagekit_renders_again(recipes, tmp_path, monkeypatch):
    recipe = recipes / RECIPE.name
    render(recipe, tmp_path / "a", monkeypatch, fast=False)
    monkeypatch.setattr(rendercache, "package_fingerprint", lambda: "another imagekit")
    render(recipe, tmp_path / "b", monkeypatch, fast=False)


def test_a_damaged_record_renders_again(recipes, tmp_path, monkeypatch):
    recipe = recipes / RECIPE.name
    render(recipe, tmp_path / "a", monkeypatch, fast=False)
    (entry,) = rendercache.directory().iterdir()
    body = json.loads(entry.read_text())
    body["files"]["Dockerfile"] = 42
    entry.write_text(json.dumps(body))
    render(recipe, tmp_path / "b", monkeypatch, fast=False)
    entry.write_text("{not json")
    render(recipe, tmp_path / "c", monkeypatch, fast=False)


def test_a_bad_recipe_is_never_recorded(recipes, tmp_path, monkeypatch):
    bad = recipes / "bad.yaml"
    bad.write_text("name: bad\npython: {version: '3.11'}\nmpi: {implmentation: openmpi}\n")
    for _ in range(2):
        with pytest.raises(RecipeError):
            rendercache.render_recipes([bad], tmp_path / "out", Path("unused"))
    assert not rendercache.directory().exists()
    assert not (tmp_path / "out").exists()


def test_off_means_no_records(recipes, tmp_path, monkeypatch):
    monkeypatch.setenv("IMAGEKIT_RENDER_CACHE", "off")
    recipe = recipes / RECIPE.name
    render(recipe, tmp_path / "a", monkeypatch, fast=False)
    render(recipe, tmp_path / "b", monkeypatch, fast=False)
    assert not rendercache.directory().exists()
