"""Scratch directories of a run (build contexts, generated keys, staged layers), named so
that `imagekit clean` can tell a dead run's from anything else in TMPDIR.

A run's directory is `imagekit-KIND.PID.RANDOM` under the temporary directory, holding a
marker file. A run removes its own on the way out; one SIGKILLed cannot, and `imagekit clean`
removes those whose process is gone. It never touches a directory without the marker, of
another user, a link, or of a process that is still running."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

MARKER = ".imagekit-workdir"
NAME = re.compile(r"imagekit-([a-z][a-z0-9-]{0,31})\.([0-9]{1,10})\.[A-Za-z0-9_]{1,32}")


def make(kind: str) -> Path:
    """A new scratch directory for this process (mode 0700: it may hold keys)."""
    path = Path(tempfile.mkdtemp(prefix=f"imagekit-{kind}.{os.getpid()}."))
    (path / MARKER).write_text(f"{os.getpid()}\n", encoding="utf-8")
    return path


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def scratch(kind: str) -> Iterator[Path]:
    path = make(kind)
    try:
        yield path
    finally:
        remove(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone's process: not ours to judge
    return True


def stale(root: Path | None = None) -> list[Path]:
    """The scratch directories of runs that are gone: ours by name, marker and owner."""
    root = Path(root or tempfile.gettempdir())
    found = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    for entry in entries:
        match = NAME.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        try:
            owned = entry.stat(follow_symlinks=False).st_uid == os.getuid()
            marked = (path / MARKER).is_file() and not (path / MARKER).is_symlink()
        except OSError:
            continue
        if owned and marked and not _alive(int(match[2])):
            found.append(path)
    return sorted(found)
