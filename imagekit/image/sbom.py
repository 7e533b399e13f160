"""Inventory -> CycloneDX 1.5 JSON SBOM. Pure: the same inventory gives the same bytes (the
timestamp is the image's own `created`, so a reproducible image has a reproducible SBOM)."""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from imagekit import __version__

if TYPE_CHECKING:  # for annotations only: inventory imports this module to make SBOMs
    from imagekit.image.inventory import Inventory
from imagekit.build.plan import LABEL_PREFIX, Plan

SPEC = "1.5"


def cyclonedx(
    inv: Inventory, plan: Plan | None = None, base_id: str | None = None
) -> dict[str, Any]:
    os_id = inv.os_release.get("ID", "debian") or "debian"
    distro = f"{os_id}-{inv.os_release.get('VERSION_ID', '')}".rstrip("-")
    debs = _debs(inv, os_id, distro)
    components = [_os_component(inv, os_id)] if inv.os_release else []
    components += [c for c, _ in debs.values()]
    components += [_pip_component(inv, name, version) for name, version in sorted(inv.pip.items())]
    components += _shadowed_pip_components(inv)
    components += _outside_packages(inv, plan, debs, base_id)
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC,
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, inv.image_id)}",
        "version": 1,
        "metadata": {
            "timestamp": _timestamp(inv.created),
            "tools": {
                "components": [{"type": "application", "name": "imagekit", "version": __version__}]
            },
            "component": {
                "type": "container",
                "bom-ref": "image",
                "name": inv.image,
                "version": inv.image_id,
            },
        },
        "components": components,
        "dependencies": _dependencies(debs),
    }


def _timestamp(created: str) -> str:
    """The engine's `2023-11-14T22:13:20.123456789Z` as CycloneDX's date-time (seconds)."""
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", created or "")
    return f"{match.group(1)}Z" if match else "1970-01-01T00:00:00Z"


def _os_component(inv: Inventory, os_id: str) -> dict[str, Any]:
    return {
        "type": "operating-system",
        "bom-ref": f"os:{os_id}",
        "name": os_id,
        "version": inv.os_release.get("VERSION_ID", ""),
        "description": inv.os_release.get("PRETTY_NAME", ""),
    }


def _debs(inv: Inventory, os_id: str, distro: str) -> dict[str, tuple[dict, list[str]]]:
    """name -> (component, names it depends on), from dpkg's own fields."""
    licenses = _deb_licenses(inv.deb_licenses)
    out: dict[str, tuple[dict, list[str]]] = {}
    for line in inv.deb_details.splitlines():
        parts = line.split("\t")
        if len(parts) < 6 or not parts[0]:
            continue
        name, version, arch, source, source_version, depends = parts[:6]
        qualifiers = [f"arch={arch}", f"distro={distro}"]
        if source and (source != name or (source_version and source_version != version)):
            upstream = source if source_version in ("", version) else f"{source}@{source_version}"
            qualifiers.append(f"upstream={quote(upstream, safe='@')}")
        purl = f"pkg:deb/{os_id}/{name}@{quote(version, safe='')}?{'&'.join(qualifiers)}"
        component = _library(purl, name, version, "dpkg")
        if licenses.get(name):
            component["licenses"] = [{"license": {"name": n}} for n in licenses[name]]
        out[name] = (component, _depends_names(depends))
    return out


def _library(purl: str, name: str, version: str, source: str) -> dict[str, Any]:
    """A CycloneDX library component; `source` says which package manager listed it."""
    return {
        "type": "library",
        "bom-ref": purl,
        "name": name,
        "version": version,
        "purl": purl,
        "properties": [{"name": "imagekit:source", "value": source}],
    }


def _deb_licenses(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, _, license_name = line.partition("\t")
        if name and license_name and license_name not in found.setdefault(name, []):
            found[name].append(license_name)
    return found


def _depends_names(field: str) -> list[str]:
    """`libc6 (>= 2.34), debconf | debconf-2.0` -> ['libc6', 'debconf'] (an alternative's
    first choice stands for it; the graph keeps only installed packages)."""
    names = []
    for clause in field.split(","):
        first = clause.split("|")[0].strip()
        name = re.split(r"[\s(:]", first, maxsplit=1)[0] if first else ""
        if name and name not in names:
            names.append(name)
    return names


def _dependencies(debs: dict[str, tuple[dict, list[str]]]) -> list[dict[str, Any]]:
    graph = []
    for name in sorted(debs):
        component, depends = debs[name]
        refs = sorted({debs[d][0]["bom-ref"] for d in depends if d in debs and d != name})
        graph.append({"ref": component["bom-ref"], "dependsOn": refs})
    return graph


def _pip_component(inv: Inventory, name: str, version: str) -> dict[str, Any]:
    purl = f"pkg:pypi/{name}@{quote(version, safe='')}"
    component = _library(purl, name, version, "pip")
    license_name = inv.pip_licenses.get(name)
    if license_name:
        component["licenses"] = [{"license": {"name": license_name}}]
    return component


def _shadowed_pip_components(inv: Inventory) -> list[dict[str, Any]]:
    """Copies of a distribution that Python does not import (another copy comes first on its
    path) still ship in the image, and a scanner must see them: listed, and marked."""
    listed = {(name, version) for name, version in inv.pip.items()}
    components = []
    for name, version in sorted(set(inv.pip_shadowed) - listed):
        purl = f"pkg:pypi/{name}@{quote(version, safe='')}"
        component = _library(purl, name, version, "pip")
        component["properties"].append(
            {"name": "imagekit:shadowed-by", "value": f"{name} {inv.pip[name]}"}
        )
        components.append(component)
    return components


def _outside_packages(
    inv: Inventory, plan: Plan | None, debs: dict, base_id: str | None
) -> list[dict[str, Any]]:
    """What neither dpkg nor pip knows: Open MPI built from a tarball, CUDA from a base
    image, and the base image itself, from the recipe's plan or the image's labels."""
    labels = inv.labels
    version = (plan.expected if plan else {}).get("openmpi") or labels.get(
        f"{LABEL_PREFIX}.version.openmpi"
    )
    found: list[dict[str, Any]] = []
    if version and "openmpi-bin" not in debs:
        component: dict[str, Any] = {
            "type": "library",
            "bom-ref": "openmpi",
            "name": "openmpi",
            "version": version,
            "purl": f"pkg:generic/openmpi@{version}",
            "properties": [{"name": "imagekit:source", "value": "tarball"}],
        }
        tarball = plan.openmpi_tarball if plan else None
        if tarball:
            component["hashes"] = [{"alg": "SHA-256", "content": tarball["sha256"]}]
            component["externalReferences"] = [{"type": "distribution", "url": tarball["url"]}]
        found.append(component)
    cuda = (plan.expected if plan else {}).get("cuda") or labels.get(f"{LABEL_PREFIX}.version.cuda")
    if cuda:
        found.append(
            {
                "type": "library",
                "bom-ref": "cuda",
                "name": "cuda",
                "version": cuda,
                "purl": f"pkg:generic/cuda@{cuda}",
                "properties": [{"name": "imagekit:source", "value": "base image"}],
            }
        )
    if plan is not None:
        base: dict[str, Any] = {
            "type": "container",
            "bom-ref": "base-image",
            "name": plan.base_image,
            "properties": [
                {
                    "name": "imagekit:source",
                    "value": "bootstrapped with mmdebstrap" if plan.bootstrap else "registry",
                }
            ],
        }
        if base_id and base_id.startswith("sha256:"):
            base["version"] = base_id
            base["hashes"] = [{"alg": "SHA-256", "content": base_id.removeprefix("sha256:")}]
        found.append(base)
    return found
