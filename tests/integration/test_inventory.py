"""`imagekit diff` and `imagekit sbom` on real images."""

from __future__ import annotations

import json
import re
from pathlib import Path

from imagekit.plan import make_plan
from imagekit.recipe import load_recipe

from .conftest import imagekit

BUMP = Path(__file__).parent / "recipes" / "deepspeed-bump.yaml"
DEEPSPEED_FILES = re.compile(
    r"(^usr/local/lib/python3\.11/dist-packages/deepspeed[-/_.]"
    r"|^usr/local/bin/(ds|deepspeed)"
    r"|^opt/imagekit/torch-extensions/)"
)


def test_diff_after_a_deepspeed_bump_shows_only_that(cpu_image, tmp_path):
    sbom = tmp_path / "bump.cdx.json"
    built = imagekit("build", str(BUMP), "--plain", "--sbom", str(sbom))
    assert built.returncode == 0, built.stderr[-3000:]
    bumped = make_plan(load_recipe(BUMP)).image
    result = imagekit("diff", cpu_image.ref, bumped, "--format", "json", timeout=900)
    assert result.returncode == 0, result.stderr
    sections = json.loads(result.stdout)
    assert sections["pip"] == [{"key": "deepspeed", "before": "0.19.8", "after": "0.19.7"}]
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
        c["key"] for c in sections.get("files", []) if not DEEPSPEED_FILES.search(c["key"])
    ]
    assert unrelated == []
    components = {c["name"]: c["version"] for c in json.loads(sbom.read_text())["components"]}
    assert components["deepspeed"] == "0.19.7" and components["openmpi-bin"].startswith("4.1.4")


def test_sbom_lists_dpkg_and_pip_packages(cpu_image):
    result = imagekit("sbom", cpu_image.ref, timeout=300)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["bomFormat"] == "CycloneDX" and body["specVersion"] == "1.5"
    purls = {c["purl"].split("@")[0] for c in body["components"]}
    assert {
        "pkg:pypi/torch",
        "pkg:pypi/deepspeed",
        "pkg:pypi/mpi4py",
        "pkg:deb/debian/openssh-server",
        "pkg:deb/debian/openmpi-bin",
    } <= purls


def test_identical_images_have_no_differences(cpu_image):
    result = imagekit("diff", cpu_image.ref, cpu_image.image_id, "--no-files", timeout=300)
    assert result.returncode == 0 and "no differences" in result.stdout
