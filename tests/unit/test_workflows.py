"""The GitHub workflows and the repository's action (action.yml) are checked here, not on
GitHub: schema-valid, every `imagekit` command they run exists with those flags, inputs reach
the action's scripts only through the environment, and the image matrix covers every recipe
through the action."""

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
ACTION = ROOT / "action.yml"
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


@pytest.mark.skipif(
    CHECKER is None and os.environ.get("CI") != "true",
    reason="check-jsonschema not installed (always installed in CI)",
)
def test_the_action_matches_the_github_schema():
    result = subprocess.run(
        [CHECKER or "check-jsonschema", "--builtin-schema", "vendor.github-actions", str(ACTION)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _steps(path) -> list[dict]:
    document = yaml.safe_load(path.read_text())
    if "runs" in document:  # an action
        return document["runs"]["steps"]
    return [step for job in document["jobs"].values() for step in job.get("steps", [])]


def test_the_action_never_splices_an_input_into_a_script():
    """`${{ inputs.x }}` inside `run:` is script injection (a recipe path with `$(...)`); the
    action hands every input to its scripts as an environment variable."""
    for step in _steps(ACTION):
        assert "${{" not in step.get("run", ""), step["name"]
    images = yaml.safe_load((ROOT / ".github/workflows/images.yml").read_text())
    uses = [s.get("uses") for s in images["jobs"]["image"]["steps"]]
    assert "./" in uses  # the repository's own images workflow runs through the action


def imagekit_invocations(path) -> list[list[str]]:
    """Every `imagekit ...` command in the run steps, with ${{ }} filled in."""
    calls = []
    for step in _steps(path):
        script = re.sub(r"\$\{\{[^}]*\}\}", "x", step.get("run", ""))
        script = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", script)  # ${VAR:-default}: the default
        for line in script.splitlines():
            # `imagekit` as the command word: at the start, after a shell operator, or after
            # `sudo -E env "PATH=$PATH"` (not `ruff check imagekit tests`).
            pattern = r'(?:^\s*|(?:&&|\|\||;|then)\s+|"PATH=\$PATH"\s+)imagekit (.*?)(?:\s(?:\|\||&&|\||>>)|$)'
            for match in re.finditer(pattern, line):
                calls.append(shlex.split(match.group(1).replace('"$REGISTRY"', "reg")))
    return calls


def test_every_imagekit_command_in_the_workflows_exists():
    calls = [c for p in [*WORKFLOWS, ACTION] for c in imagekit_invocations(p)]
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
