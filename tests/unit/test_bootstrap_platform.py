"""A local base names its platform (A1): mmdebstrap is told the architecture, and the image
config loaded into the engine says it (docker import would record the engine's own)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from imagekit.build.base import mmdebstrap_command, rootfs_archive
from imagekit.build.plan import BootstrapSpec

SPEC = BootstrapSpec(suite="bookworm", mirror="http://deb.debian.org/debian", epoch=1700000000)
ARM64 = BootstrapSpec(
    suite="bookworm", mirror="http://deb.debian.org/debian", epoch=1700000000, architecture="arm64"
)


def _rootfs(tmp_path):
    path = tmp_path / "rootfs.tar"
    with tarfile.open(path, "w") as tar:
        data = b"#!/bin/sh\n"
        info = tarfile.TarInfo("bin/true")
        info.size, info.mtime = len(data), 1700000000
        tar.addfile(info, io.BytesIO(data))
    return path


def test_mmdebstrap_is_told_the_architecture():
    assert "--architectures=amd64" in mmdebstrap_command(SPEC, "b.tar")
    assert "--architectures=arm64" in mmdebstrap_command(ARM64, "b.tar")


def test_an_amd64_spec_keeps_the_names_and_locks_made_before_the_field():
    assert "architecture" not in SPEC.as_dict()
    assert ARM64.as_dict()["architecture"] == "arm64"
    assert ARM64.image_ref != SPEC.image_ref  # an arm64 base never reuses an amd64 one


def test_the_loaded_config_names_the_platform_and_the_layer(tmp_path):
    rootfs = _rootfs(tmp_path)
    archive = rootfs_archive(rootfs, ARM64)
    config = json.loads(archive.config)
    assert (config["os"], config["architecture"]) == ("linux", "arm64")
    diff_id = "sha256:" + hashlib.sha256(rootfs.read_bytes()).hexdigest()
    assert config["rootfs"]["diff_ids"] == [diff_id]  # what locks record as the base's content
    assert config["created"] == "2023-11-14T22:13:20Z"  # the epoch: no wall clock
    assert archive.image_id == rootfs_archive(rootfs, ARM64).image_id  # same tarball, same ID
    assert archive.image_id != rootfs_archive(rootfs, SPEC).image_id


def test_the_archive_is_a_loadable_docker_archive(tmp_path):
    archive = rootfs_archive(_rootfs(tmp_path), ARM64)
    with tarfile.open(fileobj=io.BytesIO(b"".join(archive.chunks()))) as outer:
        manifest = json.loads(outer.extractfile("manifest.json").read())[0]
        config = outer.extractfile(manifest["Config"]).read()
        layer = outer.extractfile(manifest["Layers"][0]).read()
    assert config == archive.config
    assert hashlib.sha256(config).hexdigest() == archive.image_id.removeprefix("sha256:")
    assert layer == (tmp_path / "rootfs.tar").read_bytes()


def test_a_foreign_bootstrap_without_qemu_is_one_line_naming_the_setup(tmp_path, monkeypatch):
    from imagekit.build import base
    from imagekit.errors import BootstrapError

    monkeypatch.setattr(base, "BINFMT", tmp_path)  # no handler registered
    monkeypatch.setattr(base.platform, "machine", lambda: "x86_64")
    with pytest.raises(BootstrapError) as info:
        base.ensure_base(ARM64, _NoBase(), report=lambda event: None)
    assert "arm64 binaries cannot run on this x86_64 host: no qemu handler" in info.value.message
    assert "./dev setup" in info.value.hint and "\n" not in info.value.message
    (tmp_path / "qemu-aarch64").write_text("enabled\n")
    base._check_emulation(ARM64)  # registered: nothing to say
    base._check_emulation(SPEC)  # native: never needs one


class _NoBase:
    """An engine that has no base yet (ensure_base's only question before bootstrapping)."""

    def image_exists(self, ref: str) -> bool:
        return False
