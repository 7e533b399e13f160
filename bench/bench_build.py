"""Build benchmark for recipes/deepspeed-cpu.yaml: cold build, warm no-op rebuild, a rebuild
after bumping only DeepSpeed (and how many layers below DeepSpeed were rebuilt), size, layer
count and dive's image efficiency. Prints a table; run with `.venv/bin/python bench/bench_build.py`.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, dive, table, timed_build, timed_lock  # noqa: E402

from imagekit.engine.client import Engine  # noqa: E402

RECIPE = ROOT / "recipes" / "deepspeed-cpu.yaml"
BUMPED_DEEPSPEED = "0.19.7"


def main() -> None:
    cold, cold_s, _ = timed_build(RECIPE, no_cache=True)
    # Measured here: the legacy builder's first cached build after a --no-cache build may
    # rebuild from the first COPY on; it is reported, and the no-op rebuild measured after it.
    _, after_cold_s, _ = timed_build(RECIPE)
    _, warm_s, _ = timed_build(RECIPE)
    with tempfile.TemporaryDirectory(dir=ROOT / "recipes") as tmp:
        bumped = Path(tmp) / "bumped.yaml"
        bumped.write_text(
            f"extends: ../deepspeed-cpu.yaml\nname: deepspeed-cpu-bump\n"
            f'deepspeed: {{version: "{BUMPED_DEEPSPEED}"}}\n'
            f"image: {{name: bench/deepspeed-bump}}\n"
        )
        # A variant is locked on its own; its apt pins equal the parent's, so the layers
        # below DeepSpeed stay shared.
        _, bump_lock_s = timed_lock(bumped)
        _, bump_s, bump_log = timed_build(bumped)
    misses = bump_log.misses_before("FROM python AS pip-deepspeed")
    info = Engine.connect().inspect_image(cold.image_id)
    efficiency, wasted = dive(cold.image_id)
    table(
        f"imagekit build: {RECIPE.name}",
        [
            ("cold build (--no-cache)", f"{cold_s:.1f} s", ""),
            ("first cached build after --no-cache", f"{after_cold_s:.1f} s", "(builder quirk)"),
            ("warm no-op rebuild", f"{warm_s:.1f} s", "<= 3 s"),
            (
                f"rebuild after DeepSpeed -> {BUMPED_DEEPSPEED}",
                f"{bump_s:.1f} s",
                f"<= 25% of cold ({bump_s / cold_s:.0%})",
            ),
            ("imagekit lock of the bumped variant", f"{bump_lock_s:.1f} s", "(before it)"),
            ("cache misses below the DeepSpeed layer", str(len(misses)), "0"),
            ("image size", f"{info['Size'] / 1e9:.2f} GB", ""),
            ("layers", str(len(info["RootFS"]["Layers"])), ""),
            ("dive efficiency", efficiency, ">= 99.5%"),
            ("dive wasted bytes", wasted, "< 10 MB"),
        ],
    )
    for miss in misses:
        print(f"  rebuilt below DeepSpeed: {miss}")
    print("\nwhere the DeepSpeed-bump rebuild goes (its slowest steps; the rest is the builder):")
    for seconds, step in bump_log.slowest(6):
        print(f"  {seconds:6.1f} s  {step}")


if __name__ == "__main__":
    main()
