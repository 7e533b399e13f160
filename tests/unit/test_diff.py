"""`imagekit diff` as pure logic: docker-save archives made here, trees and comparisons."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

from imagekit.image.inventory import Inventory, compare_files, diff
from imagekit.image.layers import final_tree, read_files


def _member(name: str, kind=tarfile.REGTYPE, data: bytes = b"", **attrs) -> tuple:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.mode = attrs.pop("mode", 0o644)
    for key, value in attrs.items():
        setattr(info, key, value)
    return info, data


def _layer(*members) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    return buf.getvalue()


def _archive(*layers: bytes, history=None) -> io.BytesIO:
    config = {
        "config": {},
        "rootfs": {
            "type": "layers",
            "diff_ids": [f"sha256:{hashlib.sha256(data).hexdigest()}" for data in layers],
        },
        "history": history or [{"created_by": f"RUN step {i}"} for i in range(len(layers))],
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        names = []
        for i, data in enumerate(layers):
            name = f"blobs/sha256/layer{i}"
            names.append(name)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, body in (
            ("blobs/sha256/config", json.dumps(config).encode()),
            (
                "manifest.json",
                json.dumps([{"Config": "blobs/sha256/config", "Layers": names}]).encode(),
            ),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    buf.seek(0)
    return buf


BASE = _layer(
    _member("run", tarfile.DIRTYPE, mode=0o755),
    _member("run/sshd", tarfile.DIRTYPE, mode=0o755),
    _member("opt", tarfile.DIRTYPE, mode=0o755),
    _member("opt/app", data=b"app", mtime=100),
    _member("opt/link", tarfile.SYMTYPE, linkname="/opt/app", mode=0o777),
    _member("opt/old/config", data=b"cfg"),
    _member("usr/bin/ping", data=b"ping", pax_headers={"SCHILY.xattr.security.capability": "\x01"}),
)


def _tree(*layers):
    return final_tree(_archive(*layers)).files


def _inv(files, name="a", layers=(), history=()) -> Inventory:
    return Inventory(name, name, {}, {}, {}, {}, {}, files, layers, history)


def test_final_tree_applies_whiteouts_and_keeps_every_property():
    files = _tree(BASE, _layer(_member("opt/.wh.app"), _member("opt/old/.wh..wh..opq")))
    assert "opt/app" not in files and "opt/old/config" not in files and "opt/old" not in files
    assert files["opt/link"].kind == "symlink" and files["opt/link"].link == "/opt/app"
    assert files["run/sshd"].kind == "dir" and files["run/sshd"].mode == 0o755
    assert dict(files["usr/bin/ping"].xattrs) == {"security.capability": "01"}
    tree = final_tree(_archive(BASE))
    assert tree.layers[0].created_by == "RUN step 0"
    assert tree.layers[0].diff_id == f"sha256:{hashlib.sha256(BASE).hexdigest()}"


def test_each_kind_of_change_is_seen():
    changed = _layer(
        _member("run/sshd", tarfile.DIRTYPE, mode=0o777),  # R6 broken: mode only
        _member("opt/app", data=b"app", mtime=100, uid=1000),  # owner only
        _member("opt/link", tarfile.SYMTYPE, linkname="/opt/other", mode=0o777),  # retargeted
        _member("usr/bin/ping", data=b"ping"),  # capability dropped
        _member("opt/old/.wh.config"),
        _member("opt/new/config", data=b"cfg"),  # moved
    )
    changes = {c.key: c for c in compare_files(_tree(BASE), _tree(BASE, changed))}
    assert changes["run/sshd"].before == {"mode": "0755"} and changes["run/sshd"].after == {
        "mode": "0777"
    }
    assert changes["opt/app"].before == {"uid": 0} and changes["opt/app"].after == {"uid": 1000}
    assert changes["opt/link"].after == {"link": "/opt/other"}
    assert changes["usr/bin/ping"].before == {"xattrs": {"security.capability": "01"}}
    assert changes["opt/new/config"].what == "moved"
    assert changes["opt/new/config"].before == {"path": "opt/old/config"}
    assert "opt/old/config" not in changes


def test_times_show_only_in_strict_mode():
    later = _layer(_member("opt/app", data=b"app", mtime=200))
    a, b = _tree(BASE), _tree(BASE, later)
    assert compare_files(a, b) == []
    (change,) = compare_files(a, b, strict=True)
    assert change.before == {"mtime": 100} and change.after == {"mtime": 200}


def test_layers_compare_by_instruction_and_strictly_by_digest():
    first = final_tree(_archive(BASE))
    second = final_tree(_archive(BASE, history=[{"created_by": "RUN other"}]))
    a = _inv(first.files, "a", first.layers, tuple(first.config["history"]))
    b = _inv(second.files, "b", second.layers, tuple(second.config["history"]))
    (change,) = diff(a, b).layers
    assert (change.before, change.after) == ("RUN step 0", "RUN other")
    same = diff(a, _inv(first.files, "c", first.layers, tuple(first.config["history"])))
    assert same.same
    # strictly, a layer whose bytes differ (its diff ID) differs even with the same instruction
    other = final_tree(_archive(_layer(_member("x", data=b"x"))))
    c = _inv(other.files, "c", other.layers, tuple(other.config["history"]))
    assert {ch.key for ch in diff(a, c).layers} == set()
    strict = {ch.key for ch in diff(a, c, strict=True).layers}
    assert "layer 0 diff_id" in strict


def test_read_files_returns_the_top_layers_content():
    archive = _archive(BASE, _layer(_member("opt/app", data=b"new")))
    assert read_files(archive, {"opt/app", "opt/old/config"}) == {
        "opt/app": b"new",
        "opt/old/config": b"cfg",
    }


class _LayerDirsEngine:
    """Two overlay2-style layer directories; `saved_image` is the export fallback, counted."""

    def __init__(self, dirs, export: bytes):
        self.dirs, self.export, self.exports = dirs, export, 0

    def layer_dirs(self, image_id):
        return self.dirs

    def saved_image(self, image_id):
        import contextlib

        self.exports += 1
        return contextlib.nullcontext(io.BytesIO(self.export))


def _two_layer_inventory(tmp_path):
    """opt/app written by both layers (the top one wins), opt/base by the bottom one only,
    as directories on disk and as the export they stand for."""
    bottom, top = tmp_path / "0", tmp_path / "1"
    for d, files in (
        (bottom, {"opt/app": b"old\n", "opt/base": b"base\n"}),
        (top, {"opt/app": b"new\n"}),
    ):
        for path, data in files.items():
            (d / path).parent.mkdir(parents=True, exist_ok=True)
            (d / path).write_bytes(data)
    layers = [
        _layer(_member("opt/app", data=b"old\n"), _member("opt/base", data=b"base\n")),
        _layer(_member("opt/app", data=b"new\n")),
    ]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        manifest = json.dumps([{"Config": "c.json", "Layers": ["0.tar", "1.tar"]}]).encode()
        for name, data in (
            ("manifest.json", manifest),
            ("c.json", b"{}"),
            ("0.tar", layers[0]),
            ("1.tar", layers[1]),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tree = final_tree(io.BytesIO(buf.getvalue()))
    inv = Inventory("img", "sha256:x", {}, {}, {}, {}, {}, tree.files, tree.layers)
    return inv, _LayerDirsEngine([bottom, top], buf.getvalue())


def test_report_dir_reads_each_file_in_place_from_the_layer_that_last_wrote_it(tmp_path):
    from imagekit.image.inventory import final_contents

    inv, engine = _two_layer_inventory(tmp_path)
    wanted = {"opt/app", "opt/base"}
    assert final_contents(engine, inv, wanted) == {"opt/app": b"new\n", "opt/base": b"base\n"}
    assert engine.exports == 0
    assert final_contents(engine, inv, wanted, in_place=False) == final_contents(
        engine, inv, wanted
    )
    assert engine.exports == 1


def test_report_dir_never_trusts_a_layer_file_that_does_not_match_the_inventory(tmp_path):
    from imagekit.image.inventory import final_contents

    inv, engine = _two_layer_inventory(tmp_path)
    (tmp_path / "1" / "opt" / "app").write_bytes(b"changed since the inventory\n")
    assert final_contents(engine, inv, {"opt/app"}) == {"opt/app": b"new\n"}
    assert engine.exports == 1
    (tmp_path / "1" / "opt" / "app").unlink()  # gone (the image removed meanwhile)
    assert final_contents(engine, inv, {"opt/app"}) == {"opt/app": b"new\n"}
    assert engine.exports == 2


def test_a_report_dir_that_cannot_be_written_is_exit_15_naming_it_and_keeps_the_old(tmp_path):
    from dataclasses import replace

    import pytest

    from imagekit.errors import OutputError
    from imagekit.image.inventory import Change, Diff, write_report_dir

    inv, engine = _two_layer_inventory(tmp_path)
    result = Diff("a", "b", files=[Change("opt/app", {"size": 4}, {"size": 5}, "changed")])
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(OutputError, match=f"cannot write {blocker}/report: ") as failed:
        write_report_dir(engine, result, inv, inv, blocker / "report")
    assert failed.value.exit_code == 15
    out = tmp_path / "report"
    write_report_dir(engine, result, inv, inv, out)
    assert (out / "a" / "opt" / "app").read_bytes() == b"new\n"
    assert json.loads((out / "summary.json").read_text())["same"] is False
    # A report that fails half-way (the layer file no longer matches the inventory, so the
    # export is read, and this one is broken) leaves the old report whole.
    (out / "summary.json").write_text("old")
    inv.files["opt/app"] = replace(inv.files["opt/app"], sha256="0" * 64)
    engine.export = b"not a docker save archive"
    with pytest.raises(tarfile.TarError):
        write_report_dir(engine, result, inv, inv, out)
    assert (out / "summary.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".report")) == []
