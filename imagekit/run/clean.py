"""`imagekit clean`: remove what earlier runs left behind after a crash, a SIGKILL or an
engine that went away mid-run. Only objects carrying one of imagekit's run labels, and build
step containers a run recorded by ID (journal.py), are touched; a container of the user's
own, whatever image it runs, is never one of them. Scratch directories of runs whose process
is gone (workdirs.py: ours by name, marker and owner) go too."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from imagekit import workdirs
from imagekit.engine import journal
from imagekit.engine.client import Engine
from imagekit.labels import RUN_LABELS
from imagekit.paths import CACHES, cache_dir


@dataclass(frozen=True)
class Leftover:
    kind: str  # container | network | directory
    name: str
    run: str  # the label and run that created it, e.g. io.imagekit.check=imagekit-check-1a2b


def leftovers(engine: Engine) -> list[Leftover]:
    found: dict[tuple[str, str], Leftover] = {}
    for label in RUN_LABELS:
        containers, networks = engine.labelled(label)
        for kind, items in (("container", containers), ("network", networks)):
            for item in items:
                run = f"{label}={item['labels'].get(label, '')}"
                found[(kind, item["id"])] = Leftover(kind, item["name"], run)
    for container_id, why in journal.recorded().items():
        if engine.container_exists(container_id):
            found[("container", container_id)] = Leftover("container", container_id[:12], why)
        else:
            journal.forget(container_id)  # gone already
    for path in workdirs.stale():
        found[("directory", str(path))] = Leftover("directory", str(path), "process gone")
    # containers first: a network cannot go while a container is attached to it
    order = {"container": 0, "network": 1, "directory": 2}
    return sorted(found.values(), key=lambda x: (order[x.kind], x.run, x.name))


def clean(dry_run: bool) -> list[Leftover]:
    engine = Engine.connect()
    found = leftovers(engine)
    if not dry_run:
        for label in RUN_LABELS:
            engine.remove_labelled(label)
        for container_id in journal.recorded():
            engine.remove_container(container_id)
            journal.forget(container_id)
        for item in found:
            if item.kind == "directory":
                workdirs.remove(Path(item.name))
    return found


@dataclass(frozen=True)
class Cache:
    name: str  # layers, probes, renders, templates
    path: Path
    files: int
    size: int  # bytes


def caches() -> list[Cache]:
    """imagekit's caches that exist, with what they hold. They only grow (every entry is
    valid forever by its key); `imagekit clean --caches` empties them."""
    found = []
    for name in CACHES:
        path = cache_dir(name)
        if path.is_dir():
            files = [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
            found.append(Cache(name, path, len(files), sum(p.stat().st_size for p in files)))
    return found


def clean_caches(dry_run: bool) -> list[Cache]:
    found = caches()
    if not dry_run:
        for cache in found:
            shutil.rmtree(cache.path, ignore_errors=True)
    return found
