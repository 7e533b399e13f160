"""What is inside an image, as data: its config, its packages (dpkg and pip) and its final
filesystem. Used by `imagekit diff` (what a rebuild or a bump really changed) and by
`imagekit sbom` (a CycloneDX bill of materials)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from imagekit.engine.client import KEEPALIVE, Engine
from imagekit.errors import ImagekitError, ImageUnusableError
from imagekit.files import write_tree
from imagekit.image.layers import Entry, ImageTree, LayerInfo, final_tree, read_files, tree_in_place
from imagekit.image.sbom import cyclonedx
from imagekit.labels import INVENTORY_LABEL

DPKG = "dpkg-query -W -f '${Package}\\t${Version}\\n' 2>/dev/null"
# Every installed distribution, in sys.path order: the first of a name is the one Python
# imports (see `_pip`).
PIP = (
    "python3 -c 'import importlib.metadata as m, json; "
    'print(json.dumps([[(d.metadata["Name"] or "?").lower(), d.version] for d in m.distributions()]))\''
    " 2>/dev/null"
)
# For the SBOM: each package's architecture, source package, dependencies and licenses.
DPKG_DETAILS = (
    "dpkg-query -W -f '${Package}\\t${Version}\\t${Architecture}\\t${source:Package}\\t"
    "${source:Version}\\t${Pre-Depends}, ${Depends}\\n' 2>/dev/null"
)
# DEP-5 copyright files name their licenses on `License:` lines.
DPKG_LICENSES = (
    "for f in /usr/share/doc/*/copyright; do p=${f#/usr/share/doc/}; p=${p%/copyright}; "
    "sed -n 's/^License: *\\([^ ]*\\).*/\\1/p' \"$f\" 2>/dev/null | sort -u | "
    'sed "s|^|$p\\t|"; done'
)
PIP_LICENSES = """
import importlib.metadata as m, json
found = {}
for d in m.distributions():
    md = d.metadata
    text = md.get("License-Expression") or (md.get("License") or "").strip()
    if not text or len(text) > 80:  # a whole license text, not a name: use the classifier
        names = [c.rsplit(" :: ", 1)[-1] for c in md.get_all("Classifier") or []
                 if c.startswith("License ::") and c.count(" :: ") >= 2]
        text = names[0] if names else ""
    found.setdefault((md["Name"] or "?").lower(), text)  # the copy Python imports: the first
print(json.dumps(found))
"""
# Everything the engine keeps in an image's config, but Env and Labels (their own sections).
CONFIG_KEYS = (
    "User",
    "WorkingDir",
    "Entrypoint",
    "Cmd",
    "ExposedPorts",
    "Volumes",
    "StopSignal",
    "Shell",
    "Healthcheck",
    "OnBuild",
)
# What a file's identity is made of. `--strict` adds the times normalisation rewrites.
FILE_FIELDS = ("kind", "mode", "uid", "gid", "link", "xattrs", "size", "sha256")
STRICT_FILE_FIELDS = (*FILE_FIELDS, "mtime")


@dataclass
class Inventory:
    image: str
    image_id: str
    config: dict[str, Any]
    env: dict[str, str]
    labels: dict[str, str]
    dpkg: dict[str, str]
    pip: dict[str, str]
    files: dict[str, Entry] = field(default_factory=dict)
    layers: tuple[LayerInfo, ...] = ()
    history: tuple[dict[str, Any], ...] = ()
    # read for SBOMs only
    os_release: dict[str, str] = field(default_factory=dict)
    created: str = ""
    deb_details: str = ""  # DPKG_DETAILS output
    deb_licenses: str = ""  # DPKG_LICENSES output
    pip_licenses: dict[str, str] = field(default_factory=dict)
    # older copies of a distribution that the one Python imports shadows: (name, version)
    pip_shadowed: tuple[tuple[str, str], ...] = ()


def inventory(
    engine: Engine,
    image: str,
    with_files: bool = True,
    for_sbom: bool = False,
    in_place: bool = True,
    known: dict[str, Any] | None = None,
) -> Inventory:
    """What `diff` and `sbom` compare. The file level is read in place from the engine's
    layer directories where it can be (`tree_in_place`; `known` carries layers already read
    in this run), else from an export; `in_place=False` always exports."""
    info = engine.inspect_image(image)
    config = info["Config"]
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    try:  # by ID: every read below is of one image, even if its tag moves meanwhile
        dpkg, pip, extra = _packages(engine, info["Id"], for_sbom)
    except ImageUnusableError as exc:  # named as the user gave it, not by its ID
        raise ImageUnusableError(image, exc.reason) from None
    inv = Inventory(
        image,
        info["Id"],
        {k: config.get(k) for k in CONFIG_KEYS},
        env,
        config.get("Labels") or {},
        dpkg,
        pip,
        created=info.get("Created", ""),
        **extra,
    )
    if with_files:
        tree = _tree_in_place(engine, info["Id"], known) if in_place else None
        if tree is None:
            with engine.saved_image(info["Id"]) as stream:
                tree = final_tree(stream)
        inv.files, inv.layers = tree.files, tree.layers
        inv.history = tuple(tree.config.get("history", []))
    return inv


def _tree_in_place(engine: Engine, image_id: str, known: dict[str, Any] | None) -> ImageTree | None:
    dirs, config = engine.layer_dirs(image_id), engine.image_config(image_id)
    if dirs is None or config is None:
        return None
    if len(dirs) != len(config.get("rootfs", {}).get("diff_ids", [])):
        return None
    try:
        return tree_in_place(config, dirs, known)
    except OSError:  # the image was removed meanwhile, or a file cannot be read: export it
        return None


OS_RELEASE = "cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release 2>/dev/null"


def _packages(
    engine: Engine, image_id: str, for_sbom: bool
) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """dpkg and pip packages, read in one throwaway container; with `for_sbom`, the details
    a CycloneDX document carries as well."""
    labels = {INVENTORY_LABEL: f"imagekit-inventory-{uuid.uuid4().hex[:8]}"}
    extra: dict[str, Any] = {}
    with engine.container(
        image_id, entrypoint=KEEPALIVE, command=[], user="0", labels=labels
    ) as box:
        dpkg = _pairs(box.read(["/bin/sh", "-c", DPKG])[1])
        code, out = box.read(["/bin/sh", "-c", PIP])
        pip, extra["pip_shadowed"] = _pip(json.loads(out) if code == 0 and out.strip() else [])
        if for_sbom:
            extra["os_release"] = _os_release(box.read(["/bin/sh", "-c", OS_RELEASE])[1])
            extra["deb_details"] = box.read(["/bin/sh", "-c", DPKG_DETAILS])[1]
            extra["deb_licenses"] = box.read(["/bin/sh", "-c", DPKG_LICENSES])[1]
            # the code travels as $0, so no quoting; images without python3 have no pip
            script = 'command -v python3 >/dev/null && exec python3 -c "$0"'
            code, out = box.read(["/bin/sh", "-c", script, PIP_LICENSES])
            extra["pip_licenses"] = json.loads(out) if code == 0 and out.strip() else {}
    return dpkg, pip, extra


def _pip(found: list[list[str]]) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """Each distribution's version as Python imports it (the first of its name on sys.path)
    and the copies that one shadows: pip installing a newer setuptools into /usr/local leaves
    Debian's in /usr/lib/python3, and both ship in the image."""
    imported: dict[str, str] = {}
    shadowed: list[tuple[str, str]] = []
    for name, version in found:
        if name in imported:
            shadowed.append((name, version))
        else:
            imported[name] = version
    return imported, tuple(shadowed)


def _os_release(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            values[key.strip()] = value.strip().strip('"').strip("'")
    return values


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
    what: str = ""  # files: added | removed | changed | moved


@dataclass
class Diff:
    a: str
    b: str
    config: list[Change] = field(default_factory=list)
    env: list[Change] = field(default_factory=list)
    labels: list[Change] = field(default_factory=list)
    dpkg: list[Change] = field(default_factory=list)
    pip: list[Change] = field(default_factory=list)
    layers: list[Change] = field(default_factory=list)
    files: list[Change] = field(default_factory=list)

    SECTIONS = ("config", "env", "labels", "dpkg", "pip", "layers", "files")

    @property
    def same(self) -> bool:
        return not any(getattr(self, name) for name in self.SECTIONS)

    def sections(self) -> dict[str, list[Change]]:
        return {name: getattr(self, name) for name in self.SECTIONS if getattr(self, name)}


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """Added (before None), removed (after None) and changed keys, sorted."""
    return [Change(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def diff(a: Inventory, b: Inventory, strict: bool = False) -> Diff:
    """The semantic view by default: what normalisation would change (file times, history
    times, layer digests that differ only by them) is left out; `strict` shows it too."""
    return Diff(
        a=a.image,
        b=b.image,
        config=compare(a.config, b.config),
        env=compare(a.env, b.env),
        labels=compare(a.labels, b.labels),
        dpkg=compare(a.dpkg, b.dpkg),
        pip=compare(a.pip, b.pip),
        layers=compare_layers(a, b, strict),
        files=compare_files(a.files, b.files, strict),
    )


def compare_layers(a: Inventory, b: Inventory, strict: bool) -> list[Change]:
    """Per layer: the instruction that made it (history), and with `strict` its digest, diff
    ID, size and the history's times."""

    def facts(inv: Inventory) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, layer in enumerate(inv.layers):
            out[f"layer {i}"] = layer.created_by
            if strict:
                out[f"layer {i} digest"] = layer.digest
                out[f"layer {i} diff_id"] = layer.diff_id
                out[f"layer {i} size"] = layer.size
        if strict:
            for i, step in enumerate(inv.history):
                out[f"history {i} created"] = step.get("created")
        return out

    return compare(facts(a), facts(b))


def compare_files(a: dict[str, Entry], b: dict[str, Entry], strict: bool = False) -> list[Change]:
    """Per path: type, mode, owner, link target, xattrs (file capabilities among them),
    size and content; `strict` adds mtime. A file that left one path for another with the
    same content, mode and owner is one "moved" change, not a removal and an addition."""
    fields = STRICT_FILE_FIELDS if strict else FILE_FIELDS
    removed = sorted(p for p in a if p not in b)
    added = sorted(p for p in b if p not in a)
    moves = _moves(a, b, removed, added)
    changes = []
    for path in sorted(set(a) & set(b)):
        before, after = _props(a[path], fields), _props(b[path], fields)
        if before != after:
            keys = [k for k in fields if before[k] != after[k]]
            changes.append(
                Change(path, {k: before[k] for k in keys}, {k: after[k] for k in keys}, "changed")
            )
    moved_from = {new: old for old, new in moves.items()}
    for path in removed:
        if path not in moves:
            changes.append(Change(path, _props(a[path], fields), None, "removed"))
    for path in added:
        if path in moved_from:
            changes.append(Change(path, {"path": moved_from[path]}, {"path": path}, "moved"))
        else:
            changes.append(Change(path, None, _props(b[path], fields), "added"))
    return sorted(changes, key=lambda c: c.key)


def _moves(a, b, removed: list[str], added: list[str]) -> dict[str, str]:
    """old path -> new path, where exactly one removed and one added file match."""

    def identity(e: Entry):
        return (e.kind, e.sha256, e.size, e.mode, e.uid, e.gid, e.link, e.xattrs)

    gone: dict[tuple, list[str]] = {}
    new: dict[tuple, list[str]] = {}
    for path in removed:
        if a[path].kind in ("file", "symlink"):
            gone.setdefault(identity(a[path]), []).append(path)
    for path in added:
        if b[path].kind in ("file", "symlink"):
            new.setdefault(identity(b[path]), []).append(path)
    return {
        olds[0]: new[key][0]
        for key, olds in gone.items()
        if len(olds) == 1 and len(new.get(key, [])) == 1
    }


def _props(entry: Entry, fields: tuple[str, ...]) -> dict[str, Any]:
    shown = {
        "kind": entry.kind,
        "mode": f"{entry.mode:04o}",
        "uid": entry.uid,
        "gid": entry.gid,
        "link": entry.link,
        "xattrs": dict(entry.xattrs),
        "size": entry.size,
        "sha256": entry.sha256,
        "mtime": entry.mtime,
    }
    return {k: shown[k] for k in fields}


# -- the commands' entry points ---------------------------------------------------------


def sbom_of(image: str, recipe: Path | None = None) -> dict:
    from imagekit.build.targets import recipe_plan

    engine = Engine.connect()
    inv = inventory(engine, image, with_files=False, for_sbom=True)
    plan = recipe_plan(recipe)
    base_id = None
    if plan is not None:
        try:
            base_id = engine.inspect_image(plan.base_image)["Id"]
        except ImagekitError:  # not on this machine: named without its digest
            base_id = None
    return cyclonedx(inv, plan, base_id)


def diff_images(
    a: str, b: str, with_files: bool, strict: bool = False, report_dir: Path | None = None
) -> Diff:
    engine = Engine.connect()
    with_files = with_files or report_dir is not None
    known: dict[str, Any] = {}  # layers the two images share are read once
    # --strict compares the layers' export digests and sizes: only an export has them.
    # IMAGEKIT_LAYERS=export forces the export, as it does for check.
    in_place = not strict and os.environ.get("IMAGEKIT_LAYERS", "auto") != "export"
    first, second = (
        inventory(engine, x, with_files, in_place=in_place, known=known) for x in (a, b)
    )
    result = diff(first, second, strict)
    if report_dir is not None:
        write_report_dir(engine, result, first, second, report_dir)
    return result


def write_report_dir(engine: Engine, result: Diff, a: Inventory, b: Inventory, out: Path) -> None:
    """Both versions of every differing regular file (a/PATH, b/PATH: ready for
    `diffoscope out/a out/b`) and summary.json, written atomically (`write_tree`): `out`
    holds the old report or the new one, and a write that fails is exit 15 naming `out`."""
    contents: dict[str, dict[str, bytes]] = {}
    for side, inv in (("a", a), ("b", b)):
        paths = {
            c.key if c.what != "moved" else (c.before["path"] if side == "a" else c.key)
            for c in result.files
        }
        paths = {p for p in paths if p in inv.files and inv.files[p].kind == "file"}
        contents[side] = final_contents(engine, inv, paths) if paths else {}

    def fill(tmp: Path) -> None:
        for side, files in contents.items():
            (tmp / side).mkdir()
            for path, data in files.items():
                target = tmp / side / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)

    write_tree({"summary.json": json.dumps(summary(result), indent=2) + "\n"}, {}, out, fill)


def final_contents(
    engine: Engine, inv: Inventory, paths: set[str], in_place: bool = True
) -> dict[str, bytes]:
    """Each path's final content. In place from the layer that last wrote it, where the
    engine's overlay2 directories are readable here (no export: seconds instead of a re-tar
    of every layer), each file checked against the hash the inventory took from the export;
    else, or on any mismatch, from a second export of the image."""
    dirs = engine.layer_dirs(inv.image_id) if in_place else None
    if dirs is not None and len(dirs) == len(inv.layers):
        try:
            contents = {p: (dirs[inv.files[p].layer] / p).read_bytes() for p in paths}
        except OSError:  # the image was removed meanwhile, or a file is unreadable
            contents = None
        if contents is not None and all(
            hashlib.sha256(data).hexdigest() == inv.files[p].sha256 for p, data in contents.items()
        ):
            return contents
    with engine.saved_image(inv.image_id) as stream:
        return read_files(stream, paths)


def summary(result: Diff) -> dict[str, Any]:
    return {
        "a": result.a,
        "b": result.b,
        "same": result.same,
        "sections": {k: [asdict(c) for c in v] for k, v in result.sections().items()},
    }
