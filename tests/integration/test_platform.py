"""The arm64 cell under emulation (A1): recipes/deepspeed-cpu-arm64.yaml built from its lock
for linux/arm64 on this amd64 host, its binaries run by qemu; checked (the architecture check
reading every native file), smoke-run as 2 workers x 2 slots with every rank on a worker and
running as aarch64, failing the architecture check once it carries one amd64 library, and
published with deepspeed-cpu's amd64 image as one multi-arch index to a real registry, then
pulled back per platform. Needs qemu-user-static's handlers registered (`./dev` sets them up;
CI fails rather than skips without them). docs/how-to/arm64.md has what emulation costs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from imagekit.engine.registry import RegistryClient

from .conftest import (
    ARM64_RECIPE,
    PREBUILDS,
    QEMU_HANDLER,
    by_id,
    check_json,
    imagekit,
    marked,
    run_in,
)
from .test_publish import Registry, publish, running
from .test_smoke import nothing_left

# Where DeepSpeed would load a compiled op from: both halves of A1 read it.
FOREIGN = "/usr/local/lib/python3.11/dist-packages/deepspeed/ops/_native.so"


def _needs_emulation() -> None:
    if not QEMU_HANDLER.exists():
        message = f"no aarch64 emulation ({QEMU_HANDLER} missing): ./dev sets it up"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def arm64_image(engine):
    _needs_emulation()
    return PREBUILDS.take(engine, ARM64_RECIPE)  # built in the session's arm64 lane


@pytest.fixture(scope="module")
def arm64_check(arm64_image, tmp_path_factory) -> tuple[Path, dict, str]:
    """`imagekit check` of the cell, once: (the report, its rows by id, the output)."""
    where = tmp_path_factory.mktemp("arm64-check")
    _, report, output = check_json(arm64_image.ref, where, timeout=1800)
    return where / "report.json", by_id(report), output


def test_the_arm64_cell_is_arm64_throughout(engine, arm64_image):
    info = engine.inspect_image(arm64_image.ref)
    assert (info["Os"], info["Architecture"]) == ("linux", "arm64")
    assert info["Config"]["Labels"]["io.imagekit.platform"] == "linux/arm64"
    code, out = run_in(
        engine,
        arm64_image.ref,
        "uname -m; mpirun --version | head -1; python3 -c 'import torch, deepspeed, mpi4py;"
        " print(torch.__version__, deepspeed.__version__, mpi4py.__version__)'",
    )
    assert code == 0, out
    lines = out.strip().splitlines()
    assert lines[0] == "aarch64" and "4.1.4" in lines[1], out
    torch, deepspeed, mpi4py = lines[-1].split()
    assert torch.split("+")[0] == "2.9.1", out  # PyPI's aarch64 build says 2.9.1+cpu inside
    assert (deepspeed, mpi4py) == ("0.19.8", "4.1.2"), out


def test_the_arm64_cell_passes_every_check(arm64_check):
    report, rows, output = arm64_check
    assert json.loads(report.read_text())["passed"], output[-4000:]
    assert rows["architecture"]["status"] in ("pass", "info"), output[-4000:]
    assert "all aarch64 (config: arm64)" in rows["architecture"]["evidence"]
    # torch's, mpi4py's and their dependencies' libraries load under the arm64 loader
    assert rows["native-libraries"]["status"] in ("pass", "info"), rows["native-libraries"]
    assert "unused MPI ABI builds left out: 1" in rows["native-libraries"]["evidence"]
    for required in ("mpirun-two-ranks", "version-openmpi", "version-torch"):
        assert rows[required]["status"] in ("pass", "info"), rows[required]


def test_the_arm64_cell_smoke_runs_its_ranks_on_the_workers_as_aarch64(engine, arm64_image):
    result = imagekit("smoke", arm64_image.ref, "--workers", "2", "--slots", "2", timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    probes = marked(result.stderr, "IMAGEKIT_PROBE")
    assert sorted(p["rank"] for p in probes) == [0, 1, 2, 3]
    for p in probes:
        assert p["host"].endswith(f"-worker-{p['rank'] // 2}") and p["size"] == 4
        assert p["machine"] == "aarch64" and p["allreduce"] == 4
    assert "PASSED 2 workers x 2 slots" in result.stdout
    nothing_left(engine)


def test_both_halves_of_a1_name_an_amd64_library_in_the_arm64_cell(engine, arm64_image, tmp_path):
    # The cell with one x86-64 library where DeepSpeed would load an op from.
    context = tmp_path / "ctx"
    context.mkdir()
    host_binary = Path(os.path.realpath("/usr/bin/true"))  # an ELF file of this (amd64) host
    assert host_binary.read_bytes()[:4] == b"\x7fELF"
    shutil.copyfile(host_binary, context / "native.so")
    (context / "Dockerfile").write_text(f"FROM {arm64_image.ref}\nCOPY native.so {FOREIGN}\n")
    outcome = engine.build(context, report=lambda event: None)
    ref = "imagekit-test/arm64-foreign:latest"
    engine.tag(outcome.image_id, ref)
    try:
        _, report, output = check_json(ref, tmp_path, timeout=1800)
        rows = by_id(report)
    finally:
        engine.remove_image(ref)
    row = rows["architecture"]
    assert row["status"] == "fail", output
    assert f"{FOREIGN} (x86-64)" in row["evidence"] and "1 of " in row["evidence"], row
    # the arm64 loader cannot load it either: named, the only library that does not resolve
    row = rows["native-libraries"]
    assert row["status"] == "fail", output
    assert f"do not resolve: {FOREIGN} (cannot open shared object file" in row["evidence"], row
    assert row["evidence"].startswith("1 of "), row


def test_the_cell_and_its_amd64_sibling_publish_as_one_index_pulled_per_platform(
    engine, arm64_image, arm64_check, cpu_image, tmp_path
):
    amd64_report = tmp_path / "amd64.json"
    result = imagekit("check", cpu_image.ref, "--report", str(amd64_report), timeout=900)
    assert result.returncode == 0, result.stdout[-3000:]
    with running(Registry(tmp_path)) as reg:
        record_path = tmp_path / "record.json"
        args = [cpu_image.ref, arm64_image.ref, "--registry", f"{reg.host}/team"]
        args += ["--require-check", "--check-report", str(amd64_report)]
        args += ["--check-report", str(arm64_check[0]), "--record", str(record_path)]
        result = publish(*args)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        record = json.loads(record_path.read_text())
        repository, tag = record["repository"], "23.08-cpu-py311-debian12"
        assert repository == f"{reg.host}/team/deepspeed-training"
        assert record["version_tags"] == [tag] and record["check_passed"] is True
        assert [(p["platform"], p["tag"], p["image_id"]) for p in record["platforms"]] == [
            ("linux/amd64", f"{tag}-amd64", cpu_image.image_id),
            ("linux/arm64", f"{tag}-arm64", arm64_image.image_id),
        ]
        client = RegistryClient.for_repository(repository)
        assert client.index_configs(tag) == {
            "linux/amd64": cpu_image.image_id,
            "linux/arm64": arm64_image.image_id,
        }
        assert client.descriptor(tag).digest == record["digest"]

        # A pull on either architecture gets its own image: the engine resolves the index.
        pulled = f"{repository}:{tag}"
        try:
            for platform, image in (("linux/arm64", arm64_image), ("linux/amd64", cpu_image)):
                engine.client.images.pull(repository, tag=tag, platform=platform)
                info = engine.inspect_image(pulled)
                assert f"{info['Os']}/{info['Architecture']}" == platform
                assert info["Id"] == image.image_id
        finally:
            engine.remove_image_tag(pulled)

        # The index's tag is immutable like any version tag: one image is refused there.
        alone = publish(cpu_image.ref, "--registry", f"{reg.host}/team", "--tag", tag)
        assert alone.returncode == 13, alone.stderr[-2000:]
        assert "already points at an index (linux/amd64, linux/arm64)" in alone.stderr

        # Publishing the same images again moves nothing and succeeds.
        again = publish(*args)
        assert again.returncode == 0, again.stderr[-2000:]
        assert json.loads(record_path.read_text())["digest"] == record["digest"]
