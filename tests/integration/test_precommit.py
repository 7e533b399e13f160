"""The pre-commit hooks (.pre-commit-hooks.yaml), run by pre-commit itself against a fresh
repository: pre-commit installs this checkout into its own environment, as users get it."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from .conftest import CPU_RECIPE, ROOT

GOOD_LINE = (
    "mpirun -np 4 -npernode 2 --hostfile /etc/mpi/hostfile --allow-run-as-root -bind-to none "
    "-map-by slot -mca pml ob1 -mca btl ^openib -mca btl_tcp_if_exclude lo,docker0 "
    "-mca oob_tcp_if_exclude lo,docker0 -x PATH -x LD_LIBRARY_PATH -timeout 3600 -quiet "
    "python train.py\n"
)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    repo = tmp_path_factory.mktemp("precommit-user")
    (repo / "recipes").mkdir()
    shutil.copy(CPU_RECIPE, repo / "recipes" / "good.yaml")
    (repo / "recipes" / "bad.yaml").write_text(
        CPU_RECIPE.read_text().replace('version: "3.11"', 'version: "2.7"')
    )
    (repo / "good.mpirun").write_text(GOOD_LINE)
    (repo / "bad.mpirun").write_text(GOOD_LINE.replace("python train.py", "deepspeed train.py"))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


def try_repo(project, hook: str, *files: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), hook, "--files", *files],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_validate_hook_passes_a_good_recipe_and_names_a_bad_one(project):
    assert try_repo(project, "imagekit-validate", "recipes/good.yaml").returncode == 0
    bad = try_repo(project, "imagekit-validate", "recipes/bad.yaml")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "recipes/bad.yaml: python" in bad.stdout


def test_the_lint_hook_checks_each_launch_line(project):
    good = try_repo(project, "imagekit-lint-cmd", "good.mpirun")
    assert good.returncode == 0, good.stdout + good.stderr
    bad = try_repo(project, "imagekit-lint-cmd", "good.mpirun", "bad.mpirun")
    assert bad.returncode == 1 and "L12" in bad.stdout, bad.stdout + bad.stderr
