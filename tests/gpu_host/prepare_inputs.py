"""Write what run.sh reads, from a recipe and its lock (prepare.sh runs this):

- ds_build_env.json: DeepSpeed's build environment as imagekit's plan computes it for the
  image's builder stage (DS_BUILD_* switches, TORCH_CUDA_ARCH_LIST, DS_ACCELERATOR);
- ops.txt: the ops the image's label says are installed (what `imagekit check` probes);
- sdist.txt / wheels.txt: the lock's deepspeed stage (and the typing_extensions pydantic
  needs), less what a GPU host's torch environment already has. The sdist is the lock's
  very file (its sha256 is checked); the binary wheels are for the GPU host's Python, so
  their hashes differ from the lock's.

    python prepare_inputs.py RECIPE OUTDIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from imagekit.build.plan import make_plan
from imagekit.recipe.loader import load_recipe

ALREADY_ON_A_TORCH_HOST = {"einops", "msgpack", "ninja", "numpy", "psutil", "py-cpuinfo", "tqdm"}


def main(recipe: str, out: Path) -> None:
    plan = make_plan(load_recipe(recipe))
    if not plan.ds_build_env:
        raise SystemExit(f"{recipe}: its DeepSpeed ops are not built by pip (cuda.source: wheels)")
    (out / "ds_build_env.json").write_text(json.dumps(plan.ds_build_env, indent=1) + "\n")
    (out / "ops.txt").write_text(plan.labels["io.imagekit.deepspeed.installed-ops"] + "\n")
    lock = yaml.safe_load(Path(recipe).with_suffix(".lock").read_text())
    stages = lock["pip"]
    wanted = [e for e in stages["deepspeed"] if e["name"].lower() not in ALREADY_ON_A_TORCH_HOST]
    wanted += [e for stage in stages.values() for e in stage if e["name"] == "typing_extensions"]
    sdists = [e for e in wanted if e["file"].endswith(".tar.gz")]
    wheels = [e for e in wanted if e not in sdists]
    (out / "sdist.txt").write_text(
        "".join(f"{e['name']}=={e['version']} --hash=sha256:{e['sha256']}\n" for e in sdists)
    )
    (out / "wheels.txt").write_text("".join(f"{e['name']}=={e['version']}\n" for e in wheels))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
