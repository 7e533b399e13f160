"""Fixtures shared by the check files: sshd's effective settings and a running sshd, each
made once per check run (session scope: starting sshd twice would fail on the port). Session fixtures cannot use
testinfra's module-scoped `host`, so they ask for the same host themselves."""

from __future__ import annotations

import pytest

from imagekit.checks.facts import (
    EXIT_MARK,
    config_flag,
    prefetch_mounted_session,
    repair_run_sshd,
    split_sshd_output,
    sshd_binary,
    start_sshd,
)
from imagekit.checks.runner import mounted_keys, start_mounted, testinfra_host


@pytest.fixture(scope="session")
def user_host(ctx):
    """The check container as the profile's user (root for the seed; K1's mpiuser)."""
    if ctx.profile.non_root and "uid" not in ctx.initial:
        pytest.skip(f"no user {ctx.profile.user} in the image (see root-user)")
    return testinfra_host(ctx.container, ctx.profile.user)


@pytest.fixture(scope="session")
def effective_sshd(ctx, user_host) -> dict[str, str] | None:
    """`sshd -T` as the profile's user with the config its operator passes, and a throwaway
    host key so images without keys (or whose host key is mounted at run time) can be read."""
    host = testinfra_host(ctx.container)
    if not ctx.profile.non_root:
        repair_run_sshd(host, ctx)
    sshd = sshd_binary(ctx, host)
    if sshd is None:
        return None
    key = f"/tmp/imagekit-check-hostkey-{ctx.profile.user}"
    who = f"user={ctx.profile.user},host=localhost,addr=127.0.0.1"
    # `sshd -t` as sshd-config runs it: a non-root profile's host key is mounted at run time
    # (K1), so it tests with the stand-in key; root's uses the image's own keys.
    test = f"{sshd}{config_flag(ctx)} -t -h {key}" if ctx.profile.non_root else f"{sshd} -t"
    script = (
        f"rm -f {key} {key}.pub; "
        f"if ssh-keygen -q -t ed25519 -N '' -f {key} >/dev/null 2>&1; then h='-h {key}'; "
        "else h=''; fi; "
        f'{sshd}{config_flag(ctx)} -T $h -C {who} 2>/dev/null; echo "{EXIT_MARK} $?"; '
        f'out=$({test} 2>&1); echo "{EXIT_MARK} $?"; printf \'%s\\n\' "$out"'
    )
    effective, test_rc, test_output = split_sshd_output(user_host.run(script, prints=True).stdout)
    ctx.shared["sshd -t"] = (test_rc, test_output)  # sshd-config's verdict, read in one exec
    return effective


@pytest.fixture(scope="session")
def sshd(ctx, user_host, effective_sshd):
    """sshd started as the operator starts it. A non-root profile's host key is the mounted
    user key (K1), so its sshd runs in a container with the keys mounted, kept for the
    session: the login checks use that same sshd."""
    if not ctx.profile.non_root:
        host = testinfra_host(ctx.container)
        started = start_sshd(host, ctx, effective_sshd)
        if started.running and "mounted" in ctx.profile.user_keys:
            # The login with mounted keys runs in the other container: it overlaps the
            # checks still to come in this one (the image-key login among them).
            prefetch_mounted_session(ctx, host, started, effective_sshd)
        yield started
        return
    secret = mounted_keys(ctx, testinfra_host(ctx.container))
    with start_mounted(ctx, secret) as box:
        host = testinfra_host(box, ctx.profile.user)
        started = start_sshd(host, ctx, effective_sshd)
        started.host = host
        yield started
