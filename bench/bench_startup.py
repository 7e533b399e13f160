"""Start-up: whole processes, as users run them, side by side in one run.

  python bench/bench_startup.py [--runs N] [--baseline REV]

imagekit's launch-line and render commands (a full render, and the same render again with
its inputs unchanged, written from the record) next to hpccm rendering the same stack
(bench/hpccm_recipe.py); with --baseline REV, the same imagekit commands from that git
revision (e.g. the commit before a start-up change) run in the same loop, so the ratio is
measured, not remembered. Medians of N runs, interleaved to spread the machine's noise.

Two floor rows say what a full render cannot go below, whatever imagekit's own code does: a
Python process that only imports Jinja2 and PyYAML (what rendering a template from a YAML
recipe takes), and one that also imports click and pydantic (the command line's and the
schema's libraries, which the brief asks for). They run in the same loop as the rest."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, table, tool  # noqa: E402

# (label, modules): each floor row is `python -c "import <modules>"` in the same interpreter.
FLOORS = [
    ("floor: Python + import jinja2, yaml", "import jinja2, yaml"),
    (
        "floor: Python + import jinja2, yaml, click, pydantic.BaseModel",
        "import jinja2, yaml, click; from pydantic import BaseModel",
    ),
]
MPIRUN = ["mpirun", "--workers", "2", "--slots", "8", "--gpu", "--", "python3", "train.py"]


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def checkout(rev: str, into: Path) -> Path:
    """The package tree of `rev` (git archive), importable with PYTHONPATH."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline", help="git revision to compare against (e.g. HEAD~5)")
    args = parser.parse_args()
    hpccm = tool("hpccm")
    hpccm = os.path.abspath(hpccm) if hpccm else None
    work = Path(tempfile.mkdtemp(prefix="imagekit-bench-startup-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(work / "cache")  # compiled templates, recorded renders
    trees = {"imagekit": ROOT}
    if args.baseline:
        trees[f"imagekit@{args.baseline}"] = checkout(args.baseline, work / "baseline")
    commands: dict[str, tuple[list[str], Path, dict[str, str]]] = {}
    for label, tree in trees.items():
        tree_env = {**env, "PYTHONPATH": str(tree)}
        run = [sys.executable, "-m", "imagekit"]
        commands[f"{label} mpirun (one line)"] = ([*run, *MPIRUN], tree, tree_env)
        out = work / f"render-{len(commands)}"
        render = [*run, "render", str(tree / "recipes/deepspeed-cu122.yaml"), "-o", str(out)]
        full_env = {**tree_env, "IMAGEKIT_RENDER_CACHE": "off"}
        commands[f"{label} render cu122"] = (render, tree, full_env)
        if tree is ROOT:  # the same render again, its inputs unchanged (rendercache.py)
            commands[f"{label} render cu122, inputs unchanged"] = (render, tree, tree_env)
    for label, statement in FLOORS:
        commands[label] = ([sys.executable, "-c", statement], work, env)
    if hpccm:
        recipe = str(ROOT / "bench/hpccm_recipe.py")
        commands["hpccm --recipe (same stack)"] = ([hpccm, "--recipe", recipe], work, env)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for argv, cwd, run_env in commands.values():  # warm the page cache and bytecode
        timed(argv, cwd, run_env)
    for _ in range(args.runs):
        for name, (argv, cwd, run_env) in commands.items():
            samples[name].append(timed(argv, cwd, run_env))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    anchor = medians.get("hpccm --recipe (same stack)")
    rows = []
    for name, value in medians.items():
        ratio = f"{value / anchor:.1f}x hpccm" if anchor else "hpccm not installed"
        rows.append((name, f"{value * 1000:.0f} ms", ratio))
    table(f"start-up, median of {args.runs} runs (whole processes)", rows)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
