"""Scratch directories (imagekit/workdirs.py): `imagekit clean` removes a dead run's, and
nothing that only looks like one."""

from __future__ import annotations

import os
import subprocess
import sys

from imagekit import workdirs


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _scratch(root, kind: str, pid: int, marker: bool = True):
    path = root / f"imagekit-{kind}.{pid}.abc123"
    path.mkdir()
    if marker:
        (path / workdirs.MARKER).write_text(f"{pid}\n")
    return path


def test_only_a_dead_runs_marked_directory_is_stale(tmp_path):
    dead = _dead_pid()
    gone = _scratch(tmp_path, "check", dead)
    _scratch(tmp_path, "build", os.getpid())  # this process: alive
    _scratch(tmp_path, "lock", dead, marker=False)  # not ours: no marker
    (tmp_path / f"imagekit-smoke.{dead}.x").write_text("a file, not a directory")
    (tmp_path / f"imagekit-adapt.{dead}.link").symlink_to(gone)  # a link is never followed
    (tmp_path / f"imagekit-check-{dead}-old").mkdir()  # another name
    decoy = _scratch(tmp_path, "smoke", dead)
    (decoy / workdirs.MARKER).unlink()
    (decoy / workdirs.MARKER).symlink_to(gone / workdirs.MARKER)  # a linked marker is not one
    assert workdirs.stale(tmp_path) == [gone]


def test_make_marks_and_scratch_removes(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    with workdirs.scratch("normalize") as path:
        assert path.parent == tmp_path and (path / workdirs.MARKER).is_file()
        assert workdirs.NAME.fullmatch(path.name)
        assert oct(path.stat().st_mode & 0o777) == "0o700"  # it may hold keys
        assert workdirs.stale(tmp_path) == []  # its process (this one) is alive
    assert not path.exists()
    assert workdirs.stale(tmp_path / "missing") == []
