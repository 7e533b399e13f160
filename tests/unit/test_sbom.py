"""SBOMs as pure logic: an inventory made here -> CycloneDX 1.5, schema-validated."""

from __future__ import annotations

import json

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from imagekit.build.plan import make_plan
from imagekit.image.inventory import Inventory
from imagekit.image.sbom import cyclonedx
from imagekit.recipe.loader import load_recipe

from ..conftest import RECIPES

DETAILS = "\n".join(
    [
        "openssh-server\t1:9.2p1-2+deb12u3\tamd64\topenssh\t1:9.2p1-2+deb12u3\t, libc6 (>= 2.34), "
        "openssh-client (= 1:9.2p1-2+deb12u3), debconf (>= 0.5) | debconf-2.0",
        "openssh-client\t1:9.2p1-2+deb12u3\tamd64\topenssh\t1:9.2p1-2+deb12u3\t, libc6 (>= 2.34)",
        "libc6\t2.36-9+deb12u9\tamd64\tglibc\t2.36-9+deb12u9\t, libgcc-s1",
        "bash\t5.2.15-2+b7\tamd64\tbash\t5.2.15-2\tdebianutils (>= 5.6-0.1), base-files (>= 2.1.12), ",
    ]
)


def inventory(os_id="ubuntu", version_id="22.04", **labels) -> Inventory:
    return Inventory(
        image="img:1",
        image_id="sha256:" + "a" * 64,
        config={},
        env={},
        labels=labels,
        dpkg={"openssh-server": "1:9.2p1-2+deb12u3"},
        pip={"torch": "2.1.2+cu121", "deepspeed": "0.12.6"},
        os_release={"ID": os_id, "VERSION_ID": version_id, "PRETTY_NAME": "Some OS"},
        created="2023-11-14T22:13:20.123456789Z",
        deb_details=DETAILS,
        deb_licenses="openssh-server\tBSD-2-clause\nopenssh-server\tISC\nbash\tGPL-3+\n",
        pip_licenses={"torch": "BSD-3-Clause", "deepspeed": ""},
    )


def validate(body: dict) -> None:
    error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(json.dumps(body))
    assert error is None, error


def test_purls_take_the_namespace_and_distro_from_os_release():
    body = cyclonedx(inventory())
    validate(body)
    purls = {c["name"]: c.get("purl", "") for c in body["components"]}
    assert purls["openssh-server"] == (
        "pkg:deb/ubuntu/openssh-server@1%3A9.2p1-2%2Bdeb12u3"
        "?arch=amd64&distro=ubuntu-22.04&upstream=openssh"
    )
    # a binNMU: the source version differs from the binary's
    assert purls["bash"].endswith("&upstream=bash@5.2.15-2")
    assert purls["libc6"].endswith("&upstream=glibc")
    (os_component,) = [c for c in body["components"] if c["type"] == "operating-system"]
    assert (os_component["name"], os_component["version"]) == ("ubuntu", "22.04")


def test_dependency_graph_licenses_and_timestamp():
    body = cyclonedx(inventory("debian", "12"))
    validate(body)
    refs = {c["name"]: c.get("bom-ref") for c in body["components"]}
    graph = {d["ref"]: d["dependsOn"] for d in body["dependencies"]}
    # debconf is not installed: left out; the alternative's first choice stands for it
    assert graph[refs["openssh-server"]] == sorted([refs["libc6"], refs["openssh-client"]])
    licenses = {
        c["name"]: [x["license"]["name"] for x in c.get("licenses", [])] for c in body["components"]
    }
    assert licenses["openssh-server"] == ["BSD-2-clause", "ISC"]
    assert licenses["torch"] == ["BSD-3-Clause"] and licenses["deepspeed"] == []
    assert body["metadata"]["timestamp"] == "2023-11-14T22:13:20Z"


def test_same_inventory_same_bytes():
    assert json.dumps(cyclonedx(inventory())) == json.dumps(cyclonedx(inventory()))


def test_tarball_openmpi_cuda_and_the_base_image_from_the_recipe():
    plan = make_plan(load_recipe(RECIPES / "deepspeed-cu124.yaml"))
    body = cyclonedx(inventory(), plan, base_id="sha256:" + "b" * 64)
    validate(body)
    by_ref = {c["bom-ref"]: c for c in body["components"]}
    openmpi = by_ref["openmpi"]
    assert openmpi["version"] == plan.expected["openmpi"]
    assert openmpi["hashes"][0]["content"] == plan.openmpi_tarball["sha256"]
    assert by_ref["cuda"]["version"] == "12.4.1"
    assert by_ref["base-image"]["name"].startswith("nvidia/cuda:12.4.1")
    assert by_ref["base-image"]["hashes"][0]["content"] == "b" * 64


def test_a_distribution_shadowed_on_sys_path_is_listed_and_marked_not_taken_for_the_one_imported():
    """pip installs setuptools 84 into /usr/local; Debian's 66 stays in /usr/lib/python3, later
    on sys.path. Python imports 84: that is the version; 66 still ships and is listed."""
    from imagekit.image.inventory import _pip

    imported, shadowed = _pip(
        [["setuptools", "84.2.1"], ["torch", "2.13.0"], ["setuptools", "66.1.1"]]
    )
    assert imported == {"setuptools": "84.2.1", "torch": "2.13.0"}
    assert shadowed == (("setuptools", "66.1.1"),)
    inv = inventory()
    inv.pip, inv.pip_shadowed = imported, (*shadowed, ("torch", "2.13.0"))  # same version: once
    body = cyclonedx(inv)
    validate(body)
    listed = sorted((c["name"], c["version"]) for c in body["components"] if c["name"] in imported)
    assert listed == [("setuptools", "66.1.1"), ("setuptools", "84.2.1"), ("torch", "2.13.0")]
    (old,) = [c for c in body["components"] if c.get("version") == "66.1.1"]
    assert {"name": "imagekit:shadowed-by", "value": "setuptools 84.2.1"} in old["properties"]
