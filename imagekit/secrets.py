"""Key pairs laid out the way Kubernetes mounts a Secret at /root/.ssh (as mpi-operator
does): files id_rsa, id_rsa.pub, authorized_keys, mode 0600. Generated with the image's own
ssh-keygen in a throwaway container, so the machine running imagekit needs no ssh tools."""

from __future__ import annotations

from pathlib import Path

from imagekit.engine import Engine

SECRET_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys")
KEYGEN = (
    "ssh-keygen -q -t rsa -b 2048 -N '' -C imagekit-run-key -f /out/id_rsa"
    " && cp /out/id_rsa.pub /out/authorized_keys && chmod 0600 /out/*"
)


def make_secret(engine: Engine, image: str, directory: Path, world_writable: bool) -> Path:
    """`world_writable` lays the directory out like kubelet's Secret volume (drwxrwxrwt),
    which is what makes sshd's StrictModes reject mounted keys (R5)."""
    directory.mkdir(parents=True, exist_ok=True)
    engine.run_once(image, ["/bin/sh", "-c", KEYGEN], volumes={str(directory): {"bind": "/out"}})
    missing = [name for name in SECRET_FILES if not (directory / name).is_file()]
    if missing:
        from imagekit.errors import ImagekitError

        raise ImagekitError(f"{image}: ssh-keygen did not produce {', '.join(missing)}")
    directory.chmod(0o1777 if world_writable else 0o755)
    return directory
