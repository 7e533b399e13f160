"""`imagekit build` against a real engine: the CPU recipe end to end, and its failure paths."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from imagekit.build.plan import make_plan
from imagekit.image.layers import walk
from imagekit.recipe.loader import load_recipe

from .conftest import CPU_RECIPE, build_env, imagekit, run_in

HERE = Path(__file__).parent


def test_cpu_image_runs_the_stack(engine, cpu_image):
    code, out = run_in(
        engine,
        cpu_image.ref,
        'python -c "import torch, deepspeed, mpi4py; '
        'print(torch.__version__, deepspeed.__version__)"; mpirun --version',
    )
    assert code == 0, out
    assert "2.13.0+cpu 0.19.8" in out
    assert "mpirun (Open MPI) 4.1.4" in out


def test_labels_carry_declared_versions(engine, cpu_image):
    labels = engine.inspect_image(cpu_image.ref)["Config"]["Labels"]
    loaded = load_recipe(CPU_RECIPE)
    assert labels["io.imagekit.recipe"] == "deepspeed-cpu"
    assert labels["io.imagekit.recipe-sha256"] == loaded.sha256
    assert labels["io.imagekit.version.torch"] == "2.13.0+cpu"
    assert labels["io.imagekit.version.deepspeed"] == "0.19.8"
    assert labels["io.imagekit.version.openmpi"] == "4.1.4"
    assert labels["io.imagekit.version.python"] == "3.11"
    for key in ("title", "version", "created", "revision"):
        assert labels[f"org.opencontainers.image.{key}"], key


def test_build_output_reports_id_tags_and_size(cpu_image):
    assert "built sha256:" in cpu_image.output
    assert f"tag   {cpu_image.ref}" in cpu_image.output
    assert " GB " in cpu_image.output


def test_build_only_inputs_never_reach_a_layer(engine, cpu_image, tmp_path):
    env = build_env()
    ca = Path(env["IMAGEKIT_CA_BUNDLE"])
    ca_bytes = ca.read_bytes()
    ca_sha = hashlib.sha256(ca_bytes).hexdigest()
    wheels = {p.name for p in Path(env["IMAGEKIT_WHEELHOUSE"]).glob("*.whl")}
    with engine.saved_image(cpu_image.ref) as stream:
        files = walk(stream, hash_sizes=frozenset({len(ca_bytes)}))
    assert len(files) > 1000  # the walk really saw the image
    assert not [f for f in files if "imagekit-build" in f.path or f.path.endswith("/ca.pem")]
    assert not [f for f in files if f.path.rsplit("/", 1)[-1] in wheels]
    # The distro's own bundle may equal the host's; any other copy of it is a leak.
    leaks = [
        f.path
        for f in files
        if f.sha256 == ca_sha and f.path != "etc/ssl/certs/ca-certificates.crt"
    ]
    assert leaks == []
    history = json.dumps(engine.history(cpu_image.ref))
    assert "BEGIN CERTIFICATE" not in history and "imagekit-build" not in history


def test_failed_step_is_named_and_moves_no_tag(engine, ompi5_image):
    broken = HERE / "recipes" / "broken-apt.yaml"
    ref = make_plan(load_recipe(broken)).image
    assert ref == ompi5_image.ref  # same tag as the good image: it must not move
    result = imagekit("build", str(broken), "--plain")
    assert result.returncode == 5, result.stderr[-2000:]
    assert "imagekit-no-such-package" in result.stderr
    assert "ERROR step " in result.stderr and "failed: RUN imagekit-apt-install" in result.stderr
    assert "E: Unable to locate package imagekit-no-such-package" in result.stderr
    assert "Traceback" not in result.stderr
    assert engine.inspect_image(ref)["Id"] == ompi5_image.image_id
    leftovers = engine.api.containers(all=True, filters={"status": "exited"})
    assert not [c for c in leftovers if "apt-get" in c.get("Command", "")]


def test_a_step_over_the_memory_limit_is_stopped_and_named(engine, cpu_image, tmp_path):
    """#38: a runaway step (mpi4py's MPI.c at -O2 took 23 GB of 24 here) must not take the
    build host down: each RUN runs under a limit, and going over it ends in one named error."""
    from imagekit.errors import BuildError

    base = make_plan(load_recipe(CPU_RECIPE)).base_image
    (tmp_path / "Dockerfile").write_text(
        f"FROM {base}\n"
        # perl-base is essential in Debian: 600 MB in one string, against a 192 MiB limit.
        "RUN perl -e '$x = \"a\" x (600 * 1024 * 1024); print length $x'\n"
    )
    assert engine.default_build_memory() < engine.api.info()["MemTotal"]  # below the host
    try:
        engine.build(tmp_path, report=lambda event: None, memory=192 << 20, no_cache=True)
    except BuildError as exc:
        failure = exc
    else:
        raise AssertionError("the step ran past its memory limit")
    assert failure.message.startswith("step 2/2 was killed (exit 137)")
    assert "memory limit of 192 MiB: RUN perl" in failure.message
    assert "--memory" in failure.hint
    leftovers = engine.api.containers(all=True, filters={"status": "exited"})
    assert not [c for c in leftovers if "perl" in c.get("Command", "")]
    # The same step under a limit it fits in passes: it is the limit that stopped it.
    outcome = engine.build(tmp_path, report=lambda event: None, memory=2 << 30)
    engine.api.remove_image(outcome.image_id, force=True)


def test_ctrl_c_stops_the_build_and_leaves_no_container(engine, cpu_image, tmp_path):
    base = make_plan(load_recipe(CPU_RECIPE)).base_image
    (tmp_path / "Dockerfile").write_text(f"FROM {base}\nRUN sleep 300\n")
    # A job started in the background by a non-interactive shell (as CI runners may start
    # the suite) inherits SIGINT ignored; restore Python's handler, as a terminal would have.
    script = textwrap.dedent(f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import sys
        from pathlib import Path
        from imagekit.engine.client import Engine, Log
        def report(event):
            if isinstance(event, Log):
                print(event.line, flush=True)
        Engine.connect().build(Path({str(tmp_path)!r}), report=report, no_cache=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    container = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "Running in" in line:
            container = line.split()[-1]
            break
    assert container, "the build never reached its RUN step"

    def step_containers(all_: bool) -> list:
        return [c for c in engine.api.containers(all=all_) if c["Id"].startswith(container)]

    assert step_containers(all_=True)  # the RUN step's container exists now
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    proc.stdout.close()
    assert proc.returncode != 0
    deadline = time.monotonic() + 30
    while step_containers(all_=True) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert step_containers(all_=True) == []
