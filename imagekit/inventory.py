"""What is inside an image, as data: its config, its packages (dpkg and pip) and its final
filesystem. Used by `imagekit diff` (what a rebuild or a bump really changed) and by
`imagekit sbom` (a CycloneDX bill of materials)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from imagekit import __version__
from imagekit.engine import KEEPALIVE, Engine
from imagekit.layers import walk

DPKG = "dpkg-query -W -f '${Package}\\t${Version}\\n' 2>/dev/null"
PIP = (
    "python3 -c 'import importlib.metadata as m, json; "
    'print(json.dumps({(d.metadata["Name"] or "?").lower(): d.version for d in m.distributions()}))\''
    " 2>/dev/null"
)
CONFIG_KEYS = ("User", "WorkingDir", "Entrypoint", "Cmd", "ExposedPorts")


@dataclass
class Inventory:
    image: str
    image_id: str
    config: dict[str, Any]
    env: dict[str, str]
    labels: dict[str, str]
    dpkg: dict[str, str]
    pip: dict[str, str]
    files: dict[str, tuple[int, str | None]] = field(default_factory=dict)  # path -> (size, sha)


def inventory(engine: Engine, image: str, with_files: bool = True) -> Inventory:
    info = engine.inspect_image(image)
    config = info["Config"]
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    with engine.container(info["Id"], entrypoint=KEEPALIVE, command=[], user="0") as box:
        dpkg = _pairs(box.exec_run(["/bin/sh", "-c", DPKG]).output.decode())
        code, out = box.exec_run(["/bin/sh", "-c", PIP])
        pip = json.loads(out.decode()) if code == 0 and out.strip() else {}
    inv = Inventory(
        image,
        info["Id"],
        {k: config.get(k) for k in CONFIG_KEYS},
        env,
        config.get("Labels") or {},
        dpkg,
        pip,
    )
    if with_files:
        with engine.saved_image(info["Id"]) as stream:
            for f in walk(stream, hash_sizes=_AllSizes()):
                if not f.shadowed:
                    inv.files[f.path] = (f.size, f.sha256)
    return inv


class _AllSizes(frozenset):
    """A `hash_sizes` that contains every size: hash every file."""

    def __contains__(self, item: object) -> bool:
        return True


def _pairs(text: str) -> dict[str, str]:
    pairs = {}
    for line in text.splitlines():
        name, _, version = line.partition("\t")
        if name and version:
            pairs[name] = version
    return pairs


# -- diff -----------------------------------------------------------------------------------


@dataclass
class Change:
    key: str
    before: Any
    after: Any


@dataclass
class Diff:
    a: str
    b: str
    config: list[Change] = field(default_factory=list)
    env: list[Change] = field(default_factory=list)
    labels: list[Change] = field(default_factory=list)
    dpkg: list[Change] = field(default_factory=list)
    pip: list[Change] = field(default_factory=list)
    files: list[Change] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not any((self.config, self.env, self.labels, self.dpkg, self.pip, self.files))

    def sections(self) -> dict[str, list[Change]]:
        return {
            name: getattr(self, name)
            for name in ("config", "env", "labels", "dpkg", "pip", "files")
            if getattr(self, name)
        }


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """Added (before None), removed (after None) and changed keys, sorted."""
    return [Change(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def diff(a: Inventory, b: Inventory) -> Diff:
    return Diff(
        a=a.image,
        b=b.image,
        config=compare(a.config, b.config),
        env=compare(a.env, b.env),
        labels=compare(a.labels, b.labels),
        dpkg=compare(a.dpkg, b.dpkg),
        pip=compare(a.pip, b.pip),
        files=compare(a.files, b.files),
    )


# -- SBOM -----------------------------------------------------------------------------------


def cyclonedx(inv: Inventory) -> dict[str, Any]:
    """A CycloneDX 1.5 JSON SBOM: every dpkg and pip package with its version and purl."""
    distro = "debian" if "base-files" in inv.dpkg else "deb"
    components = [_component(f"deb/{distro}", "dpkg", n, v) for n, v in sorted(inv.dpkg.items())]
    components += [_component("pypi", "pip", n, v) for n, v in sorted(inv.pip.items())]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, inv.image_id)}",
        "version": 1,
        "metadata": {
            "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": [{"vendor": "imagekit", "name": "imagekit", "version": __version__}],
            "component": {"type": "container", "name": inv.image, "version": inv.image_id},
        },
        "components": components,
    }


def _component(purl_type: str, source: str, name: str, version: str) -> dict[str, Any]:
    return {
        "type": "library",
        "name": name,
        "version": version,
        "purl": f"pkg:{purl_type}/{name}@{version}",
        "properties": [{"name": "imagekit:source", "value": source}],
    }
