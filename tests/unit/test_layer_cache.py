"""The layer scan cache (checks/layerscan.py): what a scan of a layer found, keyed by the
layer's diff ID. A second scan reads only new layers; a bad or foreign entry is read again,
never trusted; the cache never holds a file's bytes. Layers are real directories and real
`docker save` archives; only the engine is a stand-in that hands them out."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from imagekit.checks import layerscan
from imagekit.checks.layerscan import (
    CERTIFICATE,
    CREDENTIAL,
    PRIVATE_KEY,
    LayerCache,
    scan_file,
    scan_image,
    scanned,
)
from imagekit.image import layers
from imagekit.image.layers import LayerFile

KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n"
BASE = {"etc/os-release": b"ID=debian\n", "usr/bin/tool": b"\x7fELF" + b"0" * 3000}
BUILD = {
    "tmp/build-ca.pem": CA,
    "etc/pip.conf": b"[global]\nindex-url = https://u:s3cr3tpw@pypi.example/simple\n",
}
PLANTED = {"root/.ssh/id_ed25519": KEY}


def diff_id(layer: dict[str, bytes]) -> str:
    return "sha256:" + hashlib.sha256(repr(sorted(layer.items())).encode()).hexdigest()


class Layers:
    """Stand-in engine: an image is a list of layers, handed out as overlay2-style
    directories and as a `docker save` archive whose layers are named by diff ID."""

    def __init__(self, root: Path, layers: list[dict[str, bytes]], in_place: bool = True):
        self.layers, self.in_place, self.exports = layers, in_place, 0
        self.dirs = []
        for layer in layers:
            top = root / diff_id(layer)[7:19]
            for path, content in layer.items():
                (top / path).parent.mkdir(parents=True, exist_ok=True)
                (top / path).write_bytes(content)
                (top / path).chmod(0o600)  # as the archive has it
            self.dirs.append(top)
        self.archive = root / f"save-{len(layers)}.tar"
        with tarfile.open(self.archive, "w") as outer:
            names = []
            for layer in layers:
                buffer = io.BytesIO()
                with tarfile.open(fileobj=buffer, mode="w") as tar:
                    for path, content in layer.items():
                        _add(tar, path, content)
                names.append(f"blobs/sha256/{diff_id(layer)[7:]}")
                _add(outer, names[-1], buffer.getvalue())
            _add(outer, "manifest.json", json.dumps([{"Layers": names}]).encode())

    def inspect_image(self, ref: str) -> dict:
        return {"RootFS": {"Layers": [diff_id(layer) for layer in self.layers]}}

    def layer_dirs(self, ref: str) -> list[Path] | None:
        return self.dirs if self.in_place else None

    @contextmanager
    def saved_image(self, ref: str):
        self.exports += 1
        with open(self.archive, "rb") as fh:
            yield fh


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o600
    tar.addfile(info, io.BytesIO(data))


def findings(result) -> dict[tuple[int, str], tuple[str, ...]]:
    return {(f.layer, f.path): f.findings for f in result.files if f.findings}


def test_scan_names_keys_certificates_and_masked_credentials():
    assert scan_file("root/.ssh/id_ed25519", KEY) == (PRIVATE_KEY,)
    assert scan_file("tmp/build-ca.pem", CA) == (CERTIFICATE,)
    (credential,) = scan_file("etc/pip.conf", BUILD["etc/pip.conf"])
    assert (
        credential.startswith(CREDENTIAL + "URL with a password") and "s3cr3tpw" not in credential
    )
    assert scan_file("root/.netrc", None) == (CREDENTIAL + "a credentials file",)
    assert scan_file("etc/os-release", b"ID=debian\n") == ()


def test_an_entry_round_trips_its_findings_and_holds_no_file_bytes(tmp_path):
    cache = LayerCache(tmp_path)
    files = scanned([LayerFile(-1, "root/.ssh/id_ed25519", len(KEY), 0o600, head=KEY)])
    cache.put("sha256:" + "a" * 64, files)
    assert cache.get("sha256:" + "a" * 64) == files
    assert files[0].findings == (PRIVATE_KEY,) and files[0].head is None
    (entry,) = cache.directory.iterdir()
    assert b"b3BlbnNzaC1rZXktdjEAAAAA" not in gzip.decompress(entry.read_bytes())
    assert cache.get("sha256:" + "b" * 64) is None  # another layer: nothing known


def _rewrite(path: Path, change) -> None:
    entry = json.loads(gzip.decompress(path.read_bytes()))
    change(entry)
    path.write_bytes(gzip.compress(json.dumps(entry).encode()))


BAD_ENTRIES = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:20]),
    "not gzip": lambda p: p.write_bytes(b"{}"),
    "not json": lambda p: p.write_bytes(gzip.compress(b"[1, 2")),
    "other rules": lambda p: _rewrite(p, lambda e: e.update(rules="0" * 64)),
    "other layer": lambda p: _rewrite(p, lambda e: e.update(diff_id="sha256:" + "c" * 64)),
    "edited, digest kept": lambda p: _rewrite(p, lambda e: e["files"][0][3].clear()),
    "wrong types": lambda p: _rewrite(p, lambda e: e.update(files=[[1, 2, 3, 4]])),
    "group-writable": lambda p: p.chmod(0o664),
}


@pytest.mark.parametrize("damage", list(BAD_ENTRIES), ids=list(BAD_ENTRIES))
def test_a_bad_entry_is_ignored(tmp_path, damage):
    cache = LayerCache(tmp_path)
    key = "sha256:" + "a" * 64
    cache.put(key, scanned([LayerFile(-1, "root/.ssh/id_ed25519", len(KEY), 0o600, head=KEY)]))
    assert cache.get(key) is not None
    BAD_ENTRIES[damage](cache._path(key))
    assert cache.get(key) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_an_entry_another_user_owns_is_ignored(tmp_path):
    cache = LayerCache(tmp_path)
    key = "sha256:" + "a" * 64
    cache.put(key, [])
    os.chown(cache._path(key), 12345, 12345)
    assert cache.get(key) is None


@pytest.mark.parametrize("in_place", [True, False], ids=["in-place", "export"])
def test_a_key_planted_in_a_new_layer_is_found_when_lower_layers_come_from_the_cache(
    tmp_path, in_place, monkeypatch
):
    cache = LayerCache(tmp_path / "cache")
    first = scan_image(Layers(tmp_path / "a", [BASE, BUILD], in_place), "a", cache, "auto")
    assert "0 from the cache, 2" in first.source
    read = _count_layer_reads(monkeypatch)
    second = scan_image(
        Layers(tmp_path / "b", [BASE, BUILD, PLANTED], in_place), "b", cache, "auto"
    )
    assert "3 layers: 2 from the cache, 1" in second.source
    assert read == [1]  # the new layer alone was read (the export names layers by diff ID)
    assert findings(second) == {
        (1, "tmp/build-ca.pem"): (CERTIFICATE,),
        (1, "etc/pip.conf"): findings(first)[(1, "etc/pip.conf")],
        (2, "root/.ssh/id_ed25519"): (PRIVATE_KEY,),
    }
    assert findings(first) == {k: v for k, v in findings(second).items() if k[0] < 2}


def _count_layer_reads(monkeypatch) -> list[int]:
    """How many layers a scan reads, in place or from the export."""
    count = [0]

    def counted(function):
        def wrapper(*args, **kwargs):
            count[0] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(layerscan, "walk_dir", counted(layerscan.walk_dir))
    monkeypatch.setattr(layers, "_layer_files", counted(layers._layer_files))
    return count


def test_a_foreign_entry_saying_the_new_layer_is_clean_is_not_trusted(tmp_path):
    cache = LayerCache(tmp_path / "cache")
    other = LayerCache(tmp_path / "cache", rules="f" * 64)  # another imagekit's rules
    other.directory = cache.directory  # ...written where this one looks
    other.put(diff_id(PLANTED), [])
    engine = Layers(tmp_path / "b", [BASE, PLANTED])
    result = scan_image(engine, "b", cache, "auto")
    assert "0 from the cache" in result.source
    assert findings(result) == {(1, "root/.ssh/id_ed25519"): (PRIVATE_KEY,)}
    assert cache.get(diff_id(PLANTED)) is not None  # rewritten with what was found


def test_in_place_and_export_find_the_same_and_no_cache_means_no_entries(tmp_path):
    layers = [BASE, BUILD, PLANTED]
    in_place = scan_image(Layers(tmp_path / "d", layers), "x", None, "auto")
    exported = scan_image(Layers(tmp_path / "e", layers, in_place=False), "x", None, "auto")

    def order(result):
        return sorted(result.files, key=lambda f: (f.layer, f.path))

    assert order(in_place) == order(exported) and len(in_place.files) == 5
    assert "read in place" in in_place.source and "from an export" in exported.source
    forced = Layers(tmp_path / "f", layers)
    scan_image(forced, "x", None, "export")
    assert forced.exports == 1
