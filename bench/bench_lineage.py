"""A measurement before a design (issue 39, goals 1 and 2): would installing each pip stage in
the image's own lineage close the cold CPU build's gap to the hand-written Dockerfile?

Three cold (`--no-cache`) builds of the same content through the same engine API, taking
turns `--runs` times:
- imagekit: the locked deepspeed-cpu render as `imagekit build` renders it (CA and wheelhouse
  in the pip builder stages, each stage's /stage copied into the image);
- lineage: the same render with its pip stages rewritten as the design in
  docs/development/benchmarks.md has them: each stage is a step of the image's own lineage;
  its RUN fetches pip.conf and the CA from a server on the bridge gateway (as
  build/aptauth.py serves apt's credentials), pip reads the wheelhouse from that server,
  installs into /stage, compiles /stage, hard-links it into / and deletes /stage and the
  inputs, all in one layer, so no build input reaches a layer and nothing is copied;
- hand-written: bench/handwritten/Dockerfile.

A prototype for measuring, not a template: `imagekit build` does not build this way.

    python bench/bench_lineage.py [--runs N]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cold import CA, RECIPE, WHEELHOUSE, cold_build  # noqa: E402
from bench_cold import _context as handwritten_context  # noqa: E402

from imagekit.build.lockfile import locked_plan  # noqa: E402
from imagekit.build.render import ContextOptions, render_context, write_context  # noqa: E402
from imagekit.engine.client import Engine  # noqa: E402
from imagekit.recipe.loader import load_recipe  # noqa: E402

INPUTS = "/tmp/imagekit-inputs"
PIP_STAGE = '# ---- pip stage "'
IMAGE_STAGE = "# ---- the image"


def lineage_dockerfile(staged: str, locks: dict[str, str], server: str) -> str:
    """The staged render with its pip stages in the image's lineage (see the docstring)."""
    head = staged[: staged.index(PIP_STAGE)]
    image = staged[staged.index(IMAGE_STAGE) :]
    lines = [head.rstrip(), ""]
    parent = "python"
    for stage, requirements in locks.items():
        fetch = (
            f"python3 -c \"import sys, urllib.request as u; [u.urlretrieve('{server}/' + n, "
            f"'{INPUTS}/' + n) for n in sys.argv[1:]]\" pip.conf ca.pem"
        )
        quoted = " ".join(shlex.quote(line) for line in requirements.splitlines() if line)
        lines += [
            f"FROM {parent} AS pip-{stage}",
            'SHELL ["/bin/bash", "-o", "pipefail", "-c"]',
            f"RUN mkdir -p {INPUTS} && {fetch} \\",
            f" && printf '%s\\n' {quoted} > {INPUTS}/requirements.txt \\",
            f" && SSL_CERT_FILE={INPUTS}/ca.pem PIP_CONFIG_FILE={INPUTS}/pip.conf "
            "PIP_BREAK_SYSTEM_PACKAGES=1 PYTHONHASHSEED=0 \\",
            "    python3 -m pip install --no-cache-dir --no-compile --no-warn-script-location "
            f"--root /stage --no-deps --require-hashes -r {INPUTS}/requirements.txt \\",
            " && python3 -c \"import compileall, py_compile; compileall.compile_dir('/stage', "
            "quiet=2, workers=0, stripdir='/stage', prependdir='/', "
            'invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)" \\',
            f" && cp -al --remove-destination /stage/. / && rm -rf /stage {INPUTS}",
            "",
        ]
        parent = f"pip-{stage}"
    body = [ln for ln in image.splitlines() if not ln.startswith("COPY --from=pip-")]
    body = [f"FROM {parent} AS image" if ln == "FROM python AS image" else ln for ln in body]
    return "\n".join(lines + body) + "\n"


class Inputs:
    """pip.conf, the CA and the wheelhouse served on the bridge gateway while builds run."""

    def __init__(self, engine: Engine, root: Path) -> None:
        gateway, _ = engine.bridge_gateway()
        handler = functools.partial(_Quiet, directory=str(root))
        self.server = ThreadingHTTPServer((gateway, 0), handler)
        self.url = f"http://{gateway}:{self.server.server_address[1]}"
        shutil.copy(CA, root / "ca.pem")
        (root / "wheelhouse").mkdir()
        for wheel in WHEELHOUSE.glob("*.whl"):
            shutil.copy(wheel, root / "wheelhouse" / wheel.name)
        (root / "pip.conf").write_text(
            f"[global]\ndisable-pip-version-check = true\nfind-links = {self.url}/wheelhouse/\n"
            f"cert = {INPUTS}/ca.pem\ntrusted-host = {gateway}\n"
        )
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    engine = Engine.connect()
    plan, _ = locked_plan(load_recipe(RECIPE), locked=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "served").mkdir()
        inputs = Inputs(engine, tmp / "served")
        options = ContextOptions(wheelhouse=WHEELHOUSE, ca_bundle=CA)
        context = render_context(plan, options)
        staged = write_context(context, tmp / "staged")
        locks = {stage: context.files[f"imagekit-lock/{stage}.txt"] for stage in plan.pip_locks}
        lineage = write_context(context, tmp / "lineage")
        (lineage / "Dockerfile").write_text(
            lineage_dockerfile(context.files["Dockerfile"], locks, inputs.url)
        )
        (tmp / "hand").mkdir()
        hand = handwritten_context(tmp / "hand")
        builds = {
            "imagekit (staged)": lambda: cold_build(engine, staged),
            "lineage (prototype)": lambda: cold_build(engine, lineage),
            "hand-written": lambda: cold_build(engine, hand, build_args={"BASE": plan.base_image}),
        }
        times: dict[str, list[float]] = {name: [] for name in builds}
        images: dict[str, str] = {}
        for run in range(args.runs):
            order = list(builds)[run % 3 :] + list(builds)[: run % 3]
            for name in order:
                seconds, images[name] = builds[name]()
                times[name].append(seconds)
                print(f"run {run + 1}: {name} {seconds:.1f} s", flush=True)
        inputs.server.shutdown()
    hand_median = statistics.median(times["hand-written"])
    print(f"\n{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores\n")
    print("| build (--no-cache) | runs | median | / hand-written | image size |")
    print("| --- | --- | --- | --- | --- |")
    for name, seconds in times.items():
        size = engine.inspect_image(images[name])["Size"] / 1e9
        median = statistics.median(seconds)
        runs = ", ".join(f"{s:.1f}" for s in seconds)
        print(
            f"| {name} | {runs} s | {median:.1f} s | {median / hand_median:.2f}x | {size:.2f} GB |"
        )
    for image in images.values():
        engine.api.remove_image(image, force=True)


if __name__ == "__main__":
    main()
