"""Atomic file writes: a reader never sees half a report, record or SBOM. A write that
cannot happen (no such directory, read-only, disk full) is an OutputError naming the path
the user asked for, and leaves what was there before."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from imagekit.errors import OutputError, UsageError


def sha256_file(path: str | Path) -> str:
    """A file's sha256, read in 1 MiB chunks (hashlib.file_digest is Python 3.11+)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_text_atomic(path: Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    with _writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return path


def check_writable(path: Path) -> None:
    """Raise OutputError now if `path` clearly cannot be written later: a file stands where a
    directory above it must be, or the nearest existing directory above it is not this
    user's to write in. A command checks its outputs so before minutes of work, not after."""
    for above in Path(path).absolute().parents:
        try:
            if not above.exists():
                continue
        except OSError as exc:  # a directory above it this user cannot search
            raise OutputError(f"cannot write {path}: {exc.strerror} ({above})") from None
        if not above.is_dir():
            raise OutputError(f"cannot write {path}: {above} is not a directory")
        if not os.access(above, os.W_OK | os.X_OK):
            raise OutputError(f"cannot write {path}: {above} is not writable")
        return


def write_json_atomic(path: Path, body: Any) -> Path:
    return write_text_atomic(path, json.dumps(body, indent=2) + "\n")


def write_tree(
    files: Mapping[str, str],
    modes: Mapping[str, int],
    out_dir: Path,
    fill: Callable[[Path], None] | None = None,
) -> Path:
    """A directory of text files, written atomically: into a sibling temp dir, then swapped
    into place, so `out_dir` holds the old tree or the new one, never half of each. `*.sh`
    files are executable; `modes` overrides; `fill(tmp)` adds anything else before the swap."""
    out_dir = Path(os.path.abspath(out_dir))  # `-o .` has a name and a parent to swap in
    _check_replaceable(out_dir)
    files = {**files, TREE_MARKER: TREE_MARKER_TEXT}
    with _writing(out_dir):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        _fill_and_swap(files, modes, out_dir, tmp, fill)
    return out_dir


# Every tree write_tree writes holds this file: a directory is replaced whole only when it is
# empty or holds it, so `-o DIR` naming a directory of the user's never deletes what it holds.
TREE_MARKER = ".imagekit-tree"
TREE_MARKER_TEXT = "Written by imagekit; the next write replaces this directory whole.\n"
# Renders written before the marker existed: their Dockerfile's first words.
_LEGACY_RENDER_HEADS = ("# Rendered by imagekit", "# Rendered by `imagekit adapt`")


def _check_replaceable(out_dir: Path) -> None:
    if out_dir == out_dir.parent:
        raise OutputError(f"cannot write {out_dir}: not a directory imagekit can replace")
    if not out_dir.exists() and not out_dir.is_symlink():
        return
    if out_dir.is_symlink() or not out_dir.is_dir():
        raise OutputError(f"cannot write {out_dir}: it exists and is not a directory")
    try:
        if (out_dir / TREE_MARKER).is_file() or not any(out_dir.iterdir()):
            return
        head = (out_dir / "Dockerfile").read_text(encoding="utf-8", errors="replace")[:40]
    except OSError:
        head = ""
    if not head.startswith(_LEGACY_RENDER_HEADS):
        raise OutputError(
            f"cannot write {out_dir}: it holds files imagekit did not write, and writing "
            "replaces the directory whole; choose a new or empty directory"
        )


def _fill_and_swap(
    files: Mapping[str, str],
    modes: Mapping[str, int],
    out_dir: Path,
    tmp: Path,
    fill: Callable[[Path], None] | None,
) -> None:
    try:
        for rel, text in files.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            if rel.endswith(".sh"):
                target.chmod(0o755)
            if rel in modes:
                target.chmod(modes[rel])
        if fill is not None:
            fill(tmp)
        tmp.chmod(0o755)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}") if out_dir.exists() else None
    try:
        if old is not None:
            out_dir.rename(old)
        tmp.rename(out_dir)
    except BaseException:
        # Put the old tree back (if it was moved away): a failed write loses nothing.
        if old is not None and old.exists() and not out_dir.exists():
            old.rename(out_dir)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old)


@contextmanager
def _writing(target: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        # The failing call may name a parent ("File exists: 'out'" for out/x): say which.
        # Not our own temporary sibling, though: that name means nothing to the user.
        failed = Path(exc.filename) if exc.filename else target
        reason = exc.strerror or str(exc)
        if not _on_the_way_to(failed, target):  # a source being copied in (a wheelhouse file)
            raise UsageError(f"cannot read {failed}: {reason} (writing {target})") from None
        where = "" if failed == target or _temporary_of(failed, target) else f" ({failed})"
        raise OutputError(f"cannot write {target}: {reason}{where}") from None


def _temporary_of(path: Path, target: Path) -> bool:
    """Whether `path` is the temporary sibling `target` is written into first."""
    return path.parent == target.parent and path.name.startswith(f".{target.name}.")


def _on_the_way_to(path: Path, target: Path) -> bool:
    """Whether `path` is `target`, a parent of it, or in it or in its temporary sibling:
    where writing `target` can fail, as opposed to a file it copies from."""
    path, target = Path(os.path.abspath(path)), Path(os.path.abspath(target))
    return path in target.parents or any(
        p == target or _temporary_of(p, target) for p in (path, *path.parents)
    )
