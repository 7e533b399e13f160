"""GPU image benchmark: recipes/deepspeed-gpu.yaml (CUDA from PyPI wheels, nvcc from Debian's
toolkit in a builder stage) next to the CPU image, in one run: cold build, warm rebuild, peak
disk during the cold build, image size, layers, dive's efficiency and wasted bytes. Prints a
table; run with `.venv/bin/python bench/bench_gpu.py` (about 15 minutes cold, ~21 GB of disk).
"""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, dive, table, timed_build  # noqa: E402

from imagekit.engine.client import Engine  # noqa: E402

GPU = ROOT / "recipes" / "deepspeed-gpu.yaml"
CPU = ROOT / "recipes" / "deepspeed-cpu.yaml"
DOCKER_ROOT = "/var/lib/docker"
# nvidia/cuda cannot be pulled here, so its size is a published figure: Docker Hub's page for
# nvidia/cuda:11.8.0-devel-ubuntu20.04 as quoted in moby/moby#46425 (2.92 GB compressed, 7.37
# GB unpacked); the cudnn devel variants add about 2 GB (coreweave/nccl-tests#13).
NVIDIA_DEVEL = "7.37 GB + ~2 GB cuDNN (cited)"


class DiskPeak:
    """Samples used bytes on the engine's disk every second; `peak` is over the start."""

    def __init__(self, path: str = DOCKER_ROOT) -> None:
        self.path = path if Path(path).exists() else "/"
        self.start = shutil.disk_usage(self.path).used
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.peak = max(self.peak, shutil.disk_usage(self.path).used - self.start)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak / 1e9


def main() -> None:
    engine = Engine.connect()
    disk = DiskPeak()
    cold, cold_s, cold_log = timed_build(GPU, no_cache=True, locked=True)
    peak = disk.stop()
    print("\nwhere the cold build goes (its slowest steps; the rest is the builder):")
    for seconds, step in cold_log.slowest(8):
        print(f"  {seconds:7.1f} s  {step}")
    # As in bench_build.py: the legacy builder's first cached build after a --no-cache build
    # may rebuild from the first COPY on; it is reported, and the no-op rebuild measured after.
    _, after_cold_s, _ = timed_build(GPU, locked=True)
    _, warm_s, _ = timed_build(GPU, locked=True)
    cpu, cpu_s, _ = timed_build(CPU, locked=True)
    rows = []
    for name, built in (("gpu", cold), ("cpu", cpu)):
        info = engine.inspect_image(built.image_id)
        efficiency, wasted = dive(built.image_id)
        rows += [
            (f"{name}: image size", f"{info['Size'] / 1e9:.2f} GB", ""),
            (f"{name}: layers", str(len(info["RootFS"]["Layers"])), ""),
            (f"{name}: dive efficiency", efficiency, ">= 99.5%"),
            (f"{name}: dive wasted bytes", wasted, "< 10 MB"),
        ]
    table(
        f"imagekit build: {GPU.name} next to {CPU.name}",
        [
            ("gpu: cold build (--no-cache, --locked)", f"{cold_s:.1f} s", ""),
            ("gpu: first cached build after --no-cache", f"{after_cold_s:.1f} s", "(quirk)"),
            ("gpu: warm no-op rebuild", f"{warm_s:.1f} s", "<= 3 s"),
            ("gpu: peak disk during the cold build", f"{peak:.1f} GB", "(runner: ~14 GB free)"),
            ("gpu: peak disk / image size", f"{peak / (cold.size / 1e9):.2f}x", "<= 2x (issue 39)"),
            ("cpu: cached build", f"{cpu_s:.1f} s", ""),
            *rows,
            ("nvidia/cuda devel base alone, as published", NVIDIA_DEVEL, ""),
        ],
    )


if __name__ == "__main__":
    main()
