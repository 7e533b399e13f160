"""The wheel users install holds every file of the package tree: an editable install finds
files in the checkout that a wheel would silently lack (the check suite's pytest.ini once)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ..conftest import ROOT

PACKAGE = ROOT / "imagekit"


def package_tree() -> set[str]:
    """Every file under imagekit/ that a checkout has, bytecode aside."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built by pypa/build from a copy of the project (nothing written into the
    checkout: setuptools leaves build/ and *.egg-info next to its sources)."""
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(PACKAGE, src / "imagekit", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (found,) = out.glob("imagekit-*.whl")
    return found


def test_wheel_holds_every_package_file(wheel):
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = {name for name in archive.namelist() if name.startswith("imagekit/")}
    missing = sorted(package_tree() - in_wheel)
    assert not missing, f"the wheel lacks {missing}: add them to [tool.setuptools.package-data]"


def test_wheel_holds_the_check_suite_and_templates(wheel):
    """The files the first broken release lacked, named, so this test cannot pass empty."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "imagekit/checks/suite/pytest.ini" in names
    assert "imagekit/templates/Dockerfile.j2" in names
    assert any(n.startswith("imagekit/checks/suite/checks_") for n in names)
    assert "imagekit-0.1.0.dist-info/entry_points.txt" in {
        n for n in names if n.endswith("entry_points.txt")
    }


def test_git_tracks_every_file_of_the_package():
    """A clean clone is what CI and users build from: no package file may be ignored by git
    (`.gitignore`'s `build/` once matched imagekit/build/ and left its new modules out)."""
    result = subprocess.run(
        ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "imagekit"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    ignored = [
        name
        for name in result.stdout.splitlines()
        if "__pycache__" not in name and not name.endswith(".pyc")
    ]
    assert result.returncode == 0 and ignored == []


def test_twine_accepts_the_sdist_and_the_wheel(tmp_path):
    """What PyPI would take: metadata, long description (the README) and file names."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(PACKAGE, src / "imagekit", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    files = sorted(str(p) for p in out.iterdir())
    assert len(files) == 2  # the sdist and the wheel
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
