"""The GitHub workflows are checked here, not on GitHub: schema-valid, every `imagekit`
command they run exists with those flags, and the image matrix covers every recipe."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import click
import pytest
import yaml

from imagekit.cli.main import cli

from ..conftest import RECIPES, ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
CHECKER = shutil.which("check-jsonschema")


def test_there_are_workflows():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "images.yml"}


@pytest.mark.skipif(
    CHECKER is None and os.environ.get("CI") != "true",
    reason="check-jsonschema not installed (always installed in CI)",
)
@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_the_github_schema(path):
    result = subprocess.run(
        [CHECKER or "check-jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def imagekit_invocations(path) -> list[list[str]]:
    """Every `imagekit ...` command in the workflow's run steps, with ${{ }} filled in."""
    calls = []
    for job in yaml.safe_load(path.read_text())["jobs"].values():
        for step in job.get("steps", []):
            script = re.sub(r"\$\{\{[^}]*\}\}", "x", step.get("run", ""))
            for line in script.splitlines():
                # `imagekit` as the command word: at the start, after a shell operator, or after
                # `sudo -E env "PATH=$PATH"` (not `ruff check imagekit tests`).
                pattern = r'(?:^\s*|(?:&&|\|\||;|then)\s+|"PATH=\$PATH"\s+)imagekit (.*?)(?:\s(?:\|\||&&|\||>>)|$)'
                for match in re.finditer(pattern, line):
                    calls.append(shlex.split(match.group(1).replace('"$REGISTRY"', "reg")))
    return calls


def test_every_imagekit_command_in_the_workflows_exists():
    calls = [c for p in WORKFLOWS for c in imagekit_invocations(p)]
    assert len(calls) >= 6
    for args in calls:
        name, rest = args[0], args[1:]
        command = cli.get_command(click.Context(cli), name)
        assert command is not None, f"imagekit {name}: no such command"
        try:
            command.make_context(name, list(rest))
        except click.UsageError as exc:
            pytest.fail(f"imagekit {shlex.join(args)}: {exc}")


def test_a_wrong_flag_would_be_caught():
    command = cli.get_command(click.Context(cli), "check")
    with pytest.raises(click.UsageError):
        command.make_context("check", ["img", "--reprot", "x"])


def test_image_matrix_covers_every_recipe():
    matrix = yaml.safe_load((ROOT / ".github/workflows/images.yml").read_text())["jobs"]["image"][
        "strategy"
    ]["matrix"]["include"]
    assert {row["recipe"] for row in matrix} == {p.stem for p in RECIPES.glob("*.yaml")}
    for row in matrix:
        cuda = (
            "cuda:" in (RECIPES / f"{row['recipe']}.yaml").read_text()
            or "extends: deepspeed-cu" in (RECIPES / f"{row['recipe']}.yaml").read_text()
        )
        assert row["cpu"] is (not cuda), row
