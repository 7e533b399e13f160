"""Post-build normalization: make an image a function of its inputs alone.

The legacy builder (what docker-py drives) writes every file's build-time mtime into the
layer tars and wall-clock times into the image config; it has no SOURCE_DATE_EPOCH.
This step rewrites the saved image instead, then loads the result back into the engine:

- every tar entry's mtime is clamped to SOURCE_DATE_EPOCH; atime/ctime PAX records go;
  entries are rewritten in the order the builder wrote them (it walks paths sorted), in
  PAX format, keeping ownership, modes, links, devices and extended attributes
  (file capabilities) as they were;
- the config's `created` and every history entry's `created` become the epoch; the
  build container's id and config (`container`, `container_config`, a random hostname)
  and the parent image ID the builder records (`config.Image`, which depends on the build
  cache) are dropped; `rootfs.diff_ids` are recomputed.

File *contents* are not touched here: what varies inside files (package-manager logs,
caches, bytecode, keys) is kept out of layers by the Dockerfile itself (docs: reproducible builds).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from imagekit import workdirs
from imagekit.engine.client import Engine, Message, Reporter
from imagekit.errors import BuildError

DROPPED_PAX = frozenset({"mtime", "atime", "ctime"})
DROPPED_CONFIG = ("container", "container_config")
CACHE_REPOSITORY = "imagekit-normalized"  # source image id -> its normalized image
NORMALIZATION = 2  # bump when the rewrite changes: remembered results of older ones are stale


@dataclass(frozen=True)
class Normalized:
    image_id: str
    source_id: str
    layers: int
    bytes: int  # layer bytes rewritten
    clamped: int  # tar entries whose mtime was later than the epoch
    seconds: float
    reused: bool = False


@dataclass(frozen=True)
class LayerResult:
    path: Path
    diff_id: str
    size: int
    clamped: int


class _HashingWriter:
    def __init__(self, fh: IO[bytes]):
        self.fh = fh
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.fh.write(data)


def normalize_layer(src: IO[bytes], dst: IO[bytes], epoch: int) -> tuple[str, int, int]:
    """Rewrite one layer tar; return (sha256:diff id, size, entries clamped)."""
    out = _HashingWriter(dst)
    clamped = 0
    with (
        tarfile.open(fileobj=src, mode="r|") as tin,
        tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tout,
    ):
        tout.copybufsize = 1 << 20
        for member in tin:
            if member.mtime > epoch:
                clamped += 1
            member.mtime = min(int(member.mtime), epoch)
            member.pax_headers = {
                k: v for k, v in member.pax_headers.items() if k not in DROPPED_PAX
            }
            data = tin.extractfile(member) if member.isreg() else None
            tout.addfile(member, data)
    return f"sha256:{out.digest.hexdigest()}", out.size, clamped


def epoch_stamp(epoch: int) -> str:
    """An image config's time for SOURCE_DATE_EPOCH (RFC 3339, UTC)."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize_config(config: dict[str, Any], diff_ids: list[str], epoch: int) -> dict[str, Any]:
    """The image config with build-time randomness and wall-clock times taken out."""
    stamp = epoch_stamp(epoch)
    result = {k: v for k, v in config.items() if k not in DROPPED_CONFIG}
    result["created"] = stamp
    result["history"] = [{**h, "created": stamp} for h in config.get("history", [])]
    result["rootfs"] = {"type": "layers", "diff_ids": diff_ids}
    inner = dict(result.get("config") or {})
    inner["Hostname"] = ""
    # The legacy builder records the previous step's image ID here: it depends on what the
    # build cache held, not on what the image is.
    inner.pop("Image", None)
    result["config"] = inner
    return result


def config_bytes(config: dict[str, Any]) -> bytes:
    """Canonical JSON: the image ID is the sha256 of exactly these bytes."""
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class NormalizedArchive:
    """A loadable docker-archive, as layer files on disk plus the config, streamed by
    `chunks()` straight into `docker load` (never written out whole: images are GBs)."""

    image_id: str
    config: bytes
    layers: list[LayerResult]

    @property
    def size(self) -> int:
        return sum(layer.size for layer in self.layers)

    @property
    def clamped(self) -> int:
        return sum(layer.clamped for layer in self.layers)

    def chunks(self) -> Iterator[bytes]:
        names = [f"{index}/layer.tar" for index in range(len(self.layers))]
        config_name = f"{self.image_id.removeprefix('sha256:')}.json"
        manifest = [{"Config": config_name, "RepoTags": None, "Layers": names}]
        for name, layer in zip(names, self.layers, strict=True):
            yield _header(name, layer.size)
            with layer.path.open("rb") as fh:
                yield from iter(lambda: fh.read(1 << 20), b"")
            yield _padding(layer.size)
        for name, data in ((config_name, self.config), ("manifest.json", _json(manifest))):
            yield _header(name, len(data)) + data + _padding(len(data))
        yield b"\0" * (2 * tarfile.BLOCKSIZE)


def normalize_archive(stream: IO[bytes], workdir: Path, epoch: int) -> NormalizedArchive:
    """A `docker save` stream -> normalized layers in `workdir` and the new config."""
    blobs: dict[str, bytes] = {}
    layers: dict[str, LayerResult] = {}
    with tarfile.open(fileobj=stream, mode="r|") as outer:
        for member in outer:
            if not member.isfile():
                continue
            fh = outer.extractfile(member)
            if member.name.endswith(".json") or member.name in ("repositories", "index.json"):
                blobs[member.name] = fh.read()
            elif member.name.endswith("layer.tar") or member.name.startswith("blobs/"):
                if fh.peek(1)[:1] == b"{":  # an OCI blob that is JSON (config), not a layer
                    blobs[member.name] = fh.read()
                    continue
                path = workdir / f"layer-{len(layers)}.tar"
                with path.open("wb") as dst:
                    diff_id, size, clamped = normalize_layer(fh, dst, epoch)
                layers[member.name] = LayerResult(path, diff_id, size, clamped)
    manifest = json.loads(blobs["manifest.json"])[0]
    config = json.loads(blobs[manifest["Config"]])
    order = [layers[name] for name in manifest["Layers"]]
    body = config_bytes(normalize_config(config, [layer.diff_id for layer in order], epoch))
    return NormalizedArchive("sha256:" + hashlib.sha256(body).hexdigest(), body, order)


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % tarfile.BLOCKSIZE)


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def normalize_image(engine: Engine, image_id: str, epoch: int, report: Reporter) -> Normalized:
    """Normalize a built image; return the normalized image's id (loaded into the engine).
    The result is remembered by tag, so re-normalizing a cached rebuild costs nothing."""
    started = time.monotonic()
    source = engine.inspect_image(image_id)["Id"]
    memo = f"{CACHE_REPOSITORY}:{source.removeprefix('sha256:')[:24]}-{epoch}-v{NORMALIZATION}"
    if engine.image_exists(memo):
        done = engine.inspect_image(memo)["Id"]
        report(Message(f"normalize: reusing {done[:19]} (same build, same epoch)"))
        return Normalized(done, source, 0, 0, 0, time.monotonic() - started, reused=True)
    report(Message(f"normalize: rewriting layers and config at SOURCE_DATE_EPOCH={epoch}"))
    try:
        with workdirs.scratch("normalize") as tmp:
            with engine.saved_image(source) as stream:
                archive = normalize_archive(stream, Path(tmp), epoch)
            size = f"{archive.size / 1e9:.2f} GB"
            report(Message(f"normalize: loading {archive.image_id[:19]} ({size})"))
            engine.load_archive(archive.chunks(), archive.image_id)
    except OSError as exc:
        # The rewritten layers are staged in TMPDIR: it needs about the image's size free.
        raise BuildError(
            f"normalizing {source[:19]} failed in {tempfile.gettempdir()}: "
            f"{exc.strerror or exc} (it needs about the image's size free; "
            "set TMPDIR, or build with --no-normalize)"
        ) from None
    engine.tag(archive.image_id, memo)
    return Normalized(
        image_id=archive.image_id,
        source_id=source,
        layers=len(archive.layers),
        bytes=archive.size,
        clamped=archive.clamped,
        seconds=time.monotonic() - started,
    )
