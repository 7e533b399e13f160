"""The GPU half of an image, proven without a GPU (R12): every shared library of torch, its
nvidia-* wheels and DeepSpeed's prebuilt ops resolves, save the driver's own libraries that
the NVIDIA container runtime injects at run time, and each prebuilt op imports."""

from __future__ import annotations

import pytest

from imagekit.checks import check
from imagekit.checks.facts import expect, has


@check(
    "cuda-libraries",
    "R12",
    "torch's, the CUDA wheels' and the prebuilt ops' libraries resolve; each prebuilt op imports",
    fix="install the missing library (or the wheel that carries it); rebuild ops against the "
    "image's torch",
    varies="the profile's `driver_libraries` come from the node's driver, not the image",
)
def check_cuda_libraries(ctx, host, note):
    if not has(ctx, host, "python3") or not has(ctx, host, "ldd"):
        pytest.skip("no python3 or ldd")
    found = ctx.torch_facts()
    if "error" in found:
        pytest.fail(f"the library probe failed: {found['error'].strip()[-300:]}", pytrace=False)
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
    kept = (
        "; read from the check cache (this image was probed before)" if found.get("cached") else ""
    )
    note("info", f"libraries resolve ({counts}){kept}")
    if driver_seen:
        note("info", f"left to the NVIDIA container runtime: {', '.join(driver_seen)}")
    if found["ops"]:
        note("info", f"ops import: {', '.join(sorted(found['ops']))}")
