"""Reading layers in place (overlay2 directories) gives what reading an export gives: the same
layer spec is written both ways (tar members with whiteout names; files, 0/0 character devices
and opaque-directory xattrs, as overlay2 stores them) and the two walks are compared."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imagekit.image.layers import (
    OPAQUE,
    WHITEOUT,
    LayerFile,
    final_tree,
    stack,
    tree_in_place,
    walk,
    walk_dirs,
)

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


# -- the diff's tree: every property of every path, in place and from an export ------------

CAPABILITY = bytes.fromhex("0100000200200000000000000000000000000000")  # cap_net_raw+ep


def _full_layers(root: Path) -> list[Path]:
    """Two layer directories as overlay2 stores them, with what a diff must see: modes,
    owners, times, a symlink, a capability, a hard link whose first name in tar order
    (depth-first) is not the first os.walk meets, a whiteout and an opaque directory."""
    bottom, top = root / "l0" / "diff", root / "l1" / "diff"
    (bottom / "a" / "b").mkdir(parents=True)
    (bottom / "a" / "b" / "y").write_bytes(b"shared")
    os.link(bottom / "a" / "b" / "y", bottom / "a" / "z")  # tar: a/b/y first, then a/z
    (bottom / "opt" / "old").mkdir(parents=True)
    (bottom / "opt" / "old" / "config").write_bytes(b"cfg")
    (bottom / "opt" / "gone").write_bytes(b"x")
    (bottom / "usr").mkdir()
    (bottom / "usr" / "ping").write_bytes(b"ping")
    os.setxattr(bottom / "usr" / "ping", "security.capability", CAPABILITY)
    os.symlink("/opt/app", bottom / "opt" / "link")
    (bottom / "opt" / "app").write_bytes(b"app")
    os.chown(bottom / "opt" / "app", 1000, 1000)
    (bottom / "opt" / "app").chmod(0o4750)
    (top / "opt" / "old").mkdir(parents=True)
    _set_opaque(top / "opt" / "old")
    (top / "opt" / "old" / "new").write_bytes(b"new")
    os.mknod(top / "opt" / "gone", stat.S_IFCHR | 0o600, os.makedev(0, 0))
    for path in (*bottom.rglob("*"), *top.rglob("*")):
        os.utime(
            path, ns=(1_700_000_000_900_000_000, 1_700_000_000_900_000_000), follow_symlinks=False
        )
    return [bottom, top]


def _member(name: str, kind=tarfile.REGTYPE, data: bytes = b"", **attrs) -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mtime = (
        kind,
        len(data) if kind == tarfile.REGTYPE else 0,
        1_700_000_000,
    )
    info.mode = attrs.pop("mode", 0o644)
    for key, value in attrs.items():
        setattr(info, key, value)
    return info, data


def _full_archive(path: Path) -> dict:
    """The same two layers as the engine's tar writer lists them, and the image config."""
    capability = {"SCHILY.xattr.security.capability": CAPABILITY.decode("latin-1")}
    layers = [
        [
            _member("a", tarfile.DIRTYPE, mode=0o755),
            _member("a/b", tarfile.DIRTYPE, mode=0o755),
            _member("a/b/y", data=b"shared"),
            _member("a/z", tarfile.LNKTYPE, linkname="a/b/y"),
            _member("opt", tarfile.DIRTYPE, mode=0o755),
            _member("opt/app", data=b"app", mode=0o4750, uid=1000, gid=1000),
            _member("opt/gone", data=b"x"),
            _member("opt/link", tarfile.SYMTYPE, linkname="/opt/app", mode=0o777),
            _member("opt/old", tarfile.DIRTYPE, mode=0o755),
            _member("opt/old/config", data=b"cfg"),
            _member("usr", tarfile.DIRTYPE, mode=0o755),
            _member("usr/ping", data=b"ping", pax_headers=capability),
        ],
        [
            _member("opt", tarfile.DIRTYPE, mode=0o755),
            _member("opt/.wh.gone"),
            _member("opt/old", tarfile.DIRTYPE, mode=0o755),
            _member("opt/old/.wh..wh..opq"),
            _member("opt/old/new", data=b"new"),
        ],
    ]
    blobs = []
    for members in layers:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for info, data in members:
                tar.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
        blobs.append(buffer.getvalue())
    config = {
        "rootfs": {"diff_ids": [f"sha256:{hashlib.sha256(b).hexdigest()}" for b in blobs]},
        "history": [{"created_by": "RUN base"}, {"created_by": "RUN top"}],
    }
    with tarfile.open(path, "w") as outer:
        for index, blob in enumerate(blobs):
            _add(outer, f"l{index}/layer.tar", blob, 0o644)
        _add(outer, "config.json", json.dumps(config).encode(), 0o644)
        manifest = [{"Config": "config.json", "Layers": ["l0/layer.tar", "l1/layer.tar"]}]
        _add(outer, "manifest.json", json.dumps(manifest).encode(), 0o644)
    return config


@pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts, owners and capabilities need root")
def test_the_tree_read_in_place_equals_the_tree_of_the_export(tmp_path):
    dirs = _full_layers(tmp_path / "overlay2")
    config = _full_archive(tmp_path / "save.tar")
    in_place, exported = tree_in_place(config, dirs), final_tree(tmp_path / "save.tar")
    assert in_place.files == exported.files
    assert [(x.diff_id, x.created_by) for x in in_place.layers] == [
        (x.diff_id, x.created_by) for x in exported.layers
    ]
    files = in_place.files  # named, so the comparison cannot pass on two empty trees
    assert files["a/z"].kind == "hardlink" and files["a/z"].link == "a/b/y"
    assert files["a/b/y"].sha256 == hashlib.sha256(b"shared").hexdigest()
    assert (files["opt/app"].mode, files["opt/app"].uid) == (0o4750, 1000)
    assert files["opt/link"].link == "/opt/app" and files["opt/app"].mtime == 1_700_000_000
    assert files["usr/ping"].xattrs == (("security.capability", CAPABILITY.hex()),)
    assert "opt/gone" not in files and "opt/old/config" not in files
    assert files["opt/old/new"].layer == 1
    # the export's own facts: an in-place read has no blob names or tar sizes to give
    assert all(x.digest is None and x.size is None for x in in_place.layers)


@pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts, owners and capabilities need root")
def test_a_layer_two_images_share_is_read_once(tmp_path, monkeypatch):
    from imagekit.image import layers

    dirs = _full_layers(tmp_path / "overlay2")
    config = _full_archive(tmp_path / "save.tar")
    read: list[Path] = []
    real = layers._dir_entries
    monkeypatch.setattr(layers, "_dir_entries", lambda root: read.append(root) or real(root))
    known: dict = {}
    first = tree_in_place(config, dirs, known)
    other = {**config, "rootfs": {"diff_ids": [config["rootfs"]["diff_ids"][0], "sha256:other"]}}
    second = tree_in_place(other, [dirs[0], dirs[0]], known)
    assert read == [dirs[0], dirs[1], dirs[0]]  # the shared bottom layer once
    assert second.files["a/b/y"].sha256 == first.files["a/b/y"].sha256


def test_an_export_that_lists_the_root_gives_no_entry_for_it(tmp_path):
    """A base layer's tar (mmdebstrap's) lists "./"; the engine's own layer tars do not, and
    a layer directory has no entry for its root either: neither does the tree."""
    config = _full_archive(tmp_path / "save.tar")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in (
            _member("./", tarfile.DIRTYPE, mode=0o755),
            _member("./etc/x", data=b"x"),
        ):
            tar.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    with tarfile.open(tmp_path / "root.tar", "w") as outer:
        _add(outer, "l0/layer.tar", buffer.getvalue(), 0o644)
        _add(outer, "config.json", json.dumps(config).encode(), 0o644)
        _add(
            outer,
            "manifest.json",
            json.dumps([{"Config": "config.json", "Layers": ["l0/layer.tar"]}]).encode(),
            0o644,
        )
    assert set(final_tree(tmp_path / "root.tar").files) == {"etc/x"}


def test_the_image_config_is_read_from_the_store_only_when_its_hash_is_the_image_id(
    tmp_path, monkeypatch
):
    from types import SimpleNamespace

    from imagekit.engine.client import Engine

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    data = json.dumps({"rootfs": {"diff_ids": ["sha256:" + "1" * 64]}}).encode()
    digest = hashlib.sha256(data).hexdigest()
    store = tmp_path / "image" / "overlay2" / "imagedb" / "content" / "sha256"
    store.mkdir(parents=True)
    (store / digest).write_bytes(data)
    engine = Engine.__new__(Engine)
    settings = {"DockerRootDir": str(tmp_path), "Driver": "overlay2"}
    engine.api = SimpleNamespace(info=lambda: settings)
    assert engine.image_config(f"sha256:{digest}") == json.loads(data)
    assert engine.image_config("sha256:" + "0" * 64) is None  # not in the store
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2375")  # its files are elsewhere
    assert engine.image_config(f"sha256:{digest}") is None
    monkeypatch.delenv("DOCKER_HOST")
    (store / digest).write_bytes(data.replace(b"1", b"2"))  # changed: no longer the ID's
    assert engine.image_config(f"sha256:{digest}") is None


# -- which files a higher layer hides (stack) -------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "c", ".wh.a", ".wh.b", OPAQUE])


def _layer_paths(draw_paths):
    return [LayerFile(-1, path, 1, 0o644) for path in dict.fromkeys(draw_paths)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.lists(_NAMES, min_size=1, max_size=3).map("/".join), max_size=8),
        min_size=1,
        max_size=4,
    )
)
def test_a_file_is_shadowed_exactly_when_a_higher_layer_deletes_or_rewrites_it(layers):
    """Issue 39: the shadow marks are looked up per directory of a path (an image has 40000
    files and hundreds of deletions); the answer is the definition's, read the slow way."""
    layers = [_layer_paths(paths) for paths in layers]
    numbered = [(index, f.path) for index, layer in enumerate(layers) for f in layer]
    deleted = []  # (path, layer): a whiteout's path, or an opaque marker's directory
    for index, path in numbered:
        head, _, tail = path.rpartition("/")
        if tail == OPAQUE:
            deleted.append((head, index))
        elif tail.startswith(WHITEOUT):
            deleted.append((f"{head}/{tail[len(WHITEOUT) :]}".lstrip("/"), index))
    expected = {
        (index, path): any(i > index for i, p in numbered if p == path)
        or any(
            above > index and (path == gone or path.startswith(gone + "/"))
            for gone, above in deleted
        )
        for index, path in numbered
        if not path.rpartition("/")[2].startswith(WHITEOUT)
    }
    assert {(f.layer, f.path): f.shadowed for f in stack(layers)} == expected
