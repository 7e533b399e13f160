"""`imagekit diff` of two real images: layers read in place against the export, side by side.

  python bench/bench_diff.py [IMAGE_A IMAGE_B] [--runs N]

Default images: the CPU image and its non-root variant (build both first: `imagekit build
recipes/deepspeed-cpu.yaml`, the same for deepspeed-cpu-nonroot.yaml). Whole `imagekit diff`
processes, alternated, medians; the export side is IMAGEKIT_LAYERS=export, the way diff read
every image before it read the engine's layer directories. Both must print the same diff."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table  # noqa: E402

DEFAULT = (
    "deepspeed-training:23.08-cpu-py311-debian12",
    "deepspeed-training:23.08-cpu-py311-debian12-nonroot",
)


def timed_diff(a: str, b: str, layers: str) -> tuple[float, str]:
    env = {**os.environ, "IMAGEKIT_LAYERS": layers}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "imagekit", "diff", a, b, "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode not in (0, 1):
        sys.exit(f"imagekit diff failed ({result.returncode}): {result.stderr.strip()}")
    return time.monotonic() - started, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images", nargs="*", default=list(DEFAULT))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if len(args.images) != 2:
        parser.error("give two images, or none for the default pair")
    a, b = args.images
    samples: dict[str, list[float]] = {"auto": [], "export": []}
    outputs: dict[str, set[str]] = {"auto": set(), "export": set()}
    for _ in range(args.runs):
        for layers in samples:
            seconds, out = timed_diff(a, b, layers)
            samples[layers].append(seconds)
            outputs[layers].add(out)
    in_place, exported = (statistics.median(samples[k]) for k in ("auto", "export"))
    same = outputs["auto"] == outputs["export"] and len(outputs["auto"]) == 1
    rows = [
        (f"imagekit diff, layers in place (median of {args.runs})", f"{in_place:.1f} s", ""),
        ("  runs", " ".join(f"{s:.1f}" for s in samples["auto"]), ""),
        (f"imagekit diff, IMAGEKIT_LAYERS=export (median of {args.runs})", f"{exported:.1f} s", ""),
        ("  runs", " ".join(f"{s:.1f}" for s in samples["export"]), ""),
        ("ratio in place / export", f"{in_place / exported:.2f}", ""),
        ("same diff both ways", "yes" if same else "NO", "yes"),
    ]
    table(f"imagekit diff {a} {b}", rows)
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
