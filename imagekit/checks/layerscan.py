"""What the layer checks (SEC) know of every file of every layer, and a cache of it keyed by
each layer's diff ID: a layer's diff ID is the sha256 of its content, so what a scan found
in it stays true for as long as the scan's rules do. A second check of the same image, or of
one on the same base, reads only the layers it has not seen.

The cache holds what was found (paths, sizes, modes and masked findings), never a file's
bytes: a private key in an image never lands in the user's cache. An entry that does not
parse, was written for other rules, names another layer, fails its own digest, or is not
the user's own (another owner, group- or world-writable) is ignored and the layer is read
again; an entry is never trusted for more than what it says."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from imagekit.credentials import CONFIG_FILES, CREDENTIAL_FILES, file_findings
from imagekit.engine.client import Engine
from imagekit.files import write_bytes_atomic
from imagekit.image.layers import LayerFile, stack, walk_dir, walk_layers
from imagekit.paths import cache_dir, cache_off, users_own

FORMAT = 1
PRIVATE_KEY = "private-key"  # the head holds a PEM/OpenSSH private key
CERTIFICATE = "certificate"  # the head holds a PEM certificate
CREDENTIAL = "credential: "  # prefix of each masked credential finding


def worth_reading(path: str, size: int) -> bool:
    """Small files where keys, certificates or credentials hide; their heads are read: every
    text-sized file under /etc (apt sources and auth, environment, profile.d, pip and conda
    configs), home directories, temp directories, and credential files wherever they sit."""
    name = path.rsplit("/", 1)[-1]
    if size > 64 * 1024 or name.endswith((".pub", ".py", ".pyc", ".so", ".h", ".html")):
        return False
    return (
        "/.ssh/" in f"/{path}"
        or path.startswith(("etc/", "tmp/", "root/", "home/", "var/tmp/"))
        or name.endswith((".pem", ".crt", ".key", ".conf", ".netrc", ".json", ".cfg", "rc"))
        or CREDENTIAL_FILES.search(path) is not None
        or CONFIG_FILES.search(path) is not None
    )


def scan_file(path: str, head: bytes | None) -> tuple[str, ...]:
    """What the layer checks judge about one file, from its path and first bytes."""
    found = []
    if head is not None and b"PRIVATE KEY-----" in head:
        found.append(PRIVATE_KEY)
    if head is not None and b"BEGIN CERTIFICATE" in head:
        found.append(CERTIFICATE)
    found.extend(CREDENTIAL + reason for reason in file_findings(path, head))
    return tuple(found)


def scanned(files: list[LayerFile]) -> list[LayerFile]:
    """The files with their findings, their heads dropped (nothing downstream needs bytes)."""
    result = []
    for f in files:
        found = scan_file(f.path, f.head)
        result.append(f if f.head is None and not found else replace(f, head=None, findings=found))
    return result


@dataclass(frozen=True)
class ScanResult:
    files: list[LayerFile]  # every layer, numbered and marked shadowed (layers.stack)
    source: str  # how the layers were read, for the report


def scan_image(engine: Engine, image_id: str, cache: LayerCache | None, mode: str) -> ScanResult:
    """Every layer's files and findings: from the cache where it knows the layer, else in
    place from the engine's overlay2 directories where this process can read them (seconds),
    else from an export (`docker save`; the engine re-tars every layer). mode "export" forces
    the export; both give the same files (tested)."""
    diff_ids = list((engine.inspect_image(image_id).get("RootFS") or {}).get("Layers") or [])
    known = [cache.get(d) if cache else None for d in diff_ids]
    read, how = None, "read in place (overlay2)"
    dirs = engine.layer_dirs(image_id) if mode != "export" else None  # one per diff ID
    if dirs is not None:
        try:
            read = [
                None if k is not None else walk_dir(d, worth_reading)
                for k, d in zip(known, dirs, strict=True)
            ]
        except OSError:  # the image was removed meanwhile, or a directory is unreadable
            read = None
    if read is None:
        how = "read from an export of the image"
        skip = frozenset(
            d.removeprefix("sha256:") for d, k in zip(diff_ids, known, strict=True) if k is not None
        )
        with engine.saved_image(image_id) as stream:
            read = walk_layers(stream, inspect=worth_reading, skip=skip)
        if len(read) != len(diff_ids):  # layers not paired with diff IDs: no cache at all
            with engine.saved_image(image_id) as stream:
                read = walk_layers(stream, inspect=worth_reading)
            diff_ids, known = [], [None] * len(read)
    layers = []
    for index, (cached, files) in enumerate(zip(known, read, strict=True)):
        if cached is None:
            cached = scanned(files or [])
            if cache is not None and diff_ids:
                cache.put(diff_ids[index], cached)
        layers.append(cached)
    hits = sum(k is not None for k in known)
    source = f"{len(layers)} layers: {hits} from the cache, {len(layers) - hits} {how}"
    return ScanResult(stack(layers), source)


def rules_fingerprint() -> str:
    """Changes whenever what a scan finds could change: the source of the scan and of the
    credential patterns, and the entry format."""
    digest = hashlib.sha256(f"format {FORMAT}\n".encode())
    package = resources.files("imagekit")
    for name in ("credentials.py", "checks/layerscan.py", "image/layers.py"):
        digest.update(package.joinpath(name).read_bytes())
    return digest.hexdigest()


class LayerCache:
    """Scan results by diff ID under one directory (default: $XDG_CACHE_HOME/imagekit/layers).
    Writes are atomic (a reader sees a whole entry or none); every failure to read or write
    only costs a rescan."""

    def __init__(self, directory: Path, rules: str | None = None):
        self.rules = rules or rules_fingerprint()
        self.directory = directory / self.rules[:16]

    @classmethod
    def default(cls) -> LayerCache | None:
        """The user's cache, or None where IMAGEKIT_LAYER_CACHE=off."""
        if cache_off("IMAGEKIT_LAYER_CACHE"):
            return None
        return cls(cache_dir("layers"))

    def _path(self, diff_id: str) -> Path:
        return self.directory / f"{diff_id.removeprefix('sha256:')}.json.gz"

    def get(self, diff_id: str) -> list[LayerFile] | None:
        path = self._path(diff_id)
        try:
            info = path.stat()
            if not users_own(info):
                return None  # not the user's own: another user could have planted it
            entry = json.loads(gzip.decompress(path.read_bytes()))
            files = _entry_files(entry, diff_id, self.rules)
        except (OSError, ValueError, TypeError, KeyError, EOFError):
            return None
        return files

    def put(self, diff_id: str, files: list[LayerFile]) -> None:
        rows = [[f.path, f.size, f.mode, list(f.findings)] for f in files]
        entry = {
            "format": FORMAT,
            "rules": self.rules,
            "diff_id": diff_id,
            "files": rows,
            "sha256": _digest(rows),
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            data = gzip.compress(json.dumps(entry).encode(), compresslevel=1)
            write_bytes_atomic(self._path(diff_id), data)
        except OSError:
            pass  # a full or read-only cache: the next check reads the layer again


def _entry_files(entry: dict[str, Any], diff_id: str, rules: str) -> list[LayerFile] | None:
    if entry.get("format") != FORMAT or entry.get("rules") != rules:
        return None
    if entry.get("diff_id") != diff_id or entry.get("sha256") != _digest(entry["files"]):
        return None
    files = []
    for path, size, mode, findings in entry["files"]:
        if not (isinstance(path, str) and isinstance(size, int) and isinstance(mode, int)):
            return None
        if not all(isinstance(x, str) for x in findings):
            return None
        files.append(LayerFile(-1, path, size, mode, findings=tuple(findings)))
    return files


def _digest(rows: list[Any]) -> str:
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


# -- private keys: whose they are ---------------------------------------------------------

KEY_NAMES = re.compile(r"(^|/)(ssh_host_\w+_key|id_(rsa|dsa|ecdsa|ed25519)(_sk)?)$")
# Where package managers put files: a key there came with a public wheel or deb (test
# fixtures: fsspec's keycert.pem, tornado's test.key, ...), so it is no secret of this image.
PACKAGE_FILES = re.compile(r"(^|/)lib/python3[^/]*/(site|dist)-packages/|^usr/share/")


def where(f) -> str:
    return f"/{f.path} (layer {f.layer}{', deleted later but still shipped' if f.shadowed else ''})"


def key_kind(path: str) -> str:
    """host (sshd's), user (anything else a login could use), or package (shipped inside
    an installed package; an ssh key file name is never that)."""
    if path.startswith("etc/ssh/"):
        return "host"
    if PACKAGE_FILES.search(path) and not KEY_NAMES.search(path):
        return "package"
    return "user"


def sort_keys(found, allowed: set[str]) -> tuple[list[str], list[str], list[str]]:
    """(undeclared, declared, inside packages), each as "KIND key /PATH (layer N)". A key
    deleted in a later layer is undeclared whatever its kind: it still ships, unintended."""
    bad, declared, packaged = [], [], []
    for f in found:
        kind = key_kind(f.path)
        entry = f"{kind} key {where(f)}"
        if kind == "package" and not f.shadowed:
            packaged.append(entry)
        elif kind in allowed and not f.shadowed:
            declared.append(entry)
        else:
            bad.append(entry)
    return bad, declared, packaged
