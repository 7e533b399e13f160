"""DeepSpeed's prebuilt ops, proven without a GPU (R12): each op the image says is prebuilt
imports against the image's torch. Whether the libraries of torch, its nvidia-* wheels and
the ops resolve is A1's `native-libraries` (imagekit/requirements/platform.py)."""

from __future__ import annotations

import pytest

from imagekit.checks import check
from imagekit.checks.facts import expect, has
from imagekit.checks.probecache import provenance


@check(
    "prebuilt-ops",
    "R12",
    "each op the image says is prebuilt imports against the image's torch",
    fix="rebuild the ops against the image's torch (an upgrade of torch that did not rebuild "
    "DeepSpeed leaves ops it refuses to load); install the ops the image's label names",
)
def check_prebuilt_ops(ctx, host, note):
    if not has(ctx, host, "python3"):
        pytest.skip("no python3")
    found = ctx.torch_facts()
    if "error" in found:
        pytest.fail(f"the torch probe failed: {found['error'].strip()[-300:]}", pytrace=False)
    if found.get("torch") is None:
        pytest.skip("no torch in the image")
    failed = {op: why for op, why in found["ops"].items() if why != "ok"}
    expect(not failed, "; ".join(f"{op}: {why}" for op, why in sorted(failed.items())))
    kept = provenance(found)
    if not found["ops"]:
        note("info", f"the image's label names no prebuilt op to import{kept}")
    else:
        note("info", f"ops import: {', '.join(sorted(found['ops']))}{kept}")
