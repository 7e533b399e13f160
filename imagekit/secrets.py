"""Key pairs laid out the way Kubernetes mounts a Secret at /root/.ssh (as mpi-operator
does): files id_rsa, id_rsa.pub, authorized_keys, mode 0600. Keys are generated with the
image's own ssh-keygen, so the machine running imagekit needs no ssh tools."""

from __future__ import annotations

import os
from pathlib import Path

from imagekit.engine.client import Engine
from imagekit.errors import ImagekitError

SECRET_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys")
KEY_ARGS = {"rsa": "-t rsa -b 2048", "ecdsa": "-t ecdsa -b 521"}  # ecdsa: Trainer v2's P-521


def keygen(key_type: str = "rsa") -> str:
    return (
        "rm -f /tmp/imagekit-key /tmp/imagekit-key.pub"
        f" && ssh-keygen -q {KEY_ARGS[key_type]} -N '' -C imagekit-run-key -f /tmp/imagekit-key"
        " && cat /tmp/imagekit-key /tmp/imagekit-key.pub && rm -f /tmp/imagekit-key*"
    )


KEYGEN = keygen()


def split_keygen_output(image: str, output: str) -> tuple[str, str]:
    """KEYGEN prints the private key, then the public key line."""
    private, marker, rest = output.partition("-----END OPENSSH PRIVATE KEY-----")
    public = rest.strip()
    if not marker or not public.startswith(("ssh-", "ecdsa-")):
        raise ImagekitError(f"{image}: ssh-keygen did not produce a key pair: {output[-200:]}")
    return private + marker + "\n", public + "\n"


def write_secret(
    directory: Path,
    private: str,
    public: str,
    world_writable: bool,
    private_mode: int = 0o600,
    public_mode: int = 0o600,
    owner: tuple[int, int] | None = None,
) -> Path:
    """`world_writable` lays the directory out like kubelet's Secret volume (drwxrwxrwt),
    which is what makes sshd's StrictModes reject mounted keys (R5). `owner` (uid, gid) is
    who the operator makes the files belong to, for a non-root user (K1, K2)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in zip(SECRET_FILES, (private, public, public), strict=True):
        path = directory / name
        path.write_text(text)
        path.chmod(private_mode if name == "id_rsa" else public_mode)
    directory.chmod(0o1777 if world_writable else 0o755)
    if owner is not None:
        for path in [directory, *directory.iterdir()]:
            os.chown(path, *owner)
    return directory


def make_secret(
    engine: Engine,
    image: str,
    directory: Path,
    world_writable: bool,
    labels: dict[str, str] | None = None,
    key_type: str = "rsa",
    private_mode: int = 0o600,
    public_mode: int = 0o600,
    owner: tuple[int, int] | None = None,
) -> Path:
    output = engine.run_once(image, ["/bin/sh", "-c", keygen(key_type)], labels=labels, user="0")
    private, public = split_keygen_output(image, output)
    return write_secret(
        directory, private, public, world_writable, private_mode, public_mode, owner
    )
