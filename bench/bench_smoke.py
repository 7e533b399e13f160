"""Smoke benchmark: the 2 workers x 2 slots run of the CPU image from start to cleanup, with
container start-up broken out, for the probe and for the seed's DeepSpeed example (E1)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, table  # noqa: E402

from imagekit.build.plan import make_plan  # noqa: E402
from imagekit.recipe.loader import load_recipe  # noqa: E402
from imagekit.run.smoke import SmokeOptions, smoke  # noqa: E402

IMAGE = make_plan(load_recipe(ROOT / "recipes" / "deepspeed-cpu.yaml")).image
E1 = (
    "mpirun -np 4 --hostfile /etc/mpi/hostfile --allow-run-as-root -bind-to none -map-by slot "
    "-mca pml ob1 -mca btl ^openib -x PATH python3 cifar10_deepspeed.py --deepspeed --epochs 6 "
    "--stage 2 --dtype fp32 --log-interval 100 --micro-batch-size 16 "
    "--gradient-accumulation-steps 1"
).split()


def run(options: SmokeOptions):
    started = time.monotonic()
    result = smoke(IMAGE, options, lambda event: None)
    return result, time.monotonic() - started


def main() -> None:
    probe, probe_s = run(SmokeOptions())
    example = ROOT / "examples" / "cifar10_deepspeed.py"
    e1, e1_s = run(
        SmokeOptions(
            command=tuple(E1),
            copies=((example, "/workspace/cifar10_deepspeed.py"),),
            workdir="/workspace",
        )
    )
    table(
        f"imagekit smoke: {IMAGE}, 2 workers x 2 slots",
        [
            ("probe: start to cleanup", f"{probe_s:.1f} s", "<= 60 s"),
            ("probe: containers up", f"{probe.timings['containers up']:.1f} s", "<= 5 s"),
            ("probe: verdict", "PASSED" if probe.passed else "FAILED", ""),
            ("E1 ZeRO-2 training: start to cleanup", f"{e1_s:.1f} s", "<= 60 s"),
            ("E1: containers up", f"{e1.timings['containers up']:.1f} s", "<= 5 s"),
            ("E1: mpirun (training)", f"{e1.timings.get('mpirun', 0):.1f} s", ""),
            ("E1: verdict", "PASSED" if e1.passed else "FAILED", ""),
        ],
    )


if __name__ == "__main__":
    main()
