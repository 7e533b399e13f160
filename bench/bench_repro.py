"""Reproducibility benchmark for a recipe (default recipes/deepspeed-cpu.yaml): how long
`imagekit lock` takes, and what the post-build normalization costs next to the build it follows
(time and bytes), over two clean locked builds whose image IDs must match. Prints a table; run
with `.venv/bin/python bench/bench_repro.py [RECIPE]` (recipes/deepspeed-gpu.yaml: about 35
minutes and ~35 GB of disk on a 2-core machine; each build's builder stages are removed
once it is done).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docker.errors  # noqa: E402
from common import ROOT, table, timed_build, timed_lock  # noqa: E402

from imagekit.engine.client import Engine  # noqa: E402

RECIPE = (
    Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT / "recipes" / "deepspeed-cpu.yaml"
)


def make_keys(directory: Path) -> Path:
    (directory / "host").mkdir(parents=True)
    (directory / "user").mkdir()
    for kind in ("rsa", "ecdsa", "ed25519"):
        key = directory / "host" / f"ssh_host_{kind}_key"
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(key)], check=True)
    user = directory / "user" / "id_rsa"
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-N", "", "-f", str(user)], check=True)
    return directory


def image_ids() -> set[str]:
    return {image["Id"] for image in Engine.connect().api.images(all=True)}


def drop_builder_stages(before: set[str], keep: str) -> None:
    """The untagged images a build made besides its result (builder stages: for the GPU
    recipe ~20 GB), so the second clean build does not need twice the disk."""
    api = Engine.connect().api
    for image in api.images(all=True):
        tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
        if image["Id"] not in before and image["Id"] != keep and not tags:
            try:
                api.remove_image(image["Id"])
            except docker.errors.APIError:  # a parent of the result, or in use
                pass


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / RECIPE.name
        shutil.copy(RECIPE, copy)
        _, lock_s = timed_lock(copy)  # a full resolution (the python stage may be cached)
        _, fresh_s = timed_lock(copy)  # nothing to do: the lock is fresh
        keys = make_keys(Path(tmp) / "keys")
        runs = []
        for _ in range(2):
            before = image_ids()
            result, seconds, _ = timed_build(
                copy, no_cache=True, locked=True, ssh_keys=keys, normalize=True
            )
            runs.append((result, seconds))
            drop_builder_stages(before, keep=result.image_id)
    (a, a_s), (b, b_s) = runs
    rows = [
        ("imagekit lock (resolve apt + pip)", f"{lock_s:.1f} s", ""),
        ("imagekit lock, lock already fresh", f"{fresh_s:.2f} s", ""),
    ]
    for label, (result, seconds) in (("first", runs[0]), ("second", runs[1])):
        n = result.normalized
        build_s = seconds - n.seconds
        rows += [
            (f"{label} clean locked build, builder", f"{build_s:.1f} s", ""),
            (
                f"{label} normalization",
                f"{n.seconds:.1f} s",
                f"{n.seconds / build_s:.0%} of the build",
            ),
            (f"{label} normalization bytes", f"{n.bytes / 1e9:.2f} GB", f"{n.clamped} mtimes"),
        ]
    rows.append(("same image ID", str(a.image_id == b.image_id), "True"))
    table(f"imagekit lock + reproducible build: {RECIPE.name}", rows)
    print(f"  image IDs: {a.image_id}\n             {b.image_id}")
    if a.image_id != b.image_id:
        print(f"  see: imagekit diff {a.image_id} {b.image_id}")


if __name__ == "__main__":
    main()
