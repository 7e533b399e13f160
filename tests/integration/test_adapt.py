"""`imagekit adapt` on real images made here (each FROM the locally bootstrapped base): every
adapted image passes `imagekit check` under the profile asked and a 2x2 `imagekit smoke`;
an image that needs nothing gets nothing; bad input ends with one line and its exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagekit.build.plan import make_plan
from imagekit.recipe.loader import load_recipe

from .authmirror import AuthMirror, leaks
from .conftest import (
    CPU_RECIPE,
    OMPI5_RECIPE,
    image_ids,
    imagekit,
    images_made_since,
    marked,
)
from .images import KUBEFLOW, build

# Open MPI and Python from apt, no ssh at all: what many training images look like.
PLAIN = """\
FROM {base}
RUN apt-get update \\
 && apt-get install -y --no-install-recommends openmpi-bin python3 bash procps \\
 && rm -rf /var/lib/apt/lists/*
"""

SOURCES = {
    "plain": PLAIN,
    # mpi-operator's base image way: port 2222, host keys from ssh-keygen, no root keys.
    "mpi-operator-style": KUBEFLOW,
    # MPI under /opt, found only through ENV (conda/NGC style, K4).
    "mpi-under-opt": (
        "FROM imagekit-test/adapt-plain:src\n"
        "RUN mkdir -p /opt/mpi/bin && mv /usr/bin/orted /opt/mpi/bin/orted\n"
        "ENV PATH=/opt/mpi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    ),
    "non-root": (
        "FROM imagekit-test/adapt-plain:src\n"
        "RUN echo 'mpiuser:x:1000:1000::/home/mpiuser:/bin/bash' >> /etc/passwd \\\n"
        " && mkdir -p /home/mpiuser && chown 1000:1000 /home/mpiuser\n"
        "USER mpiuser\n"
    ),
}


@pytest.fixture(scope="module")
def sources(engine, mini, tmp_path_factory) -> dict[str, str]:
    base = make_plan(load_recipe(CPU_RECIPE)).base_image
    tmp = tmp_path_factory.mktemp("adapt-sources")
    refs = {}
    for name, dockerfile in SOURCES.items():  # plain first: two others start from it
        ref = f"imagekit-test/adapt-{name}:src"
        refs[name] = build(engine, tmp / name, ref, dockerfile.format(base=base), {})
    return refs


def adapt(image: str, *args: str):
    return imagekit("adapt", image, "--plain", *args, timeout=900)


def passed_checks(report: Path) -> tuple[bool, set[str]]:
    body = json.loads(report.read_text())
    return body["passed"], {r["id"] for r in body["results"] if r["status"] == "fail"}


@pytest.mark.parametrize(
    "name, fixes",
    [
        (
            "plain",
            [
                "install openssh-server",  # the client came with openmpi-bin
                "/run/sshd",
                # Debian's own file sets btl and pml: only what it lacks is added
                "launch defaults in /etc/openmpi/openmpi-mca-params.conf: btl_tcp_if_exclude",
            ],
        ),
        ("mpi-operator-style", ["sshd settings first in sshd_config (port 22)"]),
        ("mpi-under-opt", ["PATH of the image's ENV in /etc/environment"]),
        ("non-root", ["USER root (was mpiuser)"]),
    ],
)
def test_adapted_image_passes_check_and_smoke(engine, sources, name, fixes, tmp_path):
    source = sources[name]
    tag = f"imagekit-test/adapted-{name}:1"
    report = tmp_path / "check.json"
    context = tmp_path / "context"
    result = adapt(source, "--tag", tag, "-o", str(context), "--report", str(report))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    for fix in fixes:
        assert fix in output, output[-4000:]
    passed, failed = passed_checks(report)
    assert passed and not failed, output[-4000:]
    # The context written out is the one built: FROM the source, labelled for the profile.
    dockerfile = (context / "Dockerfile").read_text()
    assert f"FROM {source}" in dockerfile
    labels = engine.inspect_image(tag)["Config"]["Labels"]
    assert labels["io.imagekit.adapted-from"] == source
    assert labels["io.imagekit.adapted.profile"] == "seed"
    assert labels["io.imagekit.adapted-from.id"] == engine.inspect_image(source)["Id"]
    # Only one thin layer: openssh and a few files, never the training stack again.
    added = engine.inspect_image(tag)["Size"] - engine.inspect_image(source)["Size"]
    assert added < 40e6, f"adapt added {added / 1e6:.1f} MB"
    smoke = imagekit("smoke", tag, "--workers", "2", "--slots", "2", timeout=600)
    assert smoke.returncode == 0, (smoke.stdout + smoke.stderr)[-4000:]


def test_the_plain_source_fails_the_check_adapt_fixes(sources, tmp_path):
    """What the test above proves is adapt's doing: the source image fails the same check."""
    report = tmp_path / "before.json"
    result = imagekit("check", sources["plain"], "--report", str(report), timeout=600)
    assert result.returncode == 7, result.stdout[-3000:]
    passed, failed = passed_checks(report)
    assert not passed and failed == {"sshd-config", "run-sshd", "no-host-key-prompt"}


def test_an_imagekit_image_gets_nothing_and_no_build(engine, cpu_image):
    images_before = image_ids(engine, all_=True)
    result = adapt(cpu_image.ref, "--tag", "imagekit-test/adapted-nothing:1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "nothing to add" in result.stdout and "nothing built" in result.stdout
    assert not engine.image_exists("imagekit-test/adapted-nothing:1")
    # Not one step image, intermediate or not (a background lane's own are not adapt's).
    assert images_made_since(engine, images_before, all_=True) == set()


def test_an_mpi_operator_image_adapts_to_its_own_profile_on_2222(engine, sources, tmp_path):
    tag = "imagekit-test/adapted-kubeflow:1"
    report = tmp_path / "check.json"
    result = adapt(
        sources["mpi-operator-style"],
        "--profile",
        "kubeflow-mpi-operator-v2",
        "--tag",
        tag,
        "--report",
        str(report),
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert passed_checks(report) == (True, set())
    assert engine.inspect_image(tag)["Config"]["Labels"]["io.imagekit.ssh.port"] == "2222"
    smoke = imagekit("smoke", tag, "--workers", "2", "--slots", "1", timeout=600)
    assert smoke.returncode == 0, (smoke.stdout + smoke.stderr)[-4000:]


@pytest.fixture(scope="module")
def ompi5_source(engine, ompi5_image, tmp_path_factory) -> str:
    """Debian 13's Open MPI 5.0.7 from apt without ssh, FROM the Debian 13 base the Open MPI 5
    recipe bootstraps (its build, a session fixture, leaves the base in the engine)."""
    base = make_plan(load_recipe(OMPI5_RECIPE)).base_image
    tmp = tmp_path_factory.mktemp("adapt-ompi5")
    return build(engine, tmp, "imagekit-test/adapt-ompi5:src", PLAIN.format(base=base), {})


def test_an_open_mpi_5_image_gets_the_operators_hostfile_and_runs_on_the_workers(
    engine, ompi5_source, tmp_path
):
    """K3: Debian's Open MPI 5 defaults PRRTE to Debian's own empty hostfile, and the operators'
    launcher sets only OMPI_MCA_orte_default_hostfile, which Open MPI 5 ignores: unfixed, every
    rank runs on the launcher. adapt writes PRRTE's file and a placeholder hostfile (the check's
    plain `mpirun` needs one): the operators' launch places all four ranks on the workers."""
    tag = "imagekit-test/adapted-ompi5:1"
    before = tmp_path / "before.json"
    result = imagekit("check", ompi5_source, "--report", str(before), timeout=600)
    assert result.returncode == 7 and "prrte-default-hostfile" in passed_checks(before)[1]
    report = tmp_path / "check.json"
    result = adapt(ompi5_source, "--tag", tag, "--report", str(report))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    prte = "PRRTE launch defaults in /etc/openmpi/prte-mca-params.conf: prte_default_hostfile"
    assert f"{prte} /etc/mpi/hostfile," in output, output
    assert "/etc/mpi/hostfile placeholder with no hosts" in output, output
    assert "plm_ssh_no_tree_spawn 1" in output and "plm_rsh_no_tree_spawn" not in output
    assert passed_checks(report) == (True, set()), output[-4000:]
    # The operators' own launch: no --hostfile, only their OMPI_MCA_orte_* variables (and, under
    # the seed profile, L14's flag). Without PRRTE's default there are no workers to place on.
    bare = ["mpirun", "--allow-run-as-root", "-n", "4", "python3", "/opt/imagekit-smoke/probe.py"]
    for command in ([], ["--", *bare]):
        # No version label on an adapted image: smoke reads Open MPI 5 from its mpirun, and its
        # recommended line leaves out Open MPI 4's -quiet, which Open MPI 5 rejects.
        smoke = imagekit("smoke", tag, "--workers", "2", "--slots", "2", *command, timeout=600)
        output = smoke.stdout + smoke.stderr
        assert smoke.returncode == 0, output[-4000:]
        records = marked(output, "IMAGEKIT_PROBE")
        assert len(records) == 4, output[-3000:]
        assert all("-worker-" in r["host"] for r in records), records  # none on the launcher


NONROOT = "kubeflow-mpi-operator-v2-nonroot"


@pytest.mark.parametrize("name", ["plain", "non-root"])
def test_adapted_for_a_non_root_profile_runs_a_2x2_mpijob_as_that_user(
    engine, sources, name, tmp_path
):
    """K1: adapt makes mpiuser (or keeps the image's own), its sshd_config and USER mpiuser;
    the result passes the non-root profile's check and a 2x2 smoke run as uid 1000."""
    tag = f"imagekit-test/adapted-{name}-nonroot:1"
    report = tmp_path / "check.json"
    result = adapt(sources[name], "--profile", NONROOT, "--tag", tag, "--report", str(report))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "user mpiuser (uid 1000) with its own sshd_config (port 2222" in output, output[-3000:]
    assert passed_checks(report) == (True, set()), output[-4000:]
    config = engine.inspect_image(tag)["Config"]
    assert config["User"] == "mpiuser" and config["Labels"]["io.imagekit.ssh.port"] == "2222"
    smoke = imagekit(
        "smoke", tag, "--profile", NONROOT, "--workers", "2", "--slots", "2", timeout=600
    )
    output = smoke.stdout + smoke.stderr
    assert smoke.returncode == 0, output[-4000:]
    records = marked(output, "IMAGEKIT_PROBE")
    assert len(records) == 4 and {r["uid"] for r in records} == {1000}, output[-3000:]


def test_an_open_mpi_5_image_adapted_for_the_non_root_profile_runs_the_operators_launch(
    engine, ompi5_source, tmp_path
):
    """K1 and K3 together: mpiuser's own sshd on 2222 and PRRTE's defaults; the operators' bare
    launch (no --hostfile, no root flag) puts four ranks on the workers, each as uid 1000."""
    tag = "imagekit-test/adapted-ompi5-nonroot:1"
    report = tmp_path / "check.json"
    result = adapt(ompi5_source, "--profile", NONROOT, "--tag", tag, "--report", str(report))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "prte_default_hostfile /etc/mpi/hostfile" in output, output[-3000:]
    assert passed_checks(report) == (True, set()), output[-4000:]
    bare = ["mpirun", "-n", "4", "python3", "/opt/imagekit-smoke/probe.py"]
    smoke = imagekit(
        "smoke",
        tag,
        "--profile",
        NONROOT,
        "--workers",
        "2",
        "--slots",
        "2",
        "--",
        *bare,
        timeout=600,
    )
    output = smoke.stdout + smoke.stderr
    assert smoke.returncode == 0, output[-4000:]
    records = marked(output, "IMAGEKIT_PROBE")
    assert len(records) == 4 and {r["uid"] for r in records} == {1000}, output[-3000:]
    assert all("-worker-" in r["host"] for r in records), records


def test_a_uid_another_user_holds_ends_the_build_in_one_line(engine, sources, tmp_path):
    """The image's mpiuser has uid 1000; a profile wanting `trainer` with 1000 cannot have it."""
    profile = tmp_path / "trainer.yaml"
    profile.write_text(
        "user: trainer\nuid: 1000\nport: 2222\nuser_keys: [mounted]\n"
        "ssh_dir: /home/trainer/.ssh\nsshd_config: /home/trainer/.sshd_config\n"
    )
    tag = "imagekit-test/adapted-uid-taken:1"
    result = adapt(sources["non-root"], "--profile", str(profile), "--tag", tag)
    output = result.stdout + result.stderr
    assert result.returncode == 5, output[-3000:]
    assert "imagekit adapt: uid 1000 belongs to mpiuser, not trainer" in output, output[-3000:]
    assert not engine.image_exists(tag)


@pytest.mark.parametrize(
    "args, code, line",
    [
        (["imagekit-test/no-such-image:never"], 6, "not found"),
        (
            ["imagekit-test/adapt-alpine:src"],
            2,
            "adapt supports Debian/Ubuntu images; found Alpine",
        ),
        (["imagekit-test/adapt-plain:src", "--profile", "sed"], 2, "did you mean 'seed'"),
        (["imagekit-test/adapt-no-mpi:src"], 2, "no mpirun on the image's PATH (R2)"),
        (["imagekit-test/adapt-plain:src", "--tag", "Bad Tag"], 2, "--tag 'Bad Tag'"),
    ],
    ids=["missing-image", "other-distro", "profile-typo", "no-mpi", "bad-tag"],
)
def test_bad_input_is_one_line_and_builds_nothing(engine, sources, tmp_path, args, code, line):
    base_ref = sources["plain"]
    build(
        engine,
        tmp_path / "alpine",
        "imagekit-test/adapt-alpine:src",
        (
            f"FROM {base_ref}\n"
            "RUN printf 'ID=alpine\\nPRETTY_NAME=\"Alpine Linux v3.20\"\\n' > /etc/os-release\n"
        ),
        {},
    )
    build(
        engine,
        tmp_path / "no-mpi",
        "imagekit-test/adapt-no-mpi:src",
        (f"FROM {base_ref}\nRUN rm /usr/bin/mpirun\n"),
        {},
    )
    images_before = image_ids(engine)
    result = adapt(*args)
    errors = [x for x in result.stderr.splitlines() if x.startswith(("ERROR", "Error"))]
    assert result.returncode == code, result.stderr
    assert len(errors) == 1 and line in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert images_made_since(engine, images_before) == set()


def test_adapt_through_an_authenticated_https_mirror_keeps_the_images_sources(
    engine, sources, tmp_path
):
    """--apt-mirror with credentials, on https under a certificate only --ca-bundle trusts:
    the missing packages come through it, the image keeps its own apt sources, and no layer
    holds the credentials, the certificate or apt's setting for it."""
    password = "adapt" + "-s3cr3t-" + "T0ken"  # built up: this file holds no secret-shaped string
    gateway, _ = engine.bridge_gateway()
    apt = AuthMirror(gateway, "http://deb.debian.org/debian", "/debian", "builder", password)
    bundle = apt.use_tls(tmp_path)
    certificate_line = (tmp_path / "mirror.pem").read_bytes().split(b"\n")[5]
    source, tag = sources["plain"], "imagekit-test/adapted-mirror:1"
    apt_files = ["sh", "-c", "cat /etc/apt/sources.list; ls -A /etc/apt/sources.list.d"]
    try:
        with apt:
            result = adapt(
                source, "--tag", tag, "--apt-mirror", apt.url(), "--ca-bundle", str(bundle)
            )
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-4000:]
        assert "install openssh-server" in output
        assert apt.authorized > 0  # the mirror answers only with its credentials
        assert password not in output
        assert engine.run_once(tag, apt_files) == engine.run_once(source, apt_files)
        left = engine.run_once(tag, ["ls", "-A", "/etc/apt/apt.conf.d", "/etc/apt/auth.conf.d"])
        assert "imagekit-build" not in left, left
        assert leaks(engine, tag, [password.encode(), certificate_line]) == []
    finally:
        if engine.image_exists(tag):
            engine.remove_image(tag)
