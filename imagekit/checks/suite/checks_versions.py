"""Declared versions against what is inside (R12); CUDA and NCCL from files, no GPU needed."""

from __future__ import annotations

import re

import pytest

from imagekit.checks import check
from imagekit.checks.facts import expect

# -- R12: versions ----------------------------------------------------------------------------


def found_python(ctx, host) -> str | None:
    return ctx.version_facts().get("python")


def found_openmpi(ctx, host) -> str | None:
    return ctx.version_facts().get("openmpi")  # `mpirun --version`'s "Open MPI X.Y.Z"


def found_dist(name: str):
    def find(ctx, host) -> str | None:
        return ctx.version_facts().get(f"dist:{name}")  # importlib.metadata's version

    return find


# Where an image's CUDA version shows, most direct first: a CUDA base's toolkit file, the
# version torch was built with, the runtime wheel torch loads, a toolkit's nvcc. Each is a
# fact of the check's one versions probe (data/versions_probe.sh) or its one torch probe.
CUDA_SOURCES = (
    ("/usr/local/cuda/version.json", "cuda-json"),
    ("torch.version.cuda", None),
    ("nvidia-cuda-runtime-cu12", "dist:nvidia-cuda-runtime-cu12"),
    ("nvcc", "nvcc"),
)


def cuda_versions(ctx, host) -> dict[str, str]:
    """Every place the image states its CUDA version: all of them must match the claim."""
    found = {}
    for source, fact in CUDA_SOURCES:
        if fact is None:
            if ctx.torch_facts().get("torch_cuda"):
                found[source] = ctx.torch_facts()["torch_cuda"]
        elif ctx.version_facts().get(fact):
            found[source] = ctx.version_facts()[fact]
    return found


def found_cuda(ctx, host) -> str | None:
    found = cuda_versions(ctx, host)
    return next(iter(found.values()), None)


def found_nccl(ctx, host) -> str | None:
    # The NCCL torch really loads (a wheel's, or a system one), then the packages that ship one.
    loaded = ctx.torch_facts().get("nccl") or ""
    if re.match(r"^\d+\.\d+\.\d+$", loaded):
        return loaded
    for dist in ("nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl-cu13"):
        found = found_dist(dist)(ctx, host)
        if found:
            return found
    return ctx.version_facts().get("libnccl")  # a system libnccl.so.X.Y.Z


def _matches(component: str, expected: str, found: str) -> bool:
    if component == "python":
        return found == expected
    if component == "cuda":
        # 12.2 (nvcc) in a 12.2.2 claim, 12.4.127 (the runtime wheel) in a 12.4 claim
        return (
            found == expected
            or expected.startswith(found + ".")
            or found.startswith(expected + ".")
        )
    return found == expected or found.split("+")[0] == expected  # 2.13.0 declared, 2.13.0+cpu found


VERSION_PROBES = {
    "python": (found_python, "python3"),
    "openmpi": (found_openmpi, "mpirun"),
    "torch": (found_dist("torch"), None),
    "deepspeed": (found_dist("deepspeed"), None),
    "cuda": (found_cuda, None),
    "nccl": (found_nccl, None),
}


@pytest.mark.parametrize("component", list(VERSION_PROBES))
@check(
    "version",
    "R12",
    "the versions the image declares are the versions inside it",
    fix="rebuild so the installed version matches the declared one (or fix the labels/recipe)",
)
def check_version(ctx, host, note, component):
    probe, needs = VERSION_PROBES[component]
    if needs and needs not in ctx.version_facts()["has"]:
        pytest.skip(f"no {needs} (see R2/R11)" if component == "openmpi" else f"no {needs}")
    expected = ctx.expected.get(component)
    # CUDA: every place the image states it is read once (each may import torch: seconds)
    every = cuda_versions(ctx, host) if component == "cuda" else {}
    found = next(iter(every.values()), None) if component == "cuda" else probe(ctx, host)
    if expected == "from-torch":
        note("info", f"{component} from torch: {found or 'none (CPU torch)'}")
        return
    if expected is None:
        if found is None:
            pytest.skip(f"{component}: not declared, not found")
        note("info", f"{component} {found} (reported, not asserted: nothing declares it)")
        return
    expect(
        found is not None,
        (f"{component} {expected} is declared ({ctx.expected_source}) but not installed"),
    )
    expect(
        _matches(component, expected, found),
        (f"{component}: declared {expected} ({ctx.expected_source}), found {found}"),
    )
    if component == "cuda":
        wrong = {src: v for src, v in every.items() if not _matches("cuda", expected, v)}
        expect(
            not wrong,
            f"cuda: declared {expected} ({ctx.expected_source}), but "
            + ", ".join(f"{src} says {v}" for src, v in wrong.items()),
        )
        note("info", "cuda " + ", ".join(f"{v} ({src})" for src, v in every.items()))
        return
    note("info", f"{component} {found}")
