"""Walk every layer of an image (a `docker save` archive), including files that a later
layer deletes or overwrites: a registry serves every layer, not the final filesystem."""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

WHITEOUT = ".wh."


@dataclass(frozen=True)
class LayerFile:
    layer: int  # 0 = bottom layer
    path: str  # without the leading "/"
    size: int
    mode: int
    shadowed: bool = False  # deleted or overwritten by a higher layer, yet still shipped
    sha256: str | None = None  # only for files whose size was asked for


def walk(archive: Path, hash_sizes: frozenset[int] = frozenset()) -> list[LayerFile]:
    """Every regular file of every layer, bottom layer first. Files whose size is in
    `hash_sizes` get their sha256 (a cheap pre-filter for content searches)."""
    files: list[LayerFile] = []
    with tarfile.open(archive, mode="r:") as outer:
        manifest = json.load(outer.extractfile("manifest.json"))
        for index, name in enumerate(manifest[0]["Layers"]):
            with tarfile.open(fileobj=outer.extractfile(name), mode="r:*") as layer:
                for member in layer:
                    path = member.name.removeprefix("./").lstrip("/")
                    if member.isfile():
                        digest = None
                        if member.size in hash_sizes:
                            digest = hashlib.sha256(layer.extractfile(member).read()).hexdigest()
                        files.append(
                            LayerFile(index, path, member.size, member.mode, sha256=digest)
                        )
                    elif path.rpartition("/")[2].startswith(WHITEOUT):
                        files.append(LayerFile(index, path, 0, 0))
    return _mark_shadowed(files)


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
        result.append(LayerFile(f.layer, f.path, f.size, f.mode, shadowed, f.sha256))
    return result
