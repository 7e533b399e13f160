"""`imagekit diff` and `imagekit sbom` on real images."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from imagekit.build.plan import make_plan
from imagekit.recipe.loader import load_recipe

from .conftest import CPU_RECIPE, imagekit

BUMP = Path(__file__).parent / "recipes" / "deepspeed-bump.yaml"
DEEPSPEED_FILES = re.compile(
    r"(^usr/local/lib/python3\.11/dist-packages/deepspeed[-/_.]"
    r"|^usr/local/bin/(ds|deepspeed)"
    r"|^opt/imagekit/torch-extensions/)"
)


# The recipe generates its host keys and baked key pair with ssh-keygen in a layer: when the
# engine's cache holds several builds of that layer (other tests rebuild the recipe), the
# bump may sit on another one, with other keys. Builds that must match use --ssh-keys.
KEYS_MADE_AT_BUILD = re.compile(r"^(etc/ssh/ssh_host_\w+_key(\.pub)?|root/\.ssh/[\w.]+)$")


def test_diff_after_a_deepspeed_bump_shows_only_that(cpu_image, tmp_path):
    sbom = tmp_path / "bump.cdx.json"
    built = imagekit("build", str(BUMP), "--plain", "--sbom", str(sbom))
    assert built.returncode == 0, built.stderr[-3000:]
    bumped = make_plan(load_recipe(BUMP)).image
    result = imagekit("diff", cpu_image.ref, bumped, "--format", "json", timeout=900)
    assert result.returncode == 1, result.stderr  # they differ: diff(1)'s exit code
    sections = json.loads(result.stdout)
    assert [(c["key"], c["before"], c["after"]) for c in sections["pip"]] == [
        ("deepspeed", "0.19.8", "0.19.7")
    ]
    assert "dpkg" not in sections and "env" not in sections and "config" not in sections
    changed_labels = {c["key"] for c in sections["labels"]}
    assert changed_labels <= {
        "io.imagekit.version.deepspeed",
        "io.imagekit.recipe",
        "io.imagekit.recipe-sha256",
        "org.opencontainers.image.title",
        "org.opencontainers.image.created",
    }, changed_labels
    unrelated = [
        c["key"]
        for c in sections.get("files", [])
        if not DEEPSPEED_FILES.search(c["key"]) and not KEYS_MADE_AT_BUILD.search(c["key"])
    ]
    assert unrelated == []
    components = {c["name"]: c["version"] for c in json.loads(sbom.read_text())["components"]}
    assert components["deepspeed"] == "0.19.7" and components["openmpi-bin"].startswith("4.1.4")


def valid_cyclonedx(text: str) -> dict:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(text)
    assert error is None, error
    return json.loads(text)


def test_sbom_lists_dpkg_and_pip_packages(cpu_image, engine):
    result = imagekit("sbom", str(CPU_RECIPE), timeout=300)
    assert result.returncode == 0, result.stderr
    body = valid_cyclonedx(result.stdout)
    again = imagekit("sbom", str(CPU_RECIPE), timeout=300)
    assert again.stdout == result.stdout  # same image, same bytes
    created = engine.inspect_image(cpu_image.ref)["Created"]
    assert body["metadata"]["timestamp"] == created[:19] + "Z"
    by_name = {c["name"]: c for c in body["components"]}
    assert by_name["debian"]["type"] == "operating-system" and by_name["debian"]["version"] == "12"
    assert "distro=debian-12" in by_name["openssh-server"]["purl"]
    assert "upstream=openssh" in by_name["openssh-server"]["purl"]
    assert any(d["dependsOn"] for d in body["dependencies"])
    assert by_name["apt"].get("licenses"), by_name["apt"]  # a DEP-5 copyright file
    base = [c for c in body["components"] if c.get("bom-ref") == "base-image"]
    assert base and base[0]["version"].startswith("sha256:")
    assert body["bomFormat"] == "CycloneDX" and body["specVersion"] == "1.5"
    purls = {c.get("purl", "").split("@")[0] for c in body["components"]}
    assert {
        "pkg:pypi/torch",
        "pkg:pypi/deepspeed",
        "pkg:pypi/mpi4py",
        "pkg:deb/debian/openssh-server",
        "pkg:deb/debian/openmpi-bin",
    } <= purls
    # pip's setuptools in /usr/local shadows Debian's in /usr/lib/python3: the version given
    # for each name is the one the image's Python imports; the other copy is listed, marked.
    script = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name'].lower(): m.version(d.metadata['Name']) "
        "for d in m.distributions()}))"
    )
    imported = json.loads(engine.run_once(cpu_image.ref, ["python3", "-c", script]))
    pip = [c for c in body["components"] if c.get("purl", "").startswith("pkg:pypi/")]
    shadowed = [c for c in pip if any(p["name"] == "imagekit:shadowed-by" for p in c["properties"])]
    assert {c["name"]: c["version"] for c in pip if c not in shadowed} == imported
    assert [c["name"] for c in shadowed] == ["setuptools"], shadowed
    assert shadowed[0]["version"] != imported["setuptools"]


def test_identical_images_have_no_differences(cpu_image):
    result = imagekit("diff", cpu_image.ref, cpu_image.image_id, "--no-files", timeout=300)
    assert result.returncode == 0 and "no differences" in result.stdout


# cap_net_raw+ep as the kernel stores it (vfs_cap_data revision 2), set without setcap
CAP = "bytes.fromhex('0100000200200000000000000000000000000000')"
BEFORE = f"""FROM {{base}}
RUN mkdir -p /run/sshd /opt/old && chmod 0755 /run/sshd \\
 && echo app > /opt/app && echo cfg > /opt/old/config && ln -s /opt/app /opt/link \\
 && echo ping > /opt/ping \\
 && python3 -c "import os; os.setxattr('/opt/ping', 'security.capability', {CAP})"
LABEL tier=one
"""
AFTER = """FROM {base}
RUN mkdir -p /run/sshd /opt/new && chmod 0777 /run/sshd \\
 && echo app > /opt/app && chown 1000:1000 /opt/app && echo cfg > /opt/new/config \\
 && echo other > /opt/other && ln -s /opt/other /opt/link && echo ping > /opt/ping
LABEL tier=two
"""


def test_diff_sees_modes_owners_links_capabilities_moves_and_labels(
    engine, mini, tmp_path, monkeypatch
):
    """The changes a size-and-hash diff misses: /run/sshd 0755 -> 0777 breaks sshd (R6)."""
    from .images import build

    base = "imagekit-test/apt:latest"  # the corpus' apt layer (python3 to set an xattr)
    a = build(engine, tmp_path / "a", "imagekit-test/diff-a:1", BEFORE.format(base=base), {})
    b = build(engine, tmp_path / "b", "imagekit-test/diff-b:1", AFTER.format(base=base), {})
    report = tmp_path / "report"
    result = imagekit("diff", a, b, "--format", "json", "--report-dir", str(report), timeout=600)
    assert result.returncode == 1, result.stderr[-2000:]
    files = {c["key"]: c for c in json.loads(result.stdout)["files"]}
    assert files["run/sshd"]["before"] == {"mode": "0755"}
    assert files["run/sshd"]["after"] == {"mode": "0777"}
    assert files["opt/app"]["after"] == {"uid": 1000, "gid": 1000}
    assert files["opt/link"]["after"] == {"link": "/opt/other"}
    assert files["opt/new/config"]["what"] == "moved"
    assert files["opt/other"]["what"] == "added"
    assert files["opt/ping"]["before"] == {
        "xattrs": {"security.capability": "0100000200200000000000000000000000000000"}
    }
    assert files["opt/ping"]["after"] == {"xattrs": {}}
    labels = json.loads(result.stdout)["labels"]
    assert [(c["key"], c["before"], c["after"]) for c in labels] == [("tier", "one", "two")]
    # --report-dir: both versions of each differing file, ready for diffoscope
    assert (report / "b" / "opt" / "other").read_text() == "other\n"
    assert (report / "a" / "opt" / "old" / "config").read_text() == "cfg\n"
    summary = json.loads((report / "summary.json").read_text())
    assert summary["same"] is False and "files" in summary["sections"]
    _report_files_read_in_place_match_the_export(engine, a, b, monkeypatch)
    for ref in (a, b):  # a capability set in a RUN layer, a symlink, modes and owners
        _tree_read_in_place_matches_the_export(engine, ref, monkeypatch)
    _diff_exports_only_for_strict_or_when_asked(a, b, monkeypatch)
    text = imagekit("diff", a, b, timeout=600)
    assert text.returncode == 1 and "~ run/sshd: mode 0755 -> 0777" in text.stdout
    # a rebuild without the cache differs only in times: equal unless --strict
    (tmp_path / "a").joinpath("Dockerfile").write_text(BEFORE.format(base=base))
    rebuilt = engine.build(tmp_path / "a", report=lambda event: None, no_cache=True).image_id
    assert rebuilt != engine.inspect_image(a)["Id"]  # the layer's file times differ
    same = imagekit("diff", a, rebuilt, timeout=600)
    assert same.returncode == 0, same.stdout[-2000:]
    strict = imagekit("diff", a, rebuilt, "--strict", "--format", "json", timeout=600)
    assert strict.returncode == 1
    changed = json.loads(strict.stdout)["files"]
    assert changed and all(set(c["before"]) == {"mtime"} for c in changed), changed


def _report_files_read_in_place_match_the_export(engine, a, b, monkeypatch):
    """--report-dir reads the differing files in place from the engine's overlay2 layer
    directories (as root on a local engine, as CI runs): the same bytes as an export, with
    no export at all."""
    from imagekit.image.inventory import final_contents, inventory

    for ref in (a, b):
        inv = inventory(engine, ref)
        paths = {p for p, e in inv.files.items() if e.kind == "file" and p.startswith("opt/")}
        exported = final_contents(engine, inv, paths, in_place=False)
        assert exported and engine.layer_dirs(ref) is not None
        with monkeypatch.context() as m:
            m.setattr(engine, "saved_image", lambda *a, **kw: pytest.fail("exported"))
            assert final_contents(engine, inv, paths) == exported


def test_diff_reads_the_layers_in_place_as_the_export_has_them(engine, cpu_image, monkeypatch):
    """The CPU image (a base tarball from mmdebstrap with hard links, built and normalized
    layers): the tree diff reads from the engine's overlay2 directories and image store is
    the tree of an export, entry for entry, and reading it exports nothing."""
    in_place = _tree_read_in_place_matches_the_export(engine, cpu_image.ref, monkeypatch)
    kinds = {e.kind for e in in_place.files.values()}
    assert len(in_place.files) > 10_000 and {"file", "dir", "symlink", "hardlink"} <= kinds


def _tree_read_in_place_matches_the_export(engine, ref, monkeypatch):
    from imagekit.image.inventory import inventory

    image_id = engine.inspect_image(ref)["Id"]
    exported = inventory(engine, ref, in_place=False)
    assert engine.image_config(image_id) is not None  # root on a local engine, as CI runs
    with monkeypatch.context() as m:
        m.setattr(engine, "saved_image", lambda *a, **kw: pytest.fail("exported"))
        in_place = inventory(engine, ref)
    assert in_place.files == exported.files
    assert in_place.history == exported.history
    assert [(x.diff_id, x.created_by) for x in in_place.layers] == [
        (x.diff_id, x.created_by) for x in exported.layers
    ]
    return in_place


def _diff_exports_only_for_strict_or_when_asked(a, b, monkeypatch):
    """The default diff reads in place; IMAGEKIT_LAYERS=export (the same answer) and
    --strict (which compares the export's layer digests and sizes) export both images."""
    from imagekit.engine.client import Engine
    from imagekit.image.inventory import diff_images

    exports: list[str] = []
    real = Engine.saved_image
    with monkeypatch.context() as m:
        m.setattr(Engine, "saved_image", lambda self, ref: exports.append(ref) or real(self, ref))
        in_place = diff_images(a, b, with_files=True)
        assert exports == [] and not in_place.same
        m.setenv("IMAGEKIT_LAYERS", "export")
        assert diff_images(a, b, with_files=True) == in_place and len(exports) == 2
        m.delenv("IMAGEKIT_LAYERS")
        diff_images(a, b, with_files=True, strict=True)
        assert len(exports) == 4
