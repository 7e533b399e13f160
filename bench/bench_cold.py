"""Cold CPU build against the hand-written yardstick (issue 39, goal 1): `imagekit build
recipes/deepspeed-cpu.yaml --no-cache --locked` beside bench/handwritten/Dockerfile (the same
content written by hand, single stage, same base and wheelhouse), both with --no-cache through
the same engine and builder, alternating which goes first, `--runs` times. Then one imagekit
build with --source-date-epoch (normalisation) to say what that adds. Prints a table.

    python bench/bench_cold.py [--runs N] [--logs DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT  # noqa: E402

from imagekit.build.plan import make_plan  # noqa: E402
from imagekit.engine.client import Engine  # noqa: E402
from imagekit.recipe.loader import load_recipe  # noqa: E402

RECIPE = ROOT / "recipes" / "deepspeed-cpu.yaml"
HANDWRITTEN = ROOT / "bench" / "handwritten" / "Dockerfile"
CA = Path(os.environ.get("IMAGEKIT_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"))
WHEELHOUSE = Path(os.environ.get("IMAGEKIT_WHEELHOUSE", ROOT / ".cache" / "wheelhouse"))


def imagekit_build(*flags: str, name: str = "warm-up", logs: Path | None = None) -> float:
    """One cold imagekit build's seconds; its plain log (step times) kept in `logs`."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "imagekit", "build", str(RECIPE), "--no-cache", "--locked"]
        + ["--plain", "--ca-bundle", str(CA), "--wheelhouse", str(WHEELHOUSE), *flags],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"imagekit build failed:\n{result.stderr[-3000:]}")
    if logs is not None:
        (logs / f"imagekit-{name}.log").write_text(result.stdout + result.stderr)
    return time.monotonic() - started


def cold_build(engine: Engine, context: Path, **kwargs) -> tuple[float, str]:
    """One `--no-cache` build of `context` through the engine API: (seconds, image ID)."""
    started = time.monotonic()
    outcome = engine.build(context, report=lambda event: None, no_cache=True, **kwargs)
    return time.monotonic() - started, outcome.image_id


def handwritten_build(engine: Engine, context: Path, base: str) -> tuple[float, str]:
    return cold_build(engine, context, build_args={"BASE": base})


def _context(into: Path) -> Path:
    shutil.copy(HANDWRITTEN, into / "Dockerfile")
    shutil.copy(CA, into / "ca.pem")
    (into / "wheels").mkdir()
    for wheel in WHEELHOUSE.glob("torch-2.13.0*.whl"):
        shutil.copy(wheel, into / "wheels" / wheel.name)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--logs", type=Path, help="keep each imagekit build's log (step times)")
    args = parser.parse_args()
    runs, logs = args.runs, args.logs
    if logs is not None:
        logs.mkdir(parents=True, exist_ok=True)
    engine = Engine.connect()
    plan = make_plan(load_recipe(RECIPE))
    imagekit_build(
        logs=logs
    )  # the base (bootstrapped once, shared by both) and a warm pip/apt path
    rows, ours, theirs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        context = _context(Path(tmp))
        for run in range(1, runs + 1):
            if run % 2:
                a = imagekit_build(name=f"run{run}", logs=logs)
                b, hand_id = handwritten_build(engine, context, plan.base_image)
            else:
                b, hand_id = handwritten_build(engine, context, plan.base_image)
                a = imagekit_build(name=f"run{run}", logs=logs)
            ours.append(a)
            theirs.append(b)
            rows.append([str(run), f"{a:.1f} s", f"{b:.1f} s", f"{a / b:.2f}x"])
        normalized = imagekit_build(
            "--source-date-epoch", "1700000000", name="normalized", logs=logs
        )
    size_ours = engine.inspect_image(plan.image)["Size"] / 1e9
    size_hand = engine.inspect_image(hand_id)["Size"] / 1e9
    engine.api.remove_image(hand_id, force=True)
    median = statistics.median(ours) / statistics.median(theirs)
    rows.append(["median", "", "", f"{median:.2f}x"])
    print(f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores\n")
    print("| run | `imagekit build --no-cache --locked` | hand-written | ratio |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nsizes: imagekit {size_ours:.2f} GB, hand-written {size_hand:.2f} GB")
    print(f"with --source-date-epoch (normalised): {normalized:.1f} s")


if __name__ == "__main__":
    main()
