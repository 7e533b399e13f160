"""Atomic file writes: a reader never sees half a report, record or SBOM."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> Path:
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
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
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
        old = None
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
            out_dir.rename(old)
        tmp.rename(out_dir)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir
