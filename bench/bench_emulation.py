"""What emulation costs (A1): `imagekit check` and `imagekit smoke` (2 workers x 2 slots) of
deepspeed-cpu (amd64, native here) and deepspeed-cpu-arm64 (arm64, under qemu on an amd64
host), alternating in one run, whole CLI processes as users run them; medians and the ratio.
Both images must be built first (`imagekit build RECIPE`); their build times are in the
build output and in docs/how-to/arm64.md. Prints a table.

    python bench/bench_emulation.py [--runs N]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT  # noqa: E402

from imagekit.build.plan import make_plan  # noqa: E402
from imagekit.recipe.loader import load_recipe  # noqa: E402

IMAGES = {
    "amd64": make_plan(load_recipe(ROOT / "recipes" / "deepspeed-cpu.yaml")).image,
    "arm64": make_plan(load_recipe(ROOT / "recipes" / "deepspeed-cpu-arm64.yaml")).image,
}
COMMANDS = {
    "check": ["check"],
    "smoke 2x2": ["smoke", "--workers", "2", "--slots", "2"],
}


def timed(words: list[str], image: str) -> float:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "imagekit", words[0], image, *words[1:]],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"imagekit {words[0]} {image} failed:\n{result.stdout[-2000:]}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    seconds: dict[tuple[str, str], list[float]] = {}
    for _ in range(runs):
        for name, words in COMMANDS.items():
            for arch, image in IMAGES.items():  # alternating: both see the same machine
                seconds.setdefault((name, arch), []).append(timed(words, image))
    rows = []
    for name in COMMANDS:
        native = statistics.median(seconds[(name, "amd64")])
        emulated = statistics.median(seconds[(name, "arm64")])
        rows.append([name, f"{native:.1f} s", f"{emulated:.1f} s", f"{emulated / native:.2f}x"])
    print(f"{time.strftime('%Y-%m-%d')}, {platform.machine()} host, medians of {runs} runs\n")
    print("| command | amd64 (native) | arm64 (qemu) | ratio |\n| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
