"""Reading layers in place (overlay2 directories) gives what reading an export gives: the same
layer spec is written both ways (tar members with whiteout names; files, 0/0 character devices
and opaque-directory xattrs, as overlay2 stores them) and the two walks are compared."""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from imagekit.layers import walk, walk_dirs

# Each layer: path -> file content, or None for "deleted here", or "OPAQUE" for a directory
# whose lower contents are hidden.
LAYERS = [
    {
        "etc/ssh/ssh_host_rsa_key": b"-----BEGIN OPENSSH PRIVATE KEY-----\nx\n",
        "tmp/build-ca.pem": b"-----BEGIN CERTIFICATE-----\nx\n",
        "opt/app/old.txt": b"old",
        "usr/bin/tool": b"\x7fELF" + b"0" * 5000,
        "root/.ssh/id_rsa": b"-----BEGIN OPENSSH PRIVATE KEY-----\ny\n",
    },
    {
        "tmp/build-ca.pem": None,  # deleted, yet still shipped in layer 0
        "opt/app": "OPAQUE",
        "opt/app/new.txt": b"new",
        "usr/bin/tool": b"\x7fELF" + b"1" * 5000,  # overwritten
    },
    {"etc/environment": b'PATH="/usr/bin:/bin"\n'},
]


def inspect(path: str, size: int) -> bool:
    return path.startswith(("etc/", "tmp/", "root/", "opt/"))


def write_dirs(root: Path) -> list[Path]:
    dirs = []
    for index, layer in enumerate(LAYERS):
        top = root / f"layer{index}" / "diff"
        top.mkdir(parents=True)
        for path, content in layer.items():
            target = top / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if content is None:
                os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(0, 0))
            elif content == "OPAQUE":
                target.mkdir(exist_ok=True)
                _set_opaque(target)
            else:
                target.write_bytes(content)
                target.chmod(0o600 if "key" in path or "id_rsa" in path else 0o644)
        dirs.append(top)
    return dirs


def _set_opaque(directory: Path) -> None:
    for attribute in ("trusted.overlay.opaque", "user.overlay.opaque"):
        try:
            os.setxattr(directory, attribute, b"y")
            return
        except OSError:
            continue
    pytest.skip("this filesystem takes no overlay xattrs")


def write_save_archive(path: Path) -> None:
    """A `docker save` archive of the same layers, whiteouts as the engine writes them."""
    with tarfile.open(path, "w") as outer:
        names = []
        for index, layer in enumerate(LAYERS):
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as tar:
                for name, content in layer.items():
                    if content is None:
                        head, _, tail = name.rpartition("/")
                        _add(tar, f"{head}/.wh.{tail}", b"", 0o644)
                    elif content == "OPAQUE":
                        _add(tar, f"{name}/.wh..wh..opq", b"", 0o644)
                    else:
                        mode = 0o600 if "key" in name or "id_rsa" in name else 0o644
                        # Some engines' layer tars carry the file-type bits in the mode.
                        _add(tar, name, content, stat.S_IFREG | mode if index else mode)
            names.append(f"l{index}/layer.tar")
            _add(outer, names[-1], buffer.getvalue(), 0o644)
        _add(outer, "manifest.json", json.dumps([{"Layers": names}]).encode(), 0o644)


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def as_set(files) -> set:
    return {(f.layer, f.path, f.size, f.mode, f.shadowed, f.head) for f in files}


@pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts are character devices: mknod needs root")
def test_in_place_walk_equals_the_export_walk(tmp_path):
    dirs = write_dirs(tmp_path / "overlay2")
    archive = tmp_path / "save.tar"
    write_save_archive(archive)
    in_place, exported = walk_dirs(dirs, inspect), walk(archive, inspect=inspect)
    assert as_set(in_place) == as_set(exported)
    by_path = {(f.layer, f.path): f for f in in_place}
    # The properties the layer checks rely on, named, so this test cannot pass empty.
    assert by_path[(0, "tmp/build-ca.pem")].shadowed  # deleted above, still shipped
    assert by_path[(0, "opt/app/old.txt")].shadowed  # hidden by the opaque directory
    assert not by_path[(1, "opt/app/new.txt")].shadowed
    assert by_path[(0, "usr/bin/tool")].shadowed and by_path[(0, "usr/bin/tool")].head is None
    assert by_path[(0, "root/.ssh/id_rsa")].head.startswith(b"-----BEGIN OPENSSH")
    assert by_path[(0, "root/.ssh/id_rsa")].mode == 0o600


def test_a_hard_link_counts_once_per_layer_like_a_tar(tmp_path):
    top = tmp_path / "diff"
    (top / "usr/bin").mkdir(parents=True)
    (top / "usr/bin/perl").write_bytes(b"perl")
    os.link(top / "usr/bin/perl", top / "usr/bin/perl5.36.0")
    paths = [f.path for f in walk_dirs([top])]
    assert paths == ["usr/bin/perl"]  # the first name, lexically, as the tar writer has it
