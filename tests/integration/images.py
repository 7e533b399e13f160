"""Small test images built from Dockerfiles on the locally bootstrapped base: a compliant
"mini" image, a corpus of deliberately broken variants, and one built the way Kubeflow
mpi-operator builds its base image."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagekit.build.plan import make_plan
from imagekit.build.render import render_context
from imagekit.engine.client import Engine
from imagekit.recipe.loader import load_recipe

from .conftest import CPU_RECIPE

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

# Kubeflow mpi-operator's non-root way (K1) on top of mini: mpiuser (uid 1000) runs
# `sshd -De -f ~/.sshd_config` with the mounted key as host key, on 2222; its ssh client
# dials 2222 (a Match block), root's settings stay the seed's. USER mpiuser, as runAsUser.
NON_ROOT = """\
FROM imagekit-test/mini:latest
RUN useradd --create-home --uid 1000 mpiuser \\
 && printf 'PidFile /home/mpiuser/sshd.pid\\nHostKey /home/mpiuser/.ssh/id_rsa\\nStrictModes no\\nPort 2222\\nPasswordAuthentication no\\nKbdInteractiveAuthentication no\\n' \\
      > /home/mpiuser/.sshd_config \\
 && chown mpiuser /home/mpiuser/.sshd_config \\
 && { printf 'Match localuser mpiuser\\n    Port 2222\\n'; cat /etc/ssh/ssh_config; } > /tmp/ssh_config \\
 && mv /tmp/ssh_config /etc/ssh/ssh_config
USER mpiuser
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
    # Open MPI will not start without ssh, even for local ranks: the two mpirun checks fail
    # too, each with the ssh client's fix (not R8's or R9's usual one); the logins skip.
    "no-ssh-client": (
        "RUN rm -f /usr/bin/ssh",
        {"no-host-key-prompt", "mpirun-as-root", "mpirun-two-ranks"},
    ),
    "sshd-cannot-start": (
        "RUN echo 'HostKey /etc/ssh/imagekit_missing_key' >> /etc/ssh/sshd_config",
        {"sshd-start"},
    ),
    "password-auth-on": (
        "RUN echo root:imagekit | chpasswd && sed -i 's/^PasswordAuthentication no/PasswordAuthentication yes/' "
        "/etc/ssh/sshd_config",
        {"password-auth-off"},
    ),
    "wrong-port": ("RUN sed -i 's/^Port 22$/Port 2200/' /etc/ssh/sshd_config", {"sshd-port"}),
    "declared-package-missing": ("LABEL io.imagekit.version.torch=2.13.0+cpu", {"version-torch"}),
    # K4: MPI under /opt, found through ENV only (conda/NGC style): mpirun works in `docker
    # exec`, but a worker's orted, started over ssh, is not found.
    "mpi-path-only-in-env": (
        "RUN mkdir -p /opt/mpi/bin && mv /usr/bin/orted /opt/mpi/bin/orted\n"
        "ENV PATH=/opt/mpi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        {"remote-environment"},
    ),
    "leaked-build-ca": (
        "COPY ca.pem /tmp/build-ca.pem\nRUN rm /tmp/build-ca.pem",
        {"build-secrets-in-layers"},
    ),
}


def build(
    engine: Engine,
    tmp: Path,
    ref: str,
    dockerfile: str,
    files: dict[str, str],
    build_args: dict[str, str] | None = None,
) -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "Dockerfile").write_text(dockerfile)
    for name, text in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    outcome = engine.build(tmp, report=lambda event: None, build_args=build_args)
    engine.tag(outcome.image_id, ref)
    return ref


def build_broken(engine: Engine, mini: str, name: str, tmp: Path) -> str:
    extra = BROKEN[name][0]
    ca = Path("/etc/ssl/certs/ca-certificates.crt").read_text()[:4000]
    return build(
        engine,
        tmp / f"ctx-{name}",
        f"imagekit-test/broken-{name}:latest",
        f"FROM {mini}\n{extra}\n",
        {"ca.pem": ca},
    )


@pytest.fixture(scope="session")
def mini(engine, cpu_image, tmp_path_factory) -> str:
    plan = make_plan(load_recipe(CPU_RECIPE))
    files = render_context(plan).files
    tmp = tmp_path_factory.mktemp("images")
    build(engine, tmp / "apt", "imagekit-test/apt:latest", APT.format(base=plan.base_image), {})
    ssh = {"sshd_config": files["imagekit/sshd_config"], "ssh_config": files["imagekit/ssh_config"]}
    return build(engine, tmp / "mini", "imagekit-test/mini:latest", MINI, ssh)
