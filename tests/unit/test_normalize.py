"""The post-build normalization as pure data: layer tars and image configs."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

from imagekit.build.normalize import (
    config_bytes,
    normalize_archive,
    normalize_config,
    normalize_layer,
)

EPOCH = 1_700_000_000
CAPABILITY = "SCHILY.xattr.security.capability"


def layer(mtime: float, extra_pax: dict[str, str] | None = None) -> bytes:
    """A small layer: a directory, a file with a file capability, a hard link, a symlink
    and a whiteout, written by Python's tarfile the way a builder might."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        d = tarfile.TarInfo("usr/bin")
        d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, mtime
        tar.addfile(d)
        f = tarfile.TarInfo("usr/bin/ping")
        data = b"\x7fELF pretend"
        f.size, f.mode, f.mtime = len(data), 0o755, mtime
        f.pax_headers = {CAPABILITY: "\x01\x00\x00\x02", **(extra_pax or {})}
        tar.addfile(f, io.BytesIO(data))
        h = tarfile.TarInfo("usr/bin/ping4")
        h.type, h.linkname, h.mtime = tarfile.LNKTYPE, "usr/bin/ping", mtime
        tar.addfile(h)
        s = tarfile.TarInfo("usr/bin/ping6")
        s.type, s.linkname, s.mtime = tarfile.SYMTYPE, "ping", mtime
        tar.addfile(s)
        w = tarfile.TarInfo("var/log/.wh.dpkg.log")
        w.mtime = 1_000  # older than the epoch: kept as it is
        tar.addfile(w, io.BytesIO(b""))
    return buf.getvalue()


def normalized(raw: bytes) -> tuple[bytes, str, int]:
    out = io.BytesIO()
    digest, size, clamped = normalize_layer(io.BytesIO(raw), out, EPOCH)
    assert size == len(out.getvalue())
    return out.getvalue(), digest, clamped


def test_layers_differing_only_in_times_normalize_to_the_same_bytes():
    a, digest_a, clamped = normalized(layer(1_800_000_000.25, {"atime": "1800000001.5"}))
    b, digest_b, _ = normalized(layer(1_900_000_000, {"ctime": "1900000000.1"}))
    assert a == b and digest_a == digest_b
    assert clamped == 4  # every entry but the old whiteout
    assert layer(1_800_000_000) != layer(1_900_000_000)  # the inputs really differ


def test_normalized_layer_keeps_what_matters():
    out, _, _ = normalized(layer(1_800_000_000, {"atime": "1"}))
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert tar.extractfile("usr/bin/ping").read() == b"\x7fELF pretend"
    ping = members["usr/bin/ping"]
    assert ping.mtime == EPOCH and ping.mode == 0o755
    assert ping.pax_headers[CAPABILITY] == "\x01\x00\x00\x02"
    assert "atime" not in ping.pax_headers and "mtime" not in ping.pax_headers
    assert members["usr/bin/ping4"].islnk() and members["usr/bin/ping4"].linkname == "usr/bin/ping"
    assert members["usr/bin/ping6"].issym()
    assert members["var/log/.wh.dpkg.log"].mtime == 1_000
    assert list(members) == [
        "usr/bin",
        "usr/bin/ping",
        "usr/bin/ping4",
        "usr/bin/ping6",
        "var/log/.wh.dpkg.log",
    ]


def built_config(created: str, container: str) -> dict:
    return {
        "architecture": "amd64",
        "created": created,
        "container": container,
        "container_config": {"Hostname": container[:12], "Cmd": ["/bin/sh"]},
        "config": {
            "Hostname": container[:12],
            "Env": ["PATH=/usr/bin"],
            "Labels": {"a": "b"},
            "Image": "sha256:" + container,  # the parent step's image: depends on the cache
        },
        "history": [
            {"created": created, "created_by": "RUN apt-get install"},
            {"created": created, "created_by": "ENV A=1", "empty_layer": True},
        ],
        "rootfs": {"type": "layers", "diff_ids": ["sha256:old"]},
    }


def test_config_of_two_builds_normalizes_to_the_same_bytes():
    a = normalize_config(built_config("2026-12-02T12:00:00.1Z", "c" * 64), ["sha256:new"], EPOCH)
    b = normalize_config(built_config("2026-12-03T08:00:00.9Z", "d" * 64), ["sha256:new"], EPOCH)
    assert config_bytes(a) == config_bytes(b)
    assert a["created"] == "2023-11-14T22:13:20Z"
    assert {h["created"] for h in a["history"]} == {"2023-11-14T22:13:20Z"}
    assert "container" not in a and "container_config" not in a
    assert a["config"] == {"Hostname": "", "Env": ["PATH=/usr/bin"], "Labels": {"a": "b"}}
    assert a["rootfs"]["diff_ids"] == ["sha256:new"]
    assert a["history"][1]["empty_layer"] is True


def saved_image(layers: list[bytes], config: dict) -> bytes:
    """A `docker save` archive in the legacy layout this engine writes."""
    buf = io.BytesIO()
    names = [f"{i:064d}/layer.tar" for i in range(len(layers))]
    files = [("c" * 64 + ".json", json.dumps(config).encode())]
    files += list(zip(names, layers, strict=True))
    manifest = [{"Config": "c" * 64 + ".json", "RepoTags": ["x:y"], "Layers": names}]
    files.append(("manifest.json", json.dumps(manifest).encode()))
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_archive_for_docker_load_is_consistent(tmp_path):
    raw = [layer(1_800_000_000), layer(1_900_000_000, {"atime": "5"})]
    archive = normalize_archive(
        io.BytesIO(saved_image(raw, built_config("2026-12-02T12:00:00Z", "c" * 64))),
        tmp_path,
        EPOCH,
    )
    stream = b"".join(archive.chunks())
    with tarfile.open(fileobj=io.BytesIO(stream)) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))[0]
        config_raw = tar.extractfile(manifest["Config"]).read()
        layer_digests = [
            "sha256:" + hashlib.sha256(tar.extractfile(name).read()).hexdigest()
            for name in manifest["Layers"]
        ]
    # the engine names an image by the sha256 of its config, and checks the diff ids
    assert archive.image_id == "sha256:" + hashlib.sha256(config_raw).hexdigest()
    assert json.loads(config_raw)["rootfs"]["diff_ids"] == layer_digests
    assert layer_digests[0] == layer_digests[1]  # same content, different times
    assert archive.clamped == 8


class FakeEngine:
    """Just enough engine for normalize_image's bookkeeping (pure logic under test)."""

    def inspect_image(self, ref):
        return {"Id": "sha256:" + "a" * 64}

    def image_exists(self, ref):
        return False


def test_no_room_to_normalize_is_one_build_error(tmp_path, monkeypatch):
    import tempfile

    import pytest

    from imagekit.build.normalize import normalize_image
    from imagekit.errors import BuildError

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(BuildError) as info:
        normalize_image(FakeEngine(), "x", EPOCH, lambda event: None)
    assert "normalizing sha256:aaaaaaaaaaaa failed in" in info.value.message
    assert "--no-normalize" in info.value.message
