"""Stopping cleanly (real processes, real engine): SIGTERM, SIGINT (Ctrl-C, sent to the whole
process group as a terminal does) and SIGHUP end a command within 2 s with 128 + the signal's
number and one line, and leave nothing behind; a SIGKILLed run's leftovers are removed by
`imagekit clean`, which touches nothing of the user's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from imagekit.build.lockfile import lock_path

from .conftest import CPU_RECIPE, imagekit, labelled, slow_profile, wait_for
from .conftest import start as start_imagekit
from .images import build

# Each test compares every container, network and scratch directory before and after a run:
# no build lane may be making its own meanwhile.
pytestmark = pytest.mark.quiet_engine

GRACE = 2.0  # seconds from the signal to the exit


def start(*args: str) -> subprocess.Popen:
    return start_imagekit(
        *args,
        start_new_session=True,  # its own process group, like a job in a terminal
        preexec_fn=_terminal_signals,
    )


def _terminal_signals() -> None:
    """Signals as a job in a terminal has them: a suite started in the background by a
    non-interactive shell passes SIGINT on ignored, and imagekit (rightly) keeps an
    inherited "ignore"."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def stop(proc: subprocess.Popen, signum: int, group: bool) -> tuple[float, str, str]:
    """Send `signum` (to the process group for Ctrl-C); seconds until it exited, output."""
    sent = time.monotonic()
    if group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    return time.monotonic() - sent, out, err


def assert_stopped(proc, seconds: float, err: str, signum: int) -> None:
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, err
    assert seconds <= GRACE, f"took {seconds:.1f}s to stop after {name}"
    errors = [line for line in err.splitlines() if line.startswith("ERROR")]
    assert errors == [f"ERROR interrupted by {name}; removed what this run made"], err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("signum", "group", "after"),
    [
        # A check of mini ends in about 2 s once its container exists: a profile probe that
        # sleeps keeps it running, so "mid" is mid-check also on an idle machine.
        (signal.SIGTERM, False, 0.0),  # while the first container starts
        (signal.SIGTERM, False, 1.5),  # mid-command, the layer walk running
        (signal.SIGINT, True, 2.0),  # Ctrl-C to the whole process group
        (signal.SIGHUP, False, 1.0),
    ],
    ids=["term-start", "term-mid", "ctrl-c-mid", "hup"],
)
def test_check_stops_and_leaves_nothing(engine, mini, tmp_path, signum, group, after):
    report = tmp_path / "r.json"
    proc = start("check", mini, "--report", str(report), "--profile", str(slow_profile(tmp_path)))
    wait_for(lambda: labelled(engine, "io.imagekit.check"), 60, "the check container")
    time.sleep(after)
    seconds, out, err = stop(proc, signum, group)
    assert_stopped(proc, seconds, err, signum)
    assert not report.exists() and "FAILED" not in out  # no verdict
    assert labelled(engine, "io.imagekit.check") == []


@pytest.mark.parametrize(
    ("signum", "group", "label_seen"),
    [(signal.SIGTERM, False, False), (signal.SIGINT, True, True)],
    ids=["term-mid-mpirun", "ctrl-c-at-start"],
)
def test_smoke_stops_and_leaves_nothing(engine, mini, signum, group, label_seen):
    proc = start("smoke", mini, "--workers", "2", "--slots", "1", "--", "sleep", "60")
    wait_for(lambda: labelled(engine, "io.imagekit.smoke"), 60, "a smoke container")
    if not label_seen:  # wait until the command runs in the launcher
        wait_for(lambda: len(labelled(engine, "io.imagekit.smoke")) >= 4, 60, "launcher")
        time.sleep(3)
    seconds, out, err = stop(proc, signum, group)
    assert_stopped(proc, seconds, err, signum)
    assert labelled(engine, "io.imagekit.smoke") == []


def test_build_stops_without_a_tag_or_a_step_container(engine, cpu_image):
    tag = "imagekit-test/signal-build:latest"
    engine.remove_image(tag)
    before = {c["Id"] for c in engine.api.containers(all=True)}
    proc = start("build", str(CPU_RECIPE), "--no-cache", "--plain", "-t", tag)
    lines = []

    def in_a_run_step() -> bool:
        lines.append(proc.stderr.readline())
        return ": RUN " in lines[-1]

    wait_for(in_a_run_step, 300, "a RUN step")
    time.sleep(2)
    seconds, out, rest = stop(proc, signal.SIGTERM, False)
    assert_stopped(proc, seconds, "".join(lines) + rest, signal.SIGTERM)
    assert not engine.image_exists(tag)
    wait_for(
        lambda: {c["Id"] for c in engine.api.containers(all=True)} <= before, 30, "no step left"
    )


def test_sigkill_leftovers_are_cleaned_and_nothing_else(engine, mini):
    proc = start("smoke", mini, "--workers", "1", "--slots", "1", "--", "sleep", "60")
    wait_for(lambda: len(labelled(engine, "io.imagekit.smoke")) >= 3, 60, "launcher")
    proc.kill()
    proc.communicate(timeout=30)
    left = labelled(engine, "io.imagekit.smoke")
    assert left, "a SIGKILLed run cannot clean up: its containers must still be there"
    with engine.container(mini, entrypoint=["sleep", "600"]) as mine:
        listed = imagekit("clean", "--dry-run", timeout=120)
        assert listed.returncode == 0
        assert all(name in listed.stdout for name in left) and mine.name not in listed.stdout
        assert labelled(engine, "io.imagekit.smoke") != []  # a dry run removes nothing
        result = imagekit("clean", timeout=120)
        assert result.returncode == 0, result.stderr
        assert labelled(engine, "io.imagekit.smoke") == []
        assert mine.status() == "running"


def test_publish_stops_mid_push_without_a_tag(engine, cpu_image, tmp_path):
    """SIGTERM while layers upload: exit 143 in time, the registry has no tag (the manifest
    goes last), and the local push tag publish made is gone again."""
    from imagekit.engine.registry import RegistryClient

    from .test_publish import Registry

    reg = Registry(tmp_path).start()
    try:
        name, tag = cpu_image.ref.rsplit(":", 1)
        pushed = f"{reg.host}/{name}:{tag}"
        proc = start("publish", cpu_image.ref, "--registry", reg.host, "--no-require-check")
        lines = []

        def pushing() -> bool:
            lines.append(proc.stderr.readline())
            return "Pushing" in lines[-1]

        wait_for(pushing, 300, "a layer upload")
        seconds, out, rest = stop(proc, signal.SIGTERM, False)
        assert_stopped(proc, seconds, "".join(lines) + rest, signal.SIGTERM)
        assert RegistryClient.for_repository(f"{reg.host}/{name}").config_digest(tag) is None
        assert not engine.image_exists(pushed)
    finally:
        reg.stop()


def _made(engine) -> tuple[set[str], set[str], set[str]]:
    """What exists that a run could have made: containers, networks, imagekit scratch dirs."""
    containers = {c["Id"] for c in engine.api.containers(all=True)}
    networks = {n["Id"] for n in engine.api.networks()}
    scratch = {p.name for p in Path(tempfile.gettempdir()).glob("imagekit-*")}
    return containers, networks, scratch


def _until_a_run_step(proc: subprocess.Popen) -> None:
    def in_a_run_step() -> bool:
        line = proc.stderr.readline()
        assert line or proc.poll() is None, "ended before its first RUN step"
        return ": RUN " in line

    wait_for(in_a_run_step, 300, "a RUN step")


def _until_labelled(engine, label: str, count: int = 1):
    def wait(proc: subprocess.Popen) -> None:
        wait_for(lambda: len(labelled(engine, label)) >= count, 120, f"{label} x{count}")
        time.sleep(1)

    return wait


@pytest.mark.parametrize("command", ["build", "lock", "check", "smoke", "adapt"])
def test_sigkill_mid_run_then_clean_leaves_nothing_it_made(engine, mini, tmp_path, command):
    """Each long command SIGKILLed mid-run (it cannot clean up): `imagekit clean` then
    removes every container, network and scratch directory it made, and no tag or lock is
    left half-made."""
    recipe = tmp_path / "deepspeed-cpu.yaml"
    shutil.copy(CPU_RECIPE, recipe)
    tag = f"imagekit-test/sigkill-{command}:1"
    engine.remove_image(tag)
    runs = {
        "build": (["build", str(CPU_RECIPE), "--no-cache", "--plain", "-t", tag], _until_a_run_step),
        "lock": (["lock", str(recipe), "--plain"], _until_a_run_step),
        "check": (
            ["check", mini, "--profile", str(slow_profile(tmp_path))],
            _until_labelled(engine, "io.imagekit.check"),
        ),
        "smoke": (
            ["smoke", mini, "--workers", "1", "--slots", "1", "--", "sleep", "60"],
            _until_labelled(engine, "io.imagekit.smoke", 3),
        ),
        # Without openssh-server, adapt's one RUN installs it from the archive: seconds, so
        # the kill lands mid-build (a quick RUN had finished and tagged before the kill).
        "adapt": (["adapt", "ADAPT_SOURCE", "--plain", "--tag", tag], _until_a_run_step),
    }  # fmt: skip
    args, mid_run = runs[command]
    if command == "adapt":
        source = build(
            engine,
            tmp_path / "adapt-source",
            "imagekit-test/sigkill-adapt-source:1",
            f"FROM {mini}\nRUN apt-get remove -y --purge openssh-server\n",
            {},
        )
        args = [source if a == "ADAPT_SOURCE" else a for a in args]
    before = _made(engine)
    proc = start(*args)
    mid_run(proc)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    def new() -> list[set[str]]:
        return [now - then for now, then in zip(_made(engine), before, strict=True)]

    assert any(new()), "a SIGKILLed run leaves something: the test would prove nothing"
    listed = imagekit("clean", "--dry-run", timeout=120)
    assert listed.returncode == 0, listed.stderr
    for name in new()[2]:  # its scratch directory is listed as what clean removes
        assert name in listed.stdout, listed.stdout
    result = imagekit("clean", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    # A build's step container is the engine's to stop when the client goes (it does).
    wait_for(lambda: not any(new()), 60, f"nothing of the killed {command} left: {new()}")
    assert not engine.image_exists(tag)
    assert not lock_path(recipe).exists()
