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

from imagekit.files import sha256_file

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
    for path, full, info, first in tar_order(root):
        if info is None:  # a whiteout or an opaque directory's marker
            yield LayerFile(-1, path, 0, 0)
        elif stat.S_ISREG(info.st_mode) and first is None:  # a tar holds a link's data once
            head = None
            if inspect is not None and inspect(path, info.st_size):
                with open(full, "rb") as fh:
                    head = fh.read(4096)
            yield LayerFile(-1, path, info.st_size, stat.S_IMODE(info.st_mode), head=head)


def tar_order(root: Path) -> Iterator[tuple[str, str, os.stat_result | None, str | None]]:
    """An overlay2 layer directory's paths in the order, and under the names, that the
    engine's layer tar lists them: lexical and depth-first (Go's filepath.Walk); a deleted
    path (a 0/0 character device) under its whiteout name and an opaque directory's marker
    after the directory, both with no stat; sockets left out (a tar has no type for them).
    Each item: (path, full path, lstat, the earlier name of a hard-linked inode or None)."""
    first_names: dict[tuple[int, int], str] = {}

    def walk(directory: str, prefix: str):
        with os.scandir(directory) as scan:
            items = sorted(scan, key=lambda item: item.name)
        for item in items:
            path, info = prefix + item.name, item.stat(follow_symlinks=False)
            kind = stat.S_IFMT(info.st_mode)
            if kind == stat.S_IFSOCK:
                continue
            if kind == stat.S_IFCHR and info.st_rdev == 0:
                yield prefix + WHITEOUT + item.name, item.path, None, None
                continue
            first = None
            if kind != stat.S_IFDIR and info.st_nlink > 1:
                first = first_names.setdefault((info.st_dev, info.st_ino), path)
                first = None if first == path else first
            yield path, item.path, info, first
            if kind == stat.S_IFDIR:
                if _opaque(item.path):
                    yield f"{path}/{OPAQUE}", item.path, None, None
                yield from walk(item.path, path + "/")

    return walk(str(root), "")


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
    removed: dict[str, int] = {}  # a deleted path (or an opaque directory) -> its top layer
    for f in files:
        head, _, tail = f.path.rpartition("/")
        if tail == OPAQUE:
            removed[head] = max(removed.get(head, -1), f.layer)
        elif tail.startswith(WHITEOUT):
            gone = f"{head}/{tail[len(WHITEOUT) :]}".lstrip("/")
            removed[gone] = max(removed.get(gone, -1), f.layer)
        else:
            top[f.path] = max(top.get(f.path, -1), f.layer)
    result = []
    for f in files:
        if f.path.rpartition("/")[2].startswith(WHITEOUT):
            continue
        shadowed = top[f.path] > f.layer or _removed_above(f, removed)
        result.append(replace(f, shadowed=shadowed) if shadowed else f)
    return result


def _removed_above(f: LayerFile, removed: dict[str, int]) -> bool:
    """Whether a layer above f's deletes f's path or a directory it is in: a lookup per
    directory of its path, not a scan of every deletion (an image has hundreds)."""
    if not removed:
        return False
    path = f.path
    while True:
        if removed.get(path, -1) > f.layer:
            return True
        path = path.rpartition("/")[0]
        if not path:
            return False


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
DIR_KINDS = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "dir",
    stat.S_IFLNK: "symlink",
    stat.S_IFCHR: "char",
    stat.S_IFBLK: "block",
    stat.S_IFIFO: "fifo",
}
XATTR = "SCHILY.xattr."  # how tar (PAX) carries extended attributes, file capabilities too
OVERLAY_XATTRS = ("trusted.overlay.", "user.overlay.")  # overlay2's bookkeeping, not the image's


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
    # The layer blob's name and size in an export; None when read in place (`tree_in_place`),
    # which only the default diff does: `--strict`, which compares them, always exports.
    digest: str | None
    diff_id: str  # sha256 of the uncompressed layer, from the image config
    size: int | None
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
    names = manifest[0]["Layers"]
    stored = [raw.get(name, (0, [])) for name in names]
    layers = _layer_infos(config, names, [size for size, _ in stored])
    return ImageTree(config, layers, _stacked([entries for _, entries in stored]))


def tree_in_place(
    config: dict,
    layer_dirs: list[Path],
    known: dict[str, list[tuple[str, Entry | None]]] | None = None,
) -> ImageTree:
    """`final_tree`'s answer read from the engine's own overlay2 layer directories (bottom
    first) and the image's config document, with no export: a few seconds where exporting
    takes half a minute. Each layer's entries are what its tar lists (`tar_order`): every
    property, the file capabilities, hard links under their first name. `known` holds layers
    already read, by diff ID (content-addressed), so two images read in one run read the
    layers they share once."""
    known = {} if known is None else known
    diff_ids = config.get("rootfs", {}).get("diff_ids", [])
    per_layer = []
    for root, diff_id in zip(layer_dirs, diff_ids, strict=True):  # one directory per layer
        if diff_id not in known:
            known[diff_id] = list(_dir_entries(root))
        per_layer.append(known[diff_id])
    none = [None] * len(layer_dirs)
    return ImageTree(config, _layer_infos(config, none, none), _stacked(per_layer))


def _layer_infos(config: dict, names: list, sizes: list) -> tuple[LayerInfo, ...]:
    history = [h for h in config.get("history", []) if not h.get("empty_layer")]
    diff_ids = config.get("rootfs", {}).get("diff_ids", [])
    return tuple(
        LayerInfo(
            index,
            name,
            diff_ids[index] if index < len(diff_ids) else "",
            size,
            history[index].get("created_by", "") if index < len(history) else "",
        )
        for index, (name, size) in enumerate(zip(names, sizes, strict=True))
    )


def _stacked(per_layer: list[list[tuple[str, Entry | None]]]) -> dict[str, Entry]:
    files: dict[str, Entry] = {}
    for index, entries in enumerate(per_layer):
        _apply_layer(files, entries, index)
    return files


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
            if path in ("", "."):  # the root: only some writers (tar of a base) list it
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


def _dir_entries(root: Path) -> Iterator[tuple[str, Entry | None]]:
    """`_tree_entries` of a layer directory (see `tar_order`)."""
    for path, full, info, first in tar_order(root):
        if info is None:
            yield path, None
            continue
        kind = "hardlink" if first else DIR_KINDS.get(stat.S_IFMT(info.st_mode), "other")
        digest = sha256_file(full) if kind == "file" else None
        link = os.readlink(full) if kind == "symlink" else first
        yield (
            path,
            Entry(
                kind,
                stat.S_IMODE(info.st_mode),
                info.st_uid,
                info.st_gid,
                info.st_size if kind == "file" else 0,
                digest,
                link,
                _xattrs(full),
                info.st_mtime_ns // 1_000_000_000,  # the engine's tar writer keeps seconds
                -1,
            ),
        )


def _xattrs(path: str) -> tuple[tuple[str, str], ...]:
    """What the layer tar carried, which extracting it stored: all but overlay2's own."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
        return tuple(
            sorted(
                (name, os.getxattr(path, name, follow_symlinks=False).hex())
                for name in names
                if not name.startswith(OVERLAY_XATTRS)
            )
        )
    except OSError:  # a filesystem without xattrs
        return ()


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
