"""Walk every layer of an image (a `docker save` archive), including files that a later
layer deletes or overwrites: a registry serves every layer, not the final filesystem."""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

WHITEOUT = ".wh."
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


def walk(
    archive: Path | IO[bytes],
    hash_sizes: frozenset[int] = frozenset(),
    inspect: Inspect | None = None,
) -> list[LayerFile]:
    """Every regular file of every layer, bottom layer first, read in one pass from a path
    or a non-seekable stream (the engine's `docker save` response). Files whose size is in
    `hash_sizes` get their sha256 (a cheap pre-filter for content searches); files that
    `inspect(path, size)` selects get their first 4 KiB in `head`."""
    by_name: dict[str, list[LayerFile]] = {}
    manifest = None
    if isinstance(archive, Path):
        outer = tarfile.open(archive, mode="r|")
    else:
        outer = tarfile.open(fileobj=archive, mode="r|")
    with outer:
        for member in outer:
            if member.name == "manifest.json":
                manifest = json.load(outer.extractfile(member))
            elif member.isfile() and (member.name.endswith(".tar") or "blobs/" in member.name):
                by_name[member.name] = list(
                    _layer_files(outer.extractfile(member), hash_sizes, inspect)
                )
    if manifest is None:
        raise ValueError("not a docker save archive: no manifest.json")
    files: list[LayerFile] = []
    for index, name in enumerate(manifest[0]["Layers"]):
        files.extend(replace(f, layer=index) for f in by_name.get(name, []))
    return _mark_shadowed(files)


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
                yield LayerFile(-1, path, member.size, member.mode, sha256=digest, head=head)
            elif path.rpartition("/")[2].startswith(WHITEOUT):
                yield LayerFile(-1, path, 0, 0)


def _mark_shadowed(files: list[LayerFile]) -> list[LayerFile]:
    top: dict[str, int] = {}
    removed: list[tuple[str, int]] = []
    for f in files:
        head, _, tail = f.path.rpartition("/")
        if tail.startswith(WHITEOUT):
            if tail != ".wh..wh..opq":
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
