"""What a probe read inside an image, kept by the image's ID: an image ID is the digest of its
config, which names every layer's content, so an image with that ID answers the same forever.
A second check of the same image then reads the torch probe's facts (seconds of CPU importing
torch and DeepSpeed in the container) from here. Only whole answers are kept (never a probe
that failed); entries that are not the user's own, or do not parse, are ignored.
IMAGEKIT_CHECK_CACHE=off turns it off; it lives under $XDG_CACHE_HOME/imagekit/probes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from imagekit.files import write_bytes_atomic
from imagekit.paths import cache_dir, cache_off, users_own

FORMAT = 1


class ProbeCache:
    def __init__(self, directory: Path):
        self.directory = directory

    @classmethod
    def default(cls) -> ProbeCache | None:
        if cache_off("IMAGEKIT_CHECK_CACHE"):
            return None
        return cls(cache_dir("probes"))

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            info = path.stat()
            if not users_own(info):
                return None  # not the user's own: another user could have planted it
            entry = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
            return None
        facts = entry.get("facts")
        return facts if isinstance(facts, dict) else None

    def put(self, key: str, facts: dict[str, Any]) -> None:
        entry = {"format": FORMAT, "key": key, "facts": facts}
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_bytes_atomic(self._path(key), json.dumps(entry).encode())
        except OSError:
            pass  # a full or read-only cache: the next check probes again


def probe_key(image_id: str, probe: str, *args: str) -> str:
    """The image, the probe's own code and its arguments (ops, GPUs given or not)."""
    digest = hashlib.sha256()
    for part in (image_id, probe, *args):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def cached(cache: ProbeCache | None, key: str, probe: Callable[[], dict[str, Any]]):
    """The probe's facts from the cache, else probed (and kept unless the probe failed).
    A cached answer carries "cached": True, for the report."""
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return {**hit, "cached": True}
    facts = probe()
    if cache is not None and "error" not in facts:
        cache.put(key, facts)
    return facts


def provenance(facts: dict[str, Any]) -> str:
    """What a check adds to its evidence when the facts it judged were kept from before."""
    return (
        "; read from the check cache (this image was probed before)" if facts.get("cached") else ""
    )
