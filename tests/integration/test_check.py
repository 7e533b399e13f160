"""`imagekit check` against real containers: the CPU image passes; each image of a corpus of
deliberately broken ones fails exactly the check for what is broken; an image built the way
Kubeflow mpi-operator builds its base is judged under both profiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagekit.engine import Engine
from imagekit.plan import make_plan
from imagekit.recipe import load_recipe
from imagekit.render import render_context

from .conftest import CPU_RECIPE, imagekit

# One apt layer shared by every test image (built once, cached by the engine).
APT = """\
FROM {base}
RUN apt-get update \\
 && apt-get install -y --no-install-recommends openssh-server openssh-client openmpi-bin \\
      python3 bash procps \\
 && rm -f /etc/ssh/ssh_host_* \\
 && sed -i 's/^session\\s\\+required\\s\\+pam_loginuid.so/session optional pam_loginuid.so/' /etc/pam.d/sshd \\
 && rm -rf /var/lib/apt/lists/*
"""

# A small compliant image with imagekit's ssh settings, keys baked and declared.
MINI = """\
FROM imagekit-test/apt:latest
COPY sshd_config /etc/ssh/sshd_config
COPY ssh_config /etc/ssh/ssh_config
RUN mkdir -p /run/sshd && chmod 0755 /run/sshd && ssh-keygen -A \\
 && mkdir -p /root/.ssh && chmod 0700 /root/.ssh \\
 && ssh-keygen -q -t rsa -b 2048 -N "" -f /root/.ssh/id_rsa \\
 && cp /root/.ssh/id_rsa.pub /root/.ssh/authorized_keys && chmod 0600 /root/.ssh/authorized_keys
LABEL io.imagekit.ssh.user-keys=image io.imagekit.ssh.host-keys=build \\
      io.imagekit.version.python=3.11 io.imagekit.version.openmpi=4.1.4
"""

# Kubeflow mpi-operator's base image recipe (plus Open MPI, like its openmpi image): port
# 2222, StrictModes no, host-key checking off, no user keys (the operator mounts them).
KUBEFLOW = """\
FROM imagekit-test/apt:latest
RUN ssh-keygen -A && mkdir -p /var/run/sshd \\
 && sed -i "s/[ #]\\(.*StrictHostKeyChecking \\).*/ \\1no/g" /etc/ssh/ssh_config \\
 && echo "    UserKnownHostsFile /dev/null" >> /etc/ssh/ssh_config \\
 && sed -i "s/[ #]\\(.*Port \\).*/ \\12222/g" /etc/ssh/ssh_config \\
 && sed -i "s/#\\(StrictModes \\).*/\\1no/g" /etc/ssh/sshd_config \\
 && sed -i "s/#\\(Port \\).*/\\12222/g" /etc/ssh/sshd_config
"""

# name -> (extra Dockerfile lines on top of MINI, the check IDs that must fail)
BROKEN = {
    "non-root": ("USER nobody", {"root-user"}),
    "no-mpirun": ("RUN rm -f /usr/bin/mpirun", {"mpirun"}),
    "strictmodes-yes": (
        "RUN sed -i 's/^StrictModes no/StrictModes yes/' /etc/ssh/sshd_config",
        {"strictmodes"},
    ),
    "no-run-sshd": ("RUN rm -rf /run/sshd", {"run-sshd"}),
    "run-sshd-mode": ("RUN chmod 0777 /run/sshd", {"run-sshd"}),
    "no-authorized-keys": ("RUN rm /root/.ssh/authorized_keys", {"ssh-login-image-key"}),
    "host-key-prompt": (
        "RUN sed -i -e '/StrictHostKeyChecking/d' -e '/KnownHostsFile/d' /etc/ssh/ssh_config",
        {"no-host-key-prompt"},
    ),
    "sshd-cannot-start": (
        "RUN echo 'HostKey /etc/ssh/imagekit_missing_key' >> /etc/ssh/sshd_config",
        {"sshd-start"},
    ),
    "password-auth-on": (
        "RUN sed -i 's/^PasswordAuthentication no/PasswordAuthentication yes/' "
        "/etc/ssh/sshd_config",
        {"password-auth-off"},
    ),
    "wrong-port": ("RUN sed -i 's/^Port 22$/Port 2200/' /etc/ssh/sshd_config", {"sshd-port"}),
    "declared-package-missing": ("LABEL io.imagekit.version.torch=2.13.0+cpu", {"version-torch"}),
    "leaked-build-ca": (
        "COPY ca.pem /tmp/build-ca.pem\nRUN rm /tmp/build-ca.pem",
        {"build-secrets-in-layers"},
    ),
}


def build(engine: Engine, tmp: Path, ref: str, dockerfile: str, files: dict[str, str]) -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "Dockerfile").write_text(dockerfile)
    for name, text in files.items():
        (tmp / name).write_text(text)
    outcome = engine.build(tmp, report=lambda event: None)
    engine.tag(outcome.image_id, ref)
    return ref


@pytest.fixture(scope="session")
def mini(engine, cpu_image, tmp_path_factory) -> str:
    plan = make_plan(load_recipe(CPU_RECIPE))
    files = render_context(plan).files
    tmp = tmp_path_factory.mktemp("images")
    build(engine, tmp / "apt", "imagekit-test/apt:latest", APT.format(base=plan.base_image), {})
    ssh = {"sshd_config": files["imagekit/sshd_config"], "ssh_config": files["imagekit/ssh_config"]}
    return build(engine, tmp / "mini", "imagekit-test/mini:latest", MINI, ssh)


def check_json(image: str, tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    report = tmp_path / "report.json"
    result = imagekit(
        "check", image, "--report", str(report), "--format", "json", *args, timeout=600
    )
    return result.returncode, json.loads(report.read_text()), result.stdout + result.stderr


def failing(report: dict) -> set[str]:
    return {r["id"] for r in report["results"] if r["status"] == "fail"}


def test_cpu_image_passes_every_check(cpu_image, tmp_path):
    code, report, output = check_json(cpu_image.ref, tmp_path)
    assert code == 0, output
    assert report["schema"] == "imagekit.check-report/v1" and report["passed"] is True
    statuses = {r["id"]: r["status"] for r in report["results"]}
    for required in (
        "root-user",
        "mpirun",
        "sshd-start",
        "strictmodes",
        "run-sshd",
        "ssh-login-image-key",
        "ssh-login-mounted-key",
        "mpirun-two-ranks",
        "version-torch",
        "version-deepspeed",
        "version-openmpi",
        "version-python",
        "private-keys-in-layers",
        "build-secrets-in-layers",
    ):
        assert statuses[required] in ("pass", "warn", "info"), (required, statuses[required])
    # the baked keys are declared by the recipe: reported, not failed
    assert statuses["private-keys-in-layers"] == "warn"
    assert "PASSED" in output


def test_mini_image_passes(mini, tmp_path):
    code, report, output = check_json(mini, tmp_path)
    assert code == 0 and failing(report) == set(), output


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_image_fails_exactly_its_check(engine, mini, tmp_path, name):
    extra, expected = BROKEN[name]
    ca = Path("/etc/ssl/certs/ca-certificates.crt").read_text()[:4000]
    ref = build(
        engine,
        tmp_path / "ctx",
        f"imagekit-test/broken-{name}:latest",
        f"FROM {mini}\n{extra}\n",
        {"ca.pem": ca},
    )
    code, report, output = check_json(ref, tmp_path)
    assert code == 7, output
    assert failing(report) == expected, output
    for result in report["results"]:
        if result["status"] == "fail":
            assert result["evidence"] and result["fix"], result
    assert f"ERROR {ref}: failed" in output
    leftovers = [
        c
        for c in engine.api.containers(all=True)
        if c["Image"] in (ref, engine.inspect_image(ref)["Id"])
    ]
    assert leftovers == []


def test_kubeflow_style_image_under_both_profiles(engine, mini, tmp_path):
    ref = build(engine, tmp_path / "kf", "imagekit-test/kubeflow-style:latest", KUBEFLOW, {})
    code, report, output = check_json(ref, tmp_path, "--profile", "kubeflow-mpi-operator-v2")
    assert code == 0, output
    statuses = {r["id"]: r for r in report["results"]}
    assert statuses["ssh-login-mounted-key"]["status"] == "pass"
    assert statuses["ssh-login-image-key"]["status"] == "skip"
    assert statuses["private-keys-in-layers"]["status"] == "warn"  # host keys, allowed by profile
    assert statuses["version-torch"]["status"] in ("skip", "info")  # nothing declared: reported

    code, report, output = check_json(ref, tmp_path, "--profile", "seed")
    assert code == 7
    assert failing(report) == {"sshd-port", "private-keys-in-layers"}, output
    by_id = {r["id"]: r for r in report["results"]}
    assert "expects port 22; sshd listens on 2222" in by_id["sshd-port"]["evidence"]
    assert "/etc/ssh/ssh_host_rsa_key (layer" in by_id["private-keys-in-layers"]["evidence"]


def test_report_formats(cpu_image, tmp_path):
    for fmt, marker in (("junit", "<testsuite"), ("markdown", "| check | req | status |")):
        target = tmp_path / f"report.{fmt}"
        result = imagekit(
            "check", cpu_image.ref, "--report", str(target), "--format", fmt, timeout=600
        )
        assert result.returncode == 0, result.stderr
        assert marker in target.read_text()


def test_bad_input_gets_one_line_and_distinct_codes(engine):
    missing = imagekit("check", "imagekit-test/no-such-image:never", timeout=120)
    assert missing.returncode == 6
    assert missing.stderr.strip().splitlines()[0] == (
        "ERROR image imagekit-test/no-such-image:never: not found in the engine"
    )
    profile = imagekit("check", "whatever", "--profile", "sead", timeout=120)
    assert profile.returncode == 2 and "did you mean 'seed'?" in profile.stderr
    down = imagekit(
        "check",
        "whatever",
        env={"DOCKER_HOST": "tcp://127.0.0.1:1", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert down.returncode == 4 and "cannot reach the Docker engine" in down.stderr
