"""The key pair laid out like a Kubernetes Secret volume, as check and smoke mount it
(imagekit/secrets.py): modes, the world-writable directory of kubelet, and the owner the
operator gives a non-root user's files (K1, K2)."""

from __future__ import annotations

import os
import stat

import pytest

from imagekit.secrets import SECRET_FILES, write_secret


def _layout(directory):
    return {
        p.name: (stat.S_IMODE(p.stat().st_mode), p.stat().st_uid, p.stat().st_gid)
        for p in [directory, *sorted(directory.iterdir())]
    }


def test_a_secret_is_written_like_kubelet_lays_it_out(tmp_path):
    secret = write_secret(tmp_path / "s", "PRIVATE\n", "ssh-rsa AAAA\n", world_writable=True)
    assert sorted(p.name for p in secret.iterdir()) == sorted(SECRET_FILES)
    assert (secret / "authorized_keys").read_text() == (secret / "id_rsa.pub").read_text()
    me = (os.getuid(), os.getgid())
    assert _layout(secret) == {
        "s": (0o1777, *me),
        "authorized_keys": (0o600, *me),
        "id_rsa": (0o600, *me),
        "id_rsa.pub": (0o600, *me),
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files away needs root (CI runs as root)")
def test_a_non_root_users_secret_belongs_to_the_owner_the_operator_gives(tmp_path):
    secret = write_secret(
        tmp_path / "s", "PRIVATE\n", "ssh-rsa AAAA\n", False, 0o640, 0o640, owner=(0, 1000)
    )
    assert _layout(secret) == {
        "s": (0o755, 0, 1000),
        "authorized_keys": (0o640, 0, 1000),
        "id_rsa": (0o640, 0, 1000),
        "id_rsa.pub": (0o640, 0, 1000),
    }
