"""The GPU half of an image, proven without a GPU (R12): every shared library of torch, its
nvidia-* wheels and DeepSpeed's prebuilt ops resolves, save the driver's own libraries that
the NVIDIA container runtime injects at run time, and each prebuilt op imports."""

from __future__ import annotations

import json
import shlex
from importlib import resources

import pytest

from imagekit.checks import check
from imagekit.checks.facts import expect, has
from imagekit.plan import LABEL_PREFIX

OPS_LABEL = f"{LABEL_PREFIX}.deepspeed.installed-ops"


def cuda_probe(host, ops: str) -> dict | None:
    """One exec: the probe script (package data) read by the image's python3 from stdin."""
    script = resources.files("imagekit").joinpath("data/cuda_probe.py").read_text("utf-8")
    result = host.run(f"python3 - {shlex.quote(ops)} <<'IMAGEKIT_PROBE'\n{script}\nIMAGEKIT_PROBE")
    if result.rc != 0:
        pytest.fail(f"the library probe failed: {result.stderr.strip()[-300:]}", pytrace=False)
    return json.loads(result.stdout.strip().splitlines()[-1])


@check(
    "cuda-libraries",
    "R12",
    "torch's, the CUDA wheels' and the prebuilt ops' libraries resolve; each prebuilt op imports",
    fix="install the missing library (or the wheel that carries it); rebuild ops against the "
    "image's torch",
)
def check_cuda_libraries(ctx, host, note):
    if not has(host, "python3") or not has(host, "ldd"):
        pytest.skip("no python3 or ldd")
    found = cuda_probe(host, ctx.labels.get(OPS_LABEL, ""))
    if found.get("torch") is None:
        pytest.skip("no torch in the image")
    driver = set(ctx.profile.driver_libraries)
    broken = {
        lib: gone
        for lib, names in found["unresolved"].items()
        if (gone := [name for name in names if name not in driver])
    }
    counts = ", ".join(f"{n} {group}" for group, n in found["counts"].items() if n)
    expect(
        not broken,
        "; ".join(f"{lib}: {', '.join(names)} not found" for lib, names in sorted(broken.items())),
    )
    failed = {op: why for op, why in found["ops"].items() if why != "ok"}
    expect(not failed, "; ".join(f"{op}: {why}" for op, why in sorted(failed.items())))
    driver_seen = sorted({n for names in found["unresolved"].values() for n in names})
    note("info", f"libraries resolve ({counts})")
    if driver_seen:
        note("info", f"left to the NVIDIA container runtime: {', '.join(driver_seen)}")
    if found["ops"]:
        note("info", f"ops import: {', '.join(sorted(found['ops']))}")
