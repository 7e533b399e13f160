"""Walk every layer of an image (a `docker save` archive), including files that a later
layer deletes or overwrites: a registry serves every layer, not the final filesystem."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"  # in a directory: hide everything lower layers put there
Inspect = Callable[[str, int], bool]


@dataclass(frozen=True)
class LayerFile:
    layer: int  # 0 = bottom layer
    path: str  # without the leading "/"
    size: int
    mode: int
    shadowed: bool = False  # deleted or overwritten by a higher layer, yet still shipped
    sha256: str | None = None  # only for files whose size was asked for
    head: bytes | None = None  # first 4 KiB, only for files `inspect` selected
    findings: tuple[str, ...] = ()  # what a scan of path and head found (checks.layerscan)


def walk(
    archive: Path | IO[bytes],
    hash_sizes: frozenset[int] = frozenset(),
    inspect: Inspect | None = None,
) -> list[LayerFile]:
    """Every regular file of every layer, bottom layer first, read in one pass from a path
    or a non-seekable stream (the engine's `docker save` response). Files whose size is in
    `hash_sizes` get their sha256 (a cheap pre-filter for content searches); files that
    `inspect(path, size)` selects get their first 4 KiB in `head`."""
    return stack(walk_layers(archive, hash_sizes, inspect))


def walk_layers(
    archive: Path | IO[bytes],
    hash_sizes: frozenset[int] = frozenset(),
    inspect: Inspect | None = None,
    skip: frozenset[str] = frozenset(),
) -> list[list[LayerFile] | None]:
    """`walk`, one list per layer in the manifest's order, before `stack` numbers them.
    A layer stored under a name in `skip` (`blobs/sha256/<hex>`: an export names a layer by
    its diff ID since Docker 25) is not read and gives None: its files are known already."""
    by_name: dict[str, list[LayerFile] | None] = {}
    manifest = None
    with _open_archive(archive) as outer:
        for member in outer:
            if member.name == "manifest.json":
                manifest = json.load(outer.extractfile(member))
            elif member.isfile() and (member.name.endswith(".tar") or "blobs/" in member.name):
                if "blobs/" in member.name and member.name.rsplit("/", 1)[-1] in skip:
                    by_name[member.name] = None
                    continue
                by_name[member.name] = list(
                    _layer_files(outer.extractfile(member), hash_sizes, inspect)
                )
    if manifest is None:
        raise ValueError("not a docker save archive: no manifest.json")
    return [by_name.get(name, []) for name in manifest[0]["Layers"]]


def walk_dirs(layer_dirs: list[Path], inspect: Inspect | None = None) -> list[LayerFile]:
    """The same as `walk`, from the engine's own overlay2 layer directories (bottom first)
    instead of an export: no re-tar, no copy. overlay2 stores a deleted file as a 0/0
    character device and an opaque directory as an xattr; both become the whiteout names
    a layer tar carries, so the result is what `walk` gives for the same image."""
    return stack([walk_dir(root, inspect) for root in layer_dirs])


def walk_dir(root: Path, inspect: Inspect | None = None) -> list[LayerFile]:
    """One overlay2 layer directory's files, as its layer tar lists them (see `walk_dirs`)."""
    return list(_dir_files(root, inspect))


def stack(layers: list[list[LayerFile]]) -> list[LayerFile]:
    """Per-layer file lists (bottom first) as one list: each file numbered with its layer,
    and marked shadowed where a higher layer deletes or overwrites it."""
    files: list[LayerFile] = []
    for index, layer in enumerate(layers):
        files.extend(replace(f, layer=index) for f in layer)
    return _mark_shadowed(files)


def _dir_files(root: Path, inspect: Inspect | None) -> Iterator[LayerFile]:
    linked: set[tuple[int, int]] = set()  # a layer tar holds a hard link's data once
    for directory, subdirs, names in os.walk(root):
        subdirs.sort()  # lexical, like the engine's own tar writer
        names.sort()
        rel_dir = os.path.relpath(directory, root)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        if rel_dir and _opaque(directory):
            yield LayerFile(-1, f"{rel_dir}{OPAQUE}", 0, 0)
        for name in names + [d for d in subdirs if os.path.islink(os.path.join(directory, d))]:
            full = os.path.join(directory, name)
            info = os.lstat(full)
            path = rel_dir + name
            if stat.S_ISREG(info.st_mode):
                if info.st_nlink > 1:
                    if (info.st_dev, info.st_ino) in linked:
                        continue
                    linked.add((info.st_dev, info.st_ino))
                head = None
                if inspect is not None and inspect(path, info.st_size):
                    with open(full, "rb") as fh:
                        head = fh.read(4096)
                yield LayerFile(-1, path, info.st_size, stat.S_IMODE(info.st_mode), head=head)
            elif stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
                yield LayerFile(-1, f"{rel_dir}{WHITEOUT}{name}", 0, 0)


def _opaque(directory: str) -> bool:
    for attribute in ("trusted.overlay.opaque", "user.overlay.opaque"):
        try:
            if os.getxattr(directory, attribute, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _open_archive(archive: Path | IO[bytes]) -> tarfile.TarFile:
    """A `docker save` archive from a path or a non-seekable stream, read in one pass."""
    if isinstance(archive, Path):
        return tarfile.open(archive, mode="r|")
    return tarfile.open(fileobj=archive, mode="r|")


def _layer_files(
    fh: IO[bytes], hash_sizes: frozenset[int], inspect: Inspect | None
) -> Iterator[LayerFile]:
    with tarfile.open(fileobj=fh, mode="r|*") as layer:
        for member in layer:
            path = member.name.removeprefix("./").lstrip("/")
            if member.isfile():
                hashed = member.size in hash_sizes
                looked = inspect is not None and inspect(path, member.size)
                digest = head = None
                if hashed or looked:
                    data = layer.extractfile(member).read()
                    digest = hashlib.sha256(data).hexdigest() if hashed else None
                    head = data[:4096] if looked else None
                mode = stat.S_IMODE(member.mode)  # some layer tars carry the type bits too
                yield LayerFile(-1, path, member.size, mode, sha256=digest, head=head)
            elif path.rpartition("/")[2].startswith(WHITEOUT):
                yield LayerFile(-1, path, 0, 0)


def _mark_shadowed(files: list[LayerFile]) -> list[LayerFile]:
    top: dict[str, int] = {}
    removed: list[tuple[str, int]] = []
    for f in files:
        head, _, tail = f.path.rpartition("/")
        if tail == OPAQUE:
            removed.append((head, f.layer))
        elif tail.startswith(WHITEOUT):
            removed.append((f"{head}/{tail[len(WHITEOUT) :]}".lstrip("/"), f.layer))
        else:
            top[f.path] = max(top.get(f.path, -1), f.layer)
    result = []
    for f in files:
        if f.path.rpartition("/")[2].startswith(WHITEOUT):
            continue
        shadowed = top[f.path] > f.layer or any(
            layer > f.layer and (f.path == p or f.path.startswith(p + "/")) for p, layer in removed
        )
        result.append(replace(f, shadowed=shadowed))
    return result


# -- the final filesystem, with every property a diff must see ------------------------------

KINDS = {
    tarfile.REGTYPE: "file",
    tarfile.AREGTYPE: "file",
    tarfile.DIRTYPE: "dir",
    tarfile.SYMTYPE: "symlink",
    tarfile.LNKTYPE: "hardlink",
    tarfile.CHRTYPE: "char",
    tarfile.BLKTYPE: "block",
    tarfile.FIFOTYPE: "fifo",
}
XATTR = "SCHILY.xattr."  # how tar (PAX) carries extended attributes, file capabilities too


@dataclass(frozen=True)
class Entry:
    """One path of an image's final filesystem."""

    kind: str  # file | dir | symlink | hardlink | char | block | fifo
    mode: int  # permission bits (with setuid/setgid/sticky)
    uid: int
    gid: int
    size: int
    sha256: str | None  # regular files only
    link: str | None  # symlink target, or the path a hardlink points at
    xattrs: tuple[tuple[str, str], ...]  # (name, hex value), e.g. security.capability
    mtime: int
    layer: int  # the layer that last wrote it (0 = bottom)


@dataclass(frozen=True)
class LayerInfo:
    index: int
    digest: str  # the layer blob's name in the archive (its digest for OCI layouts)
    diff_id: str  # sha256 of the uncompressed layer, from the image config
    size: int
    created_by: str  # the instruction that made it, from the config's history


@dataclass(frozen=True)
class ImageTree:
    config: dict
    layers: tuple[LayerInfo, ...]
    files: dict[str, Entry]


def final_tree(archive: Path | IO[bytes]) -> ImageTree:
    """The image's filesystem as a container sees it (whiteouts applied), every entry with
    type, mode, owner, link target, xattrs, size, content hash and mtime; plus the config
    and per-layer facts. One pass over a path or a non-seekable `docker save` stream."""
    raw: dict[str, tuple[int, list[tuple[str, Entry | None]]]] = {}
    manifest = None
    documents: dict[str, bytes] = {}  # small JSON members: the image config among them
    with _open_archive(archive) as outer:
        for member in outer:
            name = member.name
            if not member.isfile() or not (
                name.endswith((".json", ".tar")) or name.startswith("blobs/")
            ):
                continue
            fh = outer.extractfile(member)
            if name == "manifest.json":
                manifest = json.load(fh)
            elif member.size < 1 << 20:  # configs are small; so are some layers (read whole)
                data = fh.read()
                if data[:1] == b"{":
                    documents[name] = data
                else:
                    raw[name] = (member.size, list(_tree_entries(io.BytesIO(data))))
            else:
                raw[name] = (member.size, list(_tree_entries(fh)))
    if manifest is None:
        raise ValueError("not a docker save archive: no manifest.json")
    config = json.loads(documents.get(manifest[0]["Config"], b"{}"))
    history = [h for h in config.get("history", []) if not h.get("empty_layer")]
    diff_ids = config.get("rootfs", {}).get("diff_ids", [])
    files: dict[str, Entry] = {}
    layers = []
    for index, name in enumerate(manifest[0]["Layers"]):
        size, entries = raw.get(name, (0, []))
        layers.append(
            LayerInfo(
                index,
                name,
                diff_ids[index] if index < len(diff_ids) else "",
                size,
                history[index].get("created_by", "") if index < len(history) else "",
            )
        )
        _apply_layer(files, entries, index)
    return ImageTree(config, tuple(layers), files)


def _apply_layer(files: dict[str, Entry], entries: list[tuple[str, Entry | None]], index: int):
    """Whiteouts first (they only ever hide lower layers), then this layer's entries."""
    for path, entry in entries:
        if entry is not None:
            continue
        head, _, tail = path.rpartition("/")
        if tail == OPAQUE:
            prefix = f"{head}/" if head else ""
            for key in [k for k in files if k.startswith(prefix) and k != head]:
                del files[key]
        else:
            gone = f"{head}/{tail[len(WHITEOUT) :]}".lstrip("/")
            for key in [k for k in files if k == gone or k.startswith(gone + "/")]:
                del files[key]
    for path, entry in entries:
        if entry is not None:
            files[path] = replace(entry, layer=index)


def _tree_entries(fh: IO[bytes]) -> Iterator[tuple[str, Entry | None]]:
    with tarfile.open(fileobj=fh, mode="r|*") as layer:
        for member in layer:
            path = member.name.removeprefix("./").strip("/")
            if not path:
                continue
            if path.rpartition("/")[2].startswith(WHITEOUT):
                yield path, None
                continue
            digest = None
            if member.isfile():
                digest = hashlib.sha256(layer.extractfile(member).read()).hexdigest()
            link = None
            if member.issym():
                link = member.linkname
            elif member.islnk():
                link = member.linkname.removeprefix("./").lstrip("/")
            xattrs = tuple(
                sorted(
                    (key[len(XATTR) :], value.encode("utf-8", "surrogateescape").hex())
                    for key, value in member.pax_headers.items()
                    if key.startswith(XATTR)
                )
            )
            yield (
                path,
                Entry(
                    KINDS.get(member.type, "other"),
                    member.mode & 0o7777,  # some writers keep the type bits (040755)
                    member.uid,
                    member.gid,
                    member.size if member.isfile() else 0,
                    digest,
                    link,
                    xattrs,
                    int(member.mtime),
                    -1,
                ),
            )


def read_files(archive: Path | IO[bytes], wanted: set[str]) -> dict[str, bytes]:
    """The final content of each wanted regular file (from the highest layer that holds
    it), for `imagekit diff --report-dir`. Paths without the leading "/"."""
    found: dict[str, dict[str, bytes]] = {}  # layer blob -> path -> bytes
    manifest = None
    with _open_archive(archive) as outer:
        for member in outer:
            if not member.isfile():
                continue
            fh = outer.extractfile(member)
            if member.name == "manifest.json":
                manifest = json.load(fh)
            elif member.name.endswith(".tar") or member.name.startswith("blobs/"):
                head = fh.read(1)
                if head in (b"{", b""):
                    continue
                found[member.name] = _wanted_members(_Prepend(head, fh), wanted)
    if manifest is None:
        raise ValueError("not a docker save archive: no manifest.json")
    result: dict[str, bytes] = {}
    for name in manifest[0]["Layers"]:
        result.update(found.get(name, {}))
    return result


def _wanted_members(fh: IO[bytes], wanted: set[str]) -> dict[str, bytes]:
    out = {}
    with tarfile.open(fileobj=fh, mode="r|*") as layer:
        for member in layer:
            path = member.name.removeprefix("./").strip("/")
            if member.isfile() and path in wanted:
                out[path] = layer.extractfile(member).read()
    return out


class _Prepend(io.RawIOBase):
    """A stream with bytes already read put back in front (tarfile reads from the start)."""

    def __init__(self, head: bytes, rest: IO[bytes]):
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._head:
            if size is None or size < 0:
                data, self._head = self._head + self._rest.read(), b""
                return data
            data, self._head = self._head[:size], self._head[size:]
            if len(data) < size:
                data += self._rest.read(size - len(data))
            return data
        return self._rest.read(size)
