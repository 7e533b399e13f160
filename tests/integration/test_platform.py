"""A1 on real arm64 images under emulation. A Debian 12 arm64 base bootstrapped the way
recipes' bases are (build/base.py: mmdebstrap, loaded with its platform in the config), its
binaries run by qemu, and the architecture check passing it and failing the same image
carrying one amd64 library, naming the file. Needs qemu-user-static's handlers registered
(`./dev` sets them up; CI fails rather than skips without them). The arm64 recipe cell
(deepspeed-cpu-ompi5 --platform linux/arm64) is not here: under emulation its build alone
takes longer than CI can give it today (docs/how-to/arm64.md has the times)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from imagekit.build.base import BINFMT, ensure_base
from imagekit.build.plan import BootstrapSpec
from imagekit.platforms import MACHINES

from .conftest import imagekit, run_in

ARM64_BASE = BootstrapSpec(
    suite="bookworm",
    mirror="http://deb.debian.org/debian",
    epoch=1700000000,
    include=("ca-certificates", "python3"),
    architecture="arm64",
)
QEMU_HANDLER = BINFMT / MACHINES["arm64"][1]
FOREIGN = "/usr/lib/python3/dist-packages/fastpath/_native.so"


def _needs_emulation() -> None:
    if not QEMU_HANDLER.exists():
        message = f"no aarch64 emulation ({QEMU_HANDLER} missing): ./dev sets it up"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def arm64_base(engine):
    _needs_emulation()
    return ensure_base(ARM64_BASE, engine, report=lambda event: None)


def _architecture_row(image: str, tmp_path: Path) -> tuple[dict, str]:
    report = tmp_path / "report.json"
    result = imagekit("check", image, "--report", str(report), timeout=900)
    rows = {r["id"]: r for r in json.loads(report.read_text())["results"]}
    return rows["architecture"], result.stdout + result.stderr


def test_an_arm64_base_says_arm64_and_runs_aarch64_binaries(engine, arm64_base):
    info = engine.inspect_image(arm64_base)
    assert (info["Os"], info["Architecture"]) == ("linux", "arm64")
    code, out = run_in(engine, arm64_base, "uname -m; python3 -c 'print(1 + 1)'")
    assert code == 0 and out.split() == ["aarch64", "2"], out


def test_the_architecture_check_passes_arm64_and_names_an_amd64_library(
    engine, arm64_base, tmp_path
):
    row, output = _architecture_row(arm64_base, tmp_path / "base")
    assert row["status"] in ("pass", "info"), output
    assert "all aarch64 (config: arm64)" in row["evidence"]

    # The same image with one x86-64 library where a Python package would load it from.
    context = tmp_path / "ctx"
    context.mkdir()
    host_binary = Path(os.path.realpath("/usr/bin/true"))  # an ELF file of this (amd64) host
    assert host_binary.read_bytes()[:4] == b"\x7fELF"
    shutil.copyfile(host_binary, context / "native.so")
    (context / "Dockerfile").write_text(f"FROM {arm64_base}\nCOPY native.so {FOREIGN}\n")
    outcome = engine.build(context, report=lambda event: None)
    ref = "imagekit-test/arm64-foreign:latest"
    engine.tag(outcome.image_id, ref)
    row, output = _architecture_row(ref, tmp_path / "foreign")
    assert row["status"] == "fail", output
    assert f"{FOREIGN} (x86-64)" in row["evidence"] and "1 of " in row["evidence"], row
