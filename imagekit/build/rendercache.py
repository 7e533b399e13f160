"""Whole renders, remembered by what they read: `imagekit render` of a recipe whose files
(the recipe, its `extends` chain, its lock) and whose imagekit (every file of the installed
package) are unchanged writes the build context it wrote last time, without importing the
recipe model, the compatibility rules or Jinja2 (most of a render's time).

Standard library only: this module is the fast path. An entry records each input's sha256
(or that it did not exist); any difference, any unreadable or malformed entry, means a full
render, which then records a fresh entry. Only renders of valid recipes are recorded, so a
bad recipe always goes through validation and gets its one-line error.
IMAGEKIT_RENDER_CACHE=off turns it off."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagekit import __version__
from imagekit.errors import OutputError
from imagekit.files import write_text_atomic, write_tree
from imagekit.grammar import MAX_INPUT_FILE_BYTES
from imagekit.paths import cache_dir, cache_off, users_own

FORMAT = 1
PACKAGE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Entry:
    name: str  # the plan's name: the default output directory under dockerfiles/
    files: dict[str, str]
    modes: dict[str, int]


def enabled() -> bool:
    return not cache_off("IMAGEKIT_RENDER_CACHE")


def directory() -> Path:
    return cache_dir("renders")


@functools.cache  # the installed package does not change under a running process
def package_fingerprint() -> str:
    """Changes with any file of the installed imagekit (code, templates, rules data): size
    and modification time of each, which a reinstall or an edit always changes."""
    digest = hashlib.sha256(f"{FORMAT} {__version__}".encode())
    for root, dirs, names in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            info = os.stat(os.path.join(root, name))
            rel = os.path.relpath(os.path.join(root, name), PACKAGE)
            digest.update(f"{rel} {info.st_size} {info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _entry_path(recipe: Path, fingerprint: str) -> Path:
    key = hashlib.sha256(f"{fingerprint}\n{recipe.resolve()}".encode()).hexdigest()
    return directory() / f"{key}.json"


# A recorded input larger than this, or not a regular file, is never read here: it no longer
# matches, and the full render that follows refuses it in one line (a recipe swapped for a
# link to /dev/zero would otherwise be read forever).
_MAX_INPUT_BYTES = MAX_INPUT_FILE_BYTES


def _file_digest(path: Path) -> str | None:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_INPUT_BYTES:
            return "not a small regular file"
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def lookup(recipe: Path, fingerprint: str) -> Entry | None:
    """The recorded render of `recipe`, if every input it read is as it was."""
    path = _entry_path(recipe, fingerprint)
    try:
        info = path.stat()
        if not users_own(info):
            return None  # not the user's own
        entry: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if entry.get("format") != FORMAT or entry.get("fingerprint") != fingerprint:
            return None
        for name, digest in entry["inputs"]:
            if _file_digest(Path(name)) != digest:
                return None
        files, modes = entry["files"], entry["modes"]
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            return None
        if not all(isinstance(v, int) for v in modes.values()):
            return None
        return Entry(str(entry["name"]), files, modes)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def record(recipe: Path, inputs: list[Path], entry: Entry) -> None:
    """Remember a render; a failure to write only costs the next render its speed."""
    if not enabled():
        return
    fingerprint = package_fingerprint()
    body = {
        "format": FORMAT,
        "fingerprint": fingerprint,
        "recipe": str(recipe.resolve()),
        "inputs": [[str(p.resolve()), _file_digest(p)] for p in inputs],
        "name": entry.name,
        "files": entry.files,
        "modes": entry.modes,
    }
    target = _entry_path(recipe, fingerprint)
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_text_atomic(target, json.dumps(body))
    except (OSError, OutputError):
        pass


def render_recipes(paths: list[Path], out: Path | None, renders_dir: Path) -> list[Path]:
    """`render.render_recipes`, from recorded renders when every recipe has a current one."""
    if enabled() and (out is None or len(paths) == 1):
        fingerprint = package_fingerprint()
        entries = [lookup(p, fingerprint) for p in paths]
        if all(e is not None for e in entries):
            return [write_tree(e.files, e.modes, out or renders_dir / e.name) for e in entries]
    # Imported here, not above: the recorded path above must not load the recipe model,
    # the rules or Jinja2 (that is its whole point; tests/unit/test_render_cache.py).
    from imagekit.build import render  # the full render: validation, plan, templates

    def record_render(recipe: Path, inputs: list[Path], name: str, context) -> None:
        record(recipe, inputs, Entry(name, dict(context.files), dict(context.modes)))

    return render.render_recipes(paths, out, renders_dir, record=record_render)
