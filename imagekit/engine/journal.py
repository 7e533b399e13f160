"""Containers a run could not remove (the engine was gone), recorded for `imagekit clean`.

The legacy builder's step containers carry no label of ours, so when the engine dies in the
middle of a build, their IDs are written here; `imagekit clean` removes exactly those IDs
and nothing else. One small file per container under $XDG_STATE_HOME/imagekit/leftovers."""

from __future__ import annotations

import os
import re
from pathlib import Path

CONTAINER_ID = re.compile(r"[0-9a-f]{12,64}")


def directory() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "imagekit" / "leftovers"


def record(container_id: str, why: str) -> None:
    """Best effort: a journal that cannot be written must not hide the error at hand."""
    if not CONTAINER_ID.fullmatch(container_id):
        return
    try:
        directory().mkdir(parents=True, exist_ok=True)
        (directory() / container_id).write_text(why + "\n", encoding="utf-8")
    except OSError:
        pass


def recorded() -> dict[str, str]:
    """container ID -> why it was recorded."""
    found = {}
    if directory().is_dir():
        for path in directory().iterdir():
            if CONTAINER_ID.fullmatch(path.name):
                found[path.name] = path.read_text(encoding="utf-8", errors="replace").strip()
    return found


def forget(container_id: str) -> None:
    (directory() / container_id).unlink(missing_ok=True)
