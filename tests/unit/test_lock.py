"""Lock files as data: parsing resolver output, splitting pins over stages, staleness,
rendering a locked plan, and the CLI's errors for missing, stale and malformed locks."""

from __future__ import annotations

import os
import shutil

import pytest
import yaml

from imagekit.build.lockfile import (
    Lock,
    LockedBase,
    LockError,
    PipPin,
    apply_lock,
    apt_preferences,
    apt_stage_pins,
    cumulative_packages,
    dump_lock,
    inputs_sha256,
    lock_changes,
    lock_path,
    locked_plan,
    missing_apt_pins,
    parse_apt_simulation,
    pip_constraints,
    pip_stage_pins,
    read_lock,
    unhashed_files,
)
from imagekit.build.plan import make_plan
from imagekit.build.render import render_context
from imagekit.platforms import split_lock_name
from imagekit.recipe.loader import load_recipe

from ..conftest import RECIPES, ROOT
from .test_cli import run

TEST_RECIPES = ROOT / "tests" / "integration" / "recipes"
SIMULATION = """\
NOTE: This is only a simulation!
Inst libbsd0 (0.11.7-2 Debian:12.15/oldstable [amd64])
Inst bash [5.2.15-2] (5.2.15-2+b7 Debian:12.15/oldstable [amd64])
Inst libc6:amd64 (2.36-9+deb12u14 Debian:12.15/oldstable [amd64])
Conf libbsd0 (0.11.7-2 Debian:12.15/oldstable [amd64])
"""


def test_parse_apt_simulation_reads_inst_lines_only():
    assert parse_apt_simulation(SIMULATION) == {
        "libbsd0": "0.11.7-2",
        "bash": "5.2.15-2+b7",  # an upgrade: the new version, not the installed one
        "libc6": "2.36-9+deb12u14",  # the :arch qualifier is not part of the name
    }


def test_missing_apt_pins_names_each_package():
    text = (
        "E: Version '5.2.15-2+b99' for 'bash' was not found\n"
        "E: Version '9' for 'procps' was not found\n"
    )
    assert missing_apt_pins(text) == ["bash=5.2.15-2+b99", "procps=9"]


def cpu_plan():
    return make_plan(load_recipe(RECIPES / "deepspeed-cpu.yaml"))


def test_apt_stages_follow_the_dockerfile():
    stages = cpu_plan().apt_stages
    assert [(s.name, s.after) for s in stages] == [
        ("system", None),
        ("openmpi", "system"),
        ("python", "openmpi"),
    ]
    cumulative = cumulative_packages(stages)
    assert cumulative["python"][:2] == ("bash", "ca-certificates")
    assert cumulative["python"][-1] == "python-is-python3"


def test_apt_stage_pins_are_what_each_stage_adds():
    stages = cpu_plan().apt_stages
    closures = {
        "system": {"openssh-server": "1", "libc": "2"},
        "openmpi": {"openssh-server": "1", "libc": "2", "openmpi-bin": "4"},
        "python": {"openssh-server": "1", "libc": "2", "openmpi-bin": "4", "python3": "3"},
    }
    pins = apt_stage_pins(stages, closures)
    assert pins == {
        "system": {"libc": "2", "openssh-server": "1"},
        "openmpi": {"openmpi-bin": "4"},
        "python": {"python3": "3"},
    }


def report_item(name, version, requires=(), sha="a" * 64, url=None):
    return {
        "metadata": {"name": name, "version": version, "requires_dist": list(requires)},
        "download_info": {
            "url": url or f"https://files.example/{name}-{version}.whl",
            "archive_info": {"hashes": {"sha256": sha}},
        },
    }


PIP_REPORT = {
    "environment": {
        "python_version": "3.11",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "implementation_name": "cpython",
    },
    "install": [
        report_item("torch", "2.13.0+cpu", ["filelock", "sympy>=1.13", 'optree; extra == "opt"']),
        report_item("filelock", "4.3.1"),
        report_item("sympy", "1.14.0", ["mpmath<1.4"]),
        report_item("mpmath", "1.3.0"),
        report_item("optree", "0.1"),  # only behind torch's extra: nobody asked for it
        report_item("deepspeed", "0.19.8", ["torch", "hjson", 'pywin32; sys_platform == "win32"']),
        report_item("hjson", "3.1.0"),
        report_item("mpi4py", "4.1.2", sha="b" * 64, url="file:///w/mpi4py-4.1.2%2Blocal.whl"),
    ],
}


def test_pip_stage_pins_split_closures_over_stages():
    pins = pip_stage_pins(
        PIP_REPORT,
        {
            "torch": ("torch==2.13.0+cpu",),
            "deepspeed": ("deepspeed==0.19.8",),
            "extras": ("mpi4py==4.1.2",),
        },
        local_hashes={},
    )
    names = {stage: [p.name for p in stage_pins] for stage, stage_pins in pins.items()}
    assert names["torch"] == ["filelock", "mpmath", "sympy", "torch"]
    # torch is the torch stage's; pywin32's marker is false on Linux
    assert names["deepspeed"] == ["deepspeed", "hjson"]
    # a report entry no closure reaches (optree: behind an extra nobody asked for) is not
    # dropped: it lands in the last stage
    assert names["extras"] == ["mpi4py", "optree"]
    mpi4py = pins["extras"][0]
    assert mpi4py.file == "mpi4py-4.1.2+local.whl"
    assert mpi4py.requirement == f"mpi4py==4.1.2 --hash=sha256:{'b' * 64}"


def test_pip_pin_without_hash_uses_local_file_hash_or_fails():
    item = report_item("torch", "2.13.0+cpu", url="file:///w/torch-2.13.0%2Bcpu.whl")
    item["download_info"]["archive_info"] = {}
    report = {"environment": {}, "install": [item]}
    local = {"torch-2.13.0+cpu.whl": "c" * 64}
    pins = pip_stage_pins(report, {"torch": ("torch",)}, local)
    assert pins["torch"][0].sha256 == "c" * 64
    assert unhashed_files(report) == {"torch-2.13.0+cpu.whl"}
    assert unhashed_files(PIP_REPORT) == set()
    with pytest.raises(LockError, match="torch: no sha256 known"):
        pip_stage_pins(report, {"torch": ("torch",)}, {})


def sample_lock(plan, **apt):
    return Lock(
        recipe=plan.name,
        inputs_sha256=inputs_sha256(plan),
        base=LockedBase(image=plan.base_image, content_digest="sha256:" + "d" * 64),
        apt={"system": {"openssh-server": "1:9.2p1-2+deb12u10", **apt}, "openmpi": {}},
        pip={
            "torch": [PipPin(name="torch", version="2.13.0+cpu", sha256="e" * 64, file="t.whl")],
            "deepspeed": [
                PipPin(name="deepspeed", version="0.19.8", sha256="f" * 64, file="d.tar.gz")
            ],
        },
    )


def test_locked_render_pins_apt_and_pip_with_hashes():
    plan = cpu_plan()
    ctx = render_context(apply_lock(plan, sample_lock(plan)))
    dockerfile = ctx.dockerfile
    assert "imagekit-apt-install \\\n      openssh-server=1:9.2p1-2+deb12u10 \\\n" in dockerfile
    # a stage the lock leaves empty installs nothing; one it does not cover stays unpinned
    assert "RUN imagekit-apt-install\n" in dockerfile
    assert "      python3-dev \\\n" in dockerfile
    assert "--no-deps --require-hashes -r /tmp/imagekit-build/requirements.txt" in dockerfile
    assert "COPY imagekit-lock/torch.txt /tmp/imagekit-build/requirements.txt" in dockerfile
    assert ctx.files["imagekit-lock/torch.txt"] == f"torch==2.13.0+cpu --hash=sha256:{'e' * 64}\n"
    # the extras stage has no lock entry: it keeps its plain requirement
    assert "      mpi4py==4.1.2 \\" in dockerfile


@pytest.mark.parametrize(
    ("recipe", "deepspeed_needs"),
    [("deepspeed-cpu.yaml", ()), ("deepspeed-gpu.yaml", ("torch",))],
)
def test_locked_stages_stop_copying_the_stages_below(recipe, deepspeed_needs):
    """--no-deps installs with build isolation never read the stages below: a locked extras
    stage no longer depends on DeepSpeed's (a bump leaves it cached). Where DeepSpeed
    compiles CUDA ops against torch (GPU, no build isolation) its stage keeps torch."""
    loaded = load_recipe(RECIPES / recipe)
    unlocked = make_plan(loaded)
    assert {s.stage: s.needs for s in unlocked.pip_steps}["extras"] == ("torch", "deepspeed")
    locked, state = locked_plan(loaded, locked=True)
    needs = {s.stage: s.needs for s in locked.pip_steps}
    assert needs == {"torch": (), "deepspeed": deepspeed_needs, "extras": ()}
    extras = render_context(locked).dockerfile.split("AS pip-extras", 1)[1].split("\nFROM", 1)[0]
    assert "COPY --from=" not in extras


def test_lock_round_trip_and_staleness(tmp_path):
    recipe = tmp_path / "r.yaml"
    shutil.copy(RECIPES / "deepspeed-cpu.yaml", recipe)
    loaded = load_recipe(recipe)
    plan = make_plan(loaded)
    lock = sample_lock(plan)
    lock_path(recipe).write_text(dump_lock(lock, recipe))
    assert read_lock(lock_path(recipe)) == lock
    locked, state = locked_plan(loaded, locked=True)
    assert locked.locked and state.usable

    # cosmetic edits keep the lock fresh; a package change makes it stale
    text = recipe.read_text()
    recipe.write_text(text.replace("description: DeepSpeed", "description: Our DeepSpeed"))
    assert locked_plan(load_recipe(recipe))[1].usable
    recipe.write_text(text.replace('"0.19.8"', '"0.19.5"'))
    plan, state = locked_plan(load_recipe(recipe))
    assert state.stale and not plan.locked
    with pytest.raises(LockError, match="stale"):
        locked_plan(load_recipe(recipe), locked=True)


def test_relock_keeps_earlier_pins_the_recipe_still_allows(tmp_path):
    """A DeepSpeed bump re-locks DeepSpeed only: every other earlier pin becomes a pip
    constraint (so torch's stage stays byte-identical, and cached); the bumped pin does not."""
    old = sample_lock(cpu_plan()).model_copy(
        update={
            "pip": {
                "torch": [
                    PipPin(name="torch", version="2.13.0+cpu", sha256="e" * 64, file="t.whl"),
                    PipPin(name="filelock", version="4.3.1", sha256="a" * 64, file="f.whl"),
                ],
                "deepspeed": [
                    PipPin(name="deepspeed", version="0.19.8", sha256="f" * 64, file="d.tgz"),
                    PipPin(name="numpy", version="2.4.6", sha256="b" * 64, file="n.whl"),
                ],
            }
        }
    )
    recipe = tmp_path / "r.yaml"
    recipe.write_text((RECIPES / "deepspeed-cpu.yaml").read_text().replace('"0.19.8"', '"0.19.7"'))
    bumped = make_plan(load_recipe(recipe))
    constraints = pip_constraints(old, bumped)
    # torch==2.13.0 admits the local version 2.13.0+cpu; deepspeed==0.19.7 excludes 0.19.8
    assert constraints == ["filelock==4.3.1", "numpy==2.4.6", "torch==2.13.0+cpu"]
    assert "deepspeed==0.19.8" in pip_constraints(old, cpu_plan())

    ctx = render_context(
        bumped, pip_resolver_report="/tmp/r.json", pip_constraints=tuple(constraints)
    )
    assert ctx.files["imagekit-build/constraints.txt"] == "".join(f"{c}\n" for c in constraints)
    assert "--constraint /tmp/imagekit-build/constraints.txt" in ctx.dockerfile
    # a resolution without earlier pins (first lock, --upgrade) has neither
    fresh = render_context(bumped, pip_resolver_report="/tmp/r.json")
    assert "imagekit-build/constraints.txt" not in fresh.files
    assert "--constraint" not in fresh.dockerfile


def test_apt_preferences_prefer_each_earlier_pin_without_forcing_it():
    lock = sample_lock(cpu_plan(), make="4.3-4.1")
    text = apt_preferences(lock)
    blocks = [b for b in text.split("\n\n") if b]
    assert blocks == [
        "Package: make\nPin: version 4.3-4.1\nPin-Priority: 990",
        "Package: openssh-server\nPin: version 1:9.2p1-2+deb12u10\nPin-Priority: 990",
    ]


def test_lock_changes_lists_added_removed_changed():
    plan = cpu_plan()
    old = sample_lock(plan, procps="2:4.0.2-3")
    new = sample_lock(plan, make="4.3-4.1").model_copy(
        update={"apt": {"system": {"openssh-server": "1:9.2p1-2+deb12u11", "make": "4.3-4.1"}}}
    )
    assert lock_changes(old, new) == [
        ("apt:make", None, "4.3-4.1"),
        ("apt:openssh-server", "1:9.2p1-2+deb12u10", "1:9.2p1-2+deb12u11"),
        ("apt:procps", "2:4.0.2-3", None),
    ]


def test_committed_lock_matches_its_recipe():
    """recipes/*.lock are committed: each must be valid and fresh, or builds go unpinned."""
    locks = sorted(RECIPES.glob("*.lock")) + sorted(TEST_RECIPES.glob("*.lock"))
    assert locks, "the CPU recipe's lock is committed"
    for path in locks:
        stem, platform = split_lock_name(path.name)
        recipe = path.with_name(f"{stem}.yaml")
        lock = read_lock(path)
        plan = make_plan(load_recipe(recipe), platform)
        assert lock.inputs_sha256 == inputs_sha256(plan), path
        assert all(lock.apt[stage] for stage in ("system", "openmpi", "python"))
        assert {"torch", "deepspeed", "extras"} <= set(lock.pip)


# -- the CLI -----------------------------------------------------------------------------------


def cpu_copy(tmp_path):
    recipe = tmp_path / "deepspeed-cpu.yaml"
    shutil.copy(RECIPES / "deepspeed-cpu.yaml", recipe)
    return recipe


def test_build_locked_without_lock_is_one_line_exit_14(capsys, tmp_path):
    recipe = cpu_copy(tmp_path)
    code, out, err = run(capsys, "build", str(recipe), "--locked", "--dry-run")
    assert code == 14
    assert err.strip().splitlines()[0] == (
        f"ERROR {tmp_path / 'deepspeed-cpu.lock'}: no lock file (--locked); "
        f"run `imagekit lock {recipe}`"
    )
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "lock_version: 1\nrecipe: [\n",
            "line 3, column 1: malformed YAML: did not find expected node content",
        ),
        ("- a\n", "not an imagekit lock file (expected a mapping)"),
        ("lock_version: 7\n", "lock_version 7 is not 1; run `imagekit lock --upgrade`"),
        (None, "apt.system.bash: Input should be a valid string (got list [1])"),
    ],
)
def test_malformed_lock_names_file_and_field(capsys, tmp_path, content, message):
    recipe = cpu_copy(tmp_path)
    if content is None:
        body = yaml.safe_load(dump_lock(sample_lock(cpu_plan()), recipe))
        body["apt"]["system"]["bash"] = [1]
        content = yaml.safe_dump(body)
    lock_path(recipe).write_text(content)
    code, out, err = run(capsys, "build", str(recipe), "--dry-run")
    assert code == 14
    assert err.strip().splitlines()[0] == f"ERROR {lock_path(recipe)}: {message}"


def test_stale_lock_warns_in_validate_and_dry_run_stays_unpinned(capsys, tmp_path):
    recipe = cpu_copy(tmp_path)
    lock = sample_lock(cpu_plan()).model_copy(update={"inputs_sha256": "0" * 64})
    lock_path(recipe).write_text(dump_lock(lock, recipe))
    code, out, err = run(capsys, "validate", str(recipe))
    assert code == 0
    assert "stale" in out + err
    code, out, err = run(capsys, "build", str(recipe), "--dry-run")
    assert code == 0
    assert "openssh-server=" not in out and "      openssh-server \\" in out


# -- --ssh-keys: baked keys from outside, so rebuilds are identical -----------------------------


def key_dir(tmp_path, skip=()):
    keys = tmp_path / "keys"
    for rel in (
        *(f"host/ssh_host_{k}_key{s}" for k in ("rsa", "ecdsa", "ed25519") for s in ("", ".pub")),
        "user/id_rsa",
        "user/id_rsa.pub",
    ):
        if rel in skip:
            continue
        path = keys / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(PUBLIC if rel.endswith(".pub") else PRIVATE)
    return keys


PUBLIC = "ssh-ed25519 AAAA test\n"
PRIVATE = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.mark.parametrize(
    "plant, why",
    [
        ("outside", "leads out of the directory"),  # a link to a file outside DIR
        ("passwd", "is not an OpenSSH key file"),  # /etc/passwd's shape as a private key
        ("fifo", "not a regular file"),  # would block a read
        ("big", "larger than 64 KiB"),
    ],
)
def test_ssh_keys_are_regular_key_files_inside_the_directory(capsys, tmp_path, plant, why):
    """#38: --ssh-keys followed a symlink to /etc/passwd and would COPY it in as a host key."""
    keys = key_dir(tmp_path)
    target = keys / "host/ssh_host_rsa_key"
    target.unlink()
    if plant == "outside":
        secret = tmp_path / "shadow"
        secret.write_text(PRIVATE)  # key-shaped, even: it is where it lives that matters
        target.symlink_to(secret)
    elif plant == "passwd":
        target.write_text("root:x:0:0:root:/root:/bin/bash\n")
    elif plant == "fifo":
        os.mkfifo(target)
    else:
        target.write_text(PRIVATE + "A" * 70_000)
    code, out, err = run(
        capsys, "build", str(RECIPES / "deepspeed-cpu.yaml"), "--ssh-keys", str(keys), "--dry-run"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"ERROR --ssh-keys {keys}: host/ssh_host_rsa_key") and why in err


def test_ssh_keys_are_copied_not_generated(tmp_path):
    from imagekit.build.builder import read_ssh_keys
    from imagekit.build.render import ContextOptions, write_context

    plan = cpu_plan()
    keys = read_ssh_keys(key_dir(tmp_path), plan)
    ctx = render_context(plan, ContextOptions(ssh_keys=keys))
    assert "COPY imagekit-keys/host/ /etc/ssh/" in ctx.dockerfile
    assert "COPY imagekit-keys/user/ /root/.ssh/" in ctx.dockerfile
    assert "ssh-keygen" not in ctx.dockerfile
    out = write_context(ctx, tmp_path / "ctx")
    mode = {
        p.name: p.stat().st_mode & 0o777 for p in (out / "imagekit-keys").rglob("*") if p.is_file()
    }
    assert mode["id_rsa"] == mode["authorized_keys"] == mode["ssh_host_ed25519_key"] == 0o600
    assert mode["id_rsa.pub"] == 0o644
    assert (out / "imagekit-keys/user/authorized_keys").read_text() == "ssh-ed25519 AAAA test\n"


def test_ssh_keys_missing_file_is_one_line_exit_2(capsys, tmp_path):
    keys = key_dir(tmp_path, skip={"user/id_rsa"})
    code, out, err = run(
        capsys, "build", str(RECIPES / "deepspeed-cpu.yaml"), "--ssh-keys", str(keys), "--dry-run"
    )
    assert code == 2
    assert err.strip() == f"ERROR --ssh-keys {keys}: missing user/id_rsa"


def test_reproducibility_gaps_name_what_normalization_cannot_fix(tmp_path):
    from imagekit.build.builder import BuildInputs, BuildOptions, reproducibility_gaps

    plan = cpu_plan()
    gaps = reproducibility_gaps(plan, BuildOptions(source_date_epoch=1))
    assert gaps == [
        "no fresh lock: apt and pip versions float (`imagekit lock`)",
        "ssh keys are generated during the build (pass --ssh-keys DIR)",
    ]
    locked = apply_lock(plan, sample_lock(plan))
    assert reproducibility_gaps(locked, BuildOptions(BuildInputs(ssh_keys=key_dir(tmp_path)))) == []


def test_wheelhouse_files_are_hashed_by_name_and_only_those_asked_for(tmp_path):
    import hashlib

    from imagekit.build.resolve import _wheelhouse_hashes

    big = b"w" * (3 << 20)  # more than one read chunk
    (tmp_path / "torch-2.13.0-cp311-none-linux_x86_64.whl").write_bytes(big)
    (tmp_path / "other-1.0-py3-none-any.whl").write_bytes(b"other")
    hashes = _wheelhouse_hashes(tmp_path, {"torch-2.13.0-cp311-none-linux_x86_64.whl"})
    assert hashes == {"torch-2.13.0-cp311-none-linux_x86_64.whl": hashlib.sha256(big).hexdigest()}
    assert _wheelhouse_hashes(None, {"x.whl"}) == {}
