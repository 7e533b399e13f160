"""Reproducible images for real: `imagekit lock`, locked builds, vanished pins, and two
clean builds of the locked CPU recipe that must give the same image ID."""

from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest
import yaml

from imagekit.build.lockfile import lock_path, read_lock

from ..conftest import RECIPES, ROOT
from .conftest import CPU_RECIPE, imagekit, start

EPOCH = "1700000000"


@pytest.fixture(scope="module")
def ssh_keys(tmp_path_factory):
    """Keys kept outside the image build, as a platform team would keep them in a vault."""
    keys = tmp_path_factory.mktemp("keys")
    (keys / "host").mkdir()
    (keys / "user").mkdir()
    for kind in ("rsa", "ecdsa", "ed25519"):
        key = keys / "host" / f"ssh_host_{kind}_key"
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(key)], check=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "rsa", "-N", "", "-f", str(keys / "user" / "id_rsa")],
        check=True,
    )
    return keys


def test_two_clean_locked_builds_give_the_same_image_id(engine, ssh_keys):
    flags = ["--locked", "--ssh-keys", str(ssh_keys), "--source-date-epoch", EPOCH, "--plain"]
    # Both from nothing (--no-cache: neither takes a layer the other or an earlier build
    # wrote) and side by side, which takes far less than one after the other.
    flags += ["--no-cache"]
    first = start("build", str(CPU_RECIPE), *flags, "-t", "imagekit-test/repro:first")
    second = start("build", str(CPU_RECIPE), *flags, "-t", "imagekit-test/repro:second")
    outputs = [process.communicate(timeout=1800) for process in (first, second)]
    assert first.returncode == 0, outputs[0][1][-3000:]
    assert second.returncode == 0, outputs[1][1][-3000:]
    assert "normalized from" in outputs[1][0]
    a = engine.inspect_image("imagekit-test/repro:first")
    b = engine.inspect_image("imagekit-test/repro:second")
    if a["Id"] != b["Id"]:
        diff = imagekit("diff", "imagekit-test/repro:first", "imagekit-test/repro:second")
        pytest.fail(f"not reproducible: {a['Id']} != {b['Id']}; imagekit diff:\n{diff.stdout}")
    assert a["RootFS"]["Layers"] == b["RootFS"]["Layers"]
    # Same image ID today proves nothing about a rebuild on another day: every /etc/shadow
    # entry (openssh-server's sshd user among them) carries the epoch's day, not the build's.
    shadow = engine.run_once("imagekit-test/repro:second", ["cat", "/etc/shadow"], user="0")
    days = {line.split(":")[0]: line.split(":")[2] for line in shadow.splitlines() if line}
    late = {user: day for user, day in days.items() if day and int(day) > int(EPOCH) // 86400}
    assert not late, f"/etc/shadow stamped with the build's day, not the epoch's: {late}"
    # bit-identical builds compare equal even with times shown
    strict = imagekit("diff", "imagekit-test/repro:first", "imagekit-test/repro:second", "--strict")
    assert strict.returncode == 0, strict.stdout[-2000:]
    assert a["Created"].startswith("2023-11-14T22:13:20")
    # A normalized image is still a working MPIJob image.
    check = imagekit("check", "imagekit-test/repro:first", "--recipe", str(CPU_RECIPE))
    assert check.returncode == 0, check.stdout[-3000:]


def test_a_pinned_apt_version_that_vanished_is_named(engine, tmp_path):
    recipe = tmp_path / "deepspeed-cpu.yaml"
    shutil.copy(CPU_RECIPE, recipe)
    lock = yaml.safe_load(lock_path(CPU_RECIPE).read_text())
    lock["apt"]["system"]["openssh-server"] = "1:9.2p1-2+deb12u99"
    lock_path(recipe).write_text(yaml.safe_dump(lock, sort_keys=False))
    tag = "imagekit-test/vanished:pin"
    engine.remove_image(tag)
    result = imagekit("build", str(recipe), "--locked", "--plain", "-t", tag)
    assert result.returncode == 14, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert errors == [
        f"ERROR {lock_path(recipe)}: apt package openssh-server=1:9.2p1-2+deb12u99 pinned by "
        "the lock no longer available from the apt sources; run `imagekit lock --upgrade "
        f"{recipe}`, or point --apt-mirror at a snapshot that still has them"
    ]
    assert "Traceback" not in result.stderr
    assert not engine.image_exists(tag)


def test_lock_resolves_writes_and_upgrades(engine, tmp_path):
    recipe = tmp_path / "deepspeed-cpu.yaml"
    shutil.copy(CPU_RECIPE, recipe)
    result = imagekit("lock", str(recipe), "--plain")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"wrote {lock_path(recipe)}" in result.stdout
    lock = read_lock(lock_path(recipe))
    pins = {p.name: p for stage in lock.pip.values() for p in stage}
    assert pins["torch"].version == "2.13.0+cpu" and pins["deepspeed"].version == "0.19.8"
    wheel = next((ROOT / ".cache" / "wheelhouse").glob("torch-2.13.0*.whl"), None)
    if wheel is not None:  # pip took torch from the wheelhouse: the hash is that file's
        assert pins["torch"].sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert [p.name for p in lock.pip["extras"]] == ["mpi4py"]
    assert lock.apt["system"]["openssh-server"] and lock.apt["openmpi"]["openmpi-bin"]
    assert lock.base.content_digest == engine.inspect_image(lock.base.image)["RootFS"]["Layers"][0]
    # The committed lock was resolved the same way: same packages, stage by stage.
    committed = read_lock(lock_path(CPU_RECIPE))
    assert {s: sorted(v) for s, v in lock.apt.items()} == {
        s: sorted(v) for s, v in committed.apt.items()
    }

    before = lock_path(recipe).read_bytes()
    again = imagekit("lock", str(recipe), "--plain")
    assert again.returncode == 0 and "up to date" in again.stdout
    assert lock_path(recipe).read_bytes() == before

    # --upgrade re-resolves; with a pin moved back by hand it shows what it changed
    body = yaml.safe_load(before)
    body["pip"]["extras"][0]["version"] = "4.1.1"
    lock_path(recipe).write_text(yaml.safe_dump(body, sort_keys=False))
    upgraded = imagekit("lock", str(recipe), "--upgrade", "--plain")
    assert upgraded.returncode == 0, upgraded.stderr[-2000:]
    assert "~ pip:mpi4py 4.1.1 -> 4.1.2" in upgraded.stdout


def test_a_variant_lock_keeps_its_parents_pins_and_a_bump_moves_only_what_it_needs(
    engine, tmp_path
):
    """A DeepSpeed bump in a variant of a locked recipe: the variant's lock starts from the
    parent's pins (older than what PyPI serves today, planted here), so the torch stage stays
    byte-identical and cached; only DeepSpeed moves. A parent pin the archive dropped falls
    back to apt's candidate; earlier pins that cannot fit are dropped with one message."""
    parent = tmp_path / "deepspeed-cpu.yaml"
    shutil.copy(CPU_RECIPE, parent)
    body = yaml.safe_load(lock_path(CPU_RECIPE).read_text())
    planted = {"filelock": "3.13.1", "tqdm": "4.66.1"}
    for pins in body["pip"].values():
        for pin in pins:
            pin["version"] = planted.get(pin["name"], pin["version"])
    body["apt"]["system"]["openssh-server"] = "1:9.2p1-2+deb12u99"
    lock_path(parent).write_text(yaml.safe_dump(body, sort_keys=False))
    variant = tmp_path / "bump.yaml"
    variant.write_text('extends: deepspeed-cpu.yaml\nname: bump\ndeepspeed: {version: "0.19.7"}\n')

    result = imagekit("lock", str(variant), "--plain")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"starting from the pins of {lock_path(parent)}" in result.stderr + result.stdout
    lock = read_lock(lock_path(variant))
    versions = {p.name: p.version for stage in lock.pip.values() for p in stage}
    assert versions["deepspeed"] == "0.19.7"
    assert versions["filelock"] == "3.13.1" and versions["tqdm"] == "4.66.1"
    torch_stage = {(p["name"], p["version"]) for p in body["pip"]["torch"]}
    assert {(p.name, p.version) for p in lock.pip["torch"]} == torch_stage
    committed = read_lock(lock_path(CPU_RECIPE))
    assert lock.apt["system"]["openssh-server"] == committed.apt["system"]["openssh-server"]
    assert lock.apt == committed.apt

    # The variant's own stale lock now holds a pin no index has: pip cannot keep it, says
    # so, and resolves afresh.
    stale = yaml.safe_load(lock_path(variant).read_text())
    stale["pip"]["deepspeed"] = [
        {**pin, "version": "0.0.1"} if pin["name"] == "tqdm" else pin
        for pin in stale["pip"]["deepspeed"]
    ]
    lock_path(variant).write_text(yaml.safe_dump(stale, sort_keys=False))
    variant.write_text(variant.read_text().replace("0.19.7", "0.19.8"))
    again = imagekit("lock", str(variant), "--plain")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "the earlier pins do not fit the recipe's changes; resolving afresh" in (
        again.stderr + again.stdout
    )
    relocked = {p.name: p.version for s in read_lock(lock_path(variant)).pip.values() for p in s}
    assert relocked["deepspeed"] == "0.19.8" and relocked["tqdm"] != "0.0.1"


def test_lock_of_a_registry_base_that_is_not_here_is_one_line(engine):
    recipe = RECIPES / "deepspeed-cu122.yaml"
    result = imagekit("lock", str(recipe), "--plain")
    assert result.returncode == 14
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("ERROR base nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04: not in the engine")
    )
    assert not lock_path(recipe).exists()
