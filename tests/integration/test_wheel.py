"""imagekit as users install it: sdist and wheel built by pypa/build, the wheel installed into
a fresh venv outside the checkout, and the commands run from there against the real engine.
An editable install finds files in the checkout that a wheel may lack; this test cannot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import RECIPES, ROOT
from .conftest import CPU_RECIPE


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The `imagekit` script of a venv holding only the wheel and its dependencies."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src)
    shutil.copytree(
        ROOT / "imagekit", src / "imagekit", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp_path_factory.mktemp("dist")
    # sdist first, then the wheel from the sdist: what `python -m build` does by default
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert len(list(dist.glob("imagekit-*.tar.gz"))) == 1
    (wheel,) = dist.glob("imagekit-*.whl")
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    return venv / "bin" / "imagekit"


def run(script: Path, *args: str, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{script.parent}:{env.get('PATH', '')}"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


def test_the_wheel_is_what_runs(installed, tmp_path):
    python = installed.parent / "python"
    out = subprocess.run(
        [str(python), "-c", "import imagekit; print(imagekit.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    assert out.startswith(str(installed.parent.parent)) and str(ROOT) not in out


def test_validate_and_render_from_the_wheel(installed, tmp_path):
    recipe = tmp_path / CPU_RECIPE.name
    shutil.copy(CPU_RECIPE, recipe)
    shutil.copy(CPU_RECIPE.with_suffix(".lock"), tmp_path)
    result = run(installed, "validate", recipe.name, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    result = run(installed, "render", recipe.name, "-o", "ctx", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    committed = ROOT / "dockerfiles" / "deepspeed-cpu"
    for rel in ("Dockerfile", "imagekit/sshd_config", "imagekit/apt-install.sh"):
        assert (tmp_path / "ctx" / rel).read_text() == (committed / rel).read_text(), rel
    assert (RECIPES / "deepspeed-cpu.yaml").exists()  # the checkout was only read


def test_check_from_the_wheel(installed, cpu_image, tmp_path):
    result = run(installed, "check", cpu_image.ref, "--report", "r.json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "PASSED" in result.stdout and (tmp_path / "r.json").is_file()


def test_smoke_from_the_wheel(installed, cpu_image, tmp_path):
    result = run(installed, "smoke", cpu_image.ref, "--workers", "2", "--slots", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "PASSED 2 workers x 1 slots" in result.stdout


def test_lint_cmd_from_the_wheel(installed, tmp_path):
    good = "mpirun -np 4 -npernode 2 --hostfile /etc/mpi/hostfile --allow-run-as-root python3 t.py"
    assert (
        run(installed, "lint-cmd", good, "--workers", "2", "--slots", "2", cwd=tmp_path).returncode
        == 0
    )
    bad = run(
        installed,
        "lint-cmd",
        "mpirun -np 3 --host a,b python3 t.py",
        "--workers",
        "2",
        "--slots",
        "2",
        cwd=tmp_path,
    )
    assert bad.returncode == 10 and "L2" in bad.stdout + bad.stderr


def test_adapt_from_the_wheel(installed, engine, ompi5_image, tmp_path):
    """adapt's context is package data too (its script, the apt script, the placeholder
    hostfile): an Open MPI 5 image without ssh needs all of them."""
    from imagekit.build.plan import make_plan
    from imagekit.recipe.loader import load_recipe

    from .conftest import OMPI5_RECIPE
    from .images import build
    from .test_adapt import PLAIN

    base = make_plan(load_recipe(OMPI5_RECIPE)).base_image
    source = build(
        engine, tmp_path / "src", "imagekit-test/wheel-adapt:src", PLAIN.format(base=base), {}
    )
    tag = "imagekit-test/wheel-adapted:1"
    try:
        result = run(installed, "adapt", source, "--tag", tag, "-o", "ctx", cwd=tmp_path)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        written = {p.name for p in (tmp_path / "ctx" / "imagekit-adapt").iterdir()}
        assert {"adapt.sh", "apt-install.sh", "hostfile-placeholder"} <= written, written
    finally:
        engine.remove_image(tag)
        engine.remove_image(source)
