"""`imagekit clean --caches`: what the caches hold, listed and emptied (pure file logic)."""

from __future__ import annotations

from imagekit.cli.display import cache_line
from imagekit.run.clean import caches, clean_caches


def _fill(root, name, files):
    directory = root / "imagekit" / name / "sub"
    directory.mkdir(parents=True)
    for i, size in enumerate(files):
        (directory / f"{i}.json").write_bytes(b"x" * size)


def test_caches_are_listed_then_emptied_and_a_dry_run_keeps_them(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert caches() == []
    _fill(tmp_path, "layers", [1000, 2000])
    _fill(tmp_path, "probes", [500])
    (tmp_path / "imagekit" / "unrelated").mkdir()  # not one of imagekit's caches: left alone
    listed = clean_caches(dry_run=True)
    assert [(c.name, c.files, c.size) for c in listed] == [("layers", 2, 3000), ("probes", 1, 500)]
    assert (tmp_path / "imagekit" / "layers").is_dir()
    line = cache_line("would remove", listed[0])
    assert line.startswith("would remove cache layers: 2 files, 0.0 MB (") and "layers" in line
    assert clean_caches(dry_run=False) == listed
    assert caches() == [] and (tmp_path / "imagekit" / "unrelated").is_dir()
