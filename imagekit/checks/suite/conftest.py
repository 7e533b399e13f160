"""Fixtures shared by the check files: sshd's effective settings and a running sshd, each
made once per check run (session scope: starting sshd twice would fail on the port). Session fixtures cannot use
testinfra's module-scoped `host`, so they ask for the same host themselves."""

from __future__ import annotations

import pytest

from imagekit.checks.facts import Sshd, repair_run_sshd, sshd_binary, start_sshd
from imagekit.checks.runner import testinfra_host


@pytest.fixture(scope="session")
def effective_sshd(ctx) -> dict[str, str] | None:
    """`sshd -T` for root, with a throwaway host key so images without keys can be read."""
    host = testinfra_host(ctx.container)
    repair_run_sshd(host, ctx)
    sshd = sshd_binary(host)
    if sshd is None:
        return None
    key = "/tmp/imagekit-check-hostkey"
    made = host.run(f"rm -f {key} {key}.pub; ssh-keygen -q -t ed25519 -N '' -f {key}").rc == 0
    hostkey = f"-h {key}" if made else ""
    result = host.run(f"{sshd} -T {hostkey} -C user=root,host=localhost,addr=127.0.0.1")
    if result.rc != 0:
        return None
    settings: dict[str, str] = {}
    for line in result.stdout.splitlines():
        name, _, value = line.partition(" ")
        settings.setdefault(name.lower(), value.strip())
    return settings


@pytest.fixture(scope="session")
def sshd(ctx, effective_sshd) -> Sshd:
    return start_sshd(testinfra_host(ctx.container), ctx, effective_sshd)
