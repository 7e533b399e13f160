"""sshd and ssh as the operator uses them (R3-R7, R9, R10): settings, start, port, prompts, logins."""

from __future__ import annotations

import pytest

from imagekit.checks import check
from imagekit.checks.facts import (
    SSH_CLIENT_FIX,
    SSH_OPTS,
    expect,
    expect_judgement,
    fail,
    has,
    image_env,
    image_private_keys,
    mounted_session,
    ssh_client_settings,
    sshd_binary,
)
from imagekit.requirements import SettingsRequirement, fabric, ssh

# -- R4, R5, R3: sshd and its effective settings ---------------------------------------------


@check(
    "sshd-config",
    "R4",
    "sshd is installed and `sshd -t` accepts its configuration",
    fix="install openssh-server and fix /etc/ssh/sshd_config until `sshd -t` passes",
)
def check_sshd_config(ctx, host, user_host, effective_sshd):
    sshd = sshd_binary(ctx, host)
    expect(sshd is not None, "no sshd binary (/usr/sbin/sshd)")
    # Run with `sshd -T` by the effective_sshd fixture (one exec): K1's with the stand-in key.
    code, output = ctx.shared["sshd -t"]
    if code != 0 and "no hostkeys available" in output:
        pytest.skip("no host keys in the image; see sshd-start")
    expect(code == 0, f"sshd -t: {output}")


def _sshd_settings(effective_sshd) -> dict[str, str]:
    if effective_sshd is None:
        pytest.skip("sshd missing or its configuration is invalid (see sshd-config)")
    return effective_sshd


def check_of(unit: type[SettingsRequirement]):
    """`@check` with the unit's ID, requirement, title and fix (imagekit/requirements)."""
    return check(unit.check_id, unit.requirement, unit.title, fix=unit.fix, varies=unit.profiles)


@check_of(ssh.StrictModes)
def check_strictmodes(ctx, effective_sshd):
    expect_judgement(ssh.StrictModes.judge(_sshd_settings(effective_sshd), ctx.port))


@check_of(ssh.PubkeyAuth)
def check_pubkey_auth(ctx, effective_sshd):
    expect_judgement(ssh.PubkeyAuth.judge(_sshd_settings(effective_sshd), ctx.port))


@check_of(ssh.RootLoginKeyOnly)
def check_root_login(ctx, effective_sshd):
    skip = ssh.RootLoginKeyOnly.skip_reason(ctx.profile)
    if skip:
        pytest.skip(skip)
    expect_judgement(ssh.RootLoginKeyOnly.judge(_sshd_settings(effective_sshd), ctx.port))


@check_of(ssh.PasswordLoginsOff)
def check_password_auth(ctx, host, effective_sshd, note):
    judgement = ssh.PasswordLoginsOff.judge(_sshd_settings(effective_sshd), ctx.port)
    if judgement.passed:
        return
    # Exploitable only if some account has a password: a hash, not *, ! or empty.
    users = host.run("awk -F: '$2 !~ /^([*!].*)?$/ {print $1}' /etc/shadow").stdout.split()
    expect(not users, f"{judgement.evidence}; accounts with a password: {', '.join(users)}")
    note("warn", f"{judgement.evidence}; no account has a password today, but turn it off")


# -- R6, R4 (start), R10, R9 -----------------------------------------------------------------


@check(
    "run-sshd",
    "R6",
    "/run/sshd exists, owned by root, mode 0755",
    fix="add `RUN mkdir -p /run/sshd && chmod 0755 /run/sshd` (sshd dies without it)",
    varies="skipped for non-root profiles (their sshd runs unprivileged)",
)
def check_run_sshd(ctx):
    if ctx.profile.non_root:
        pytest.skip(f"sshd runs as {ctx.profile.user}, without privilege separation or /run/sshd")
    state = ctx.initial.get("run_sshd", "missing")
    expect(
        state == "root 755 directory",
        (
            "/run/sshd missing"
            if state == "missing"
            else f"/run/sshd is: {state} (owner, mode, type)"
        ),
    )


@check(
    "sshd-start",
    "R4",
    "sshd starts the way the operator starts it and stays up",
    fix="make `/usr/sbin/sshd -De` work with no entrypoint: host keys in the image "
    "(ssh-keygen -A), a valid config, an address it can bind",
)
def check_sshd_start(sshd, note):
    if sshd.port is None:
        pytest.skip(sshd.evidence)
    expect(sshd.running, sshd.evidence)
    for text in sshd.repaired:
        note("info", text)
    note("info", sshd.evidence)


@check_of(ssh.SshdPort)
def check_sshd_port(ctx, user_host, effective_sshd):
    server = ssh.SshdPort.judge(_sshd_settings(effective_sshd), ctx.port)
    client = ssh.ClientPort.judge(ssh_client_settings(user_host), ctx.port)
    expect(
        server.passed and client.passed,
        f"profile {ctx.profile.name} expects port {ctx.port}; {server.evidence}, {client.evidence}",
    )


@check_of(ssh.NoHostKeyPrompt)
def check_host_key_prompt(ctx, user_host, note):
    if not has(ctx, user_host, "ssh"):
        fail(
            "no ssh client (openssh-client): mpirun cannot reach workers",
            fix=SSH_CLIENT_FIX,
        )
    expect_judgement(ssh.NoHostKeyPrompt.judge(ssh_client_settings(user_host), ctx.port), note)


# -- R3, R7: real logins ---------------------------------------------------------------------


def _need_ssh_client(ctx, host) -> None:
    if not has(ctx, host, "ssh"):
        pytest.skip("no ssh client to log in with (see no-host-key-prompt)")


def _login(host, port: int, user: str = "root") -> tuple[bool, str]:
    result = host.run(
        f"ssh {SSH_OPTS} -p {port} {user}@localhost echo imagekit-login-ok", prints=True
    )
    ok = result.rc == 0 and "imagekit-login-ok" in result.stdout
    return ok, (result.stderr.strip() or result.stdout.strip()).replace("\n", " | ")


@check(
    "ssh-login-image-key",
    "R7",
    "root logs in over ssh with the key baked into the image",
    fix="put id_rsa in /root/.ssh and its public key in /root/.ssh/authorized_keys (0600)",
    varies="profiles whose `user_keys` list `image`",
)
def check_login_image_key(ctx, host, sshd, note):
    if "image" not in ctx.profile.user_keys:
        pytest.skip(f"profile {ctx.profile.name} does not use keys baked into images")
    keys = image_private_keys(ctx, host)
    if not keys:
        if "mounted" in ctx.profile.user_keys:
            pytest.skip("no key baked into the image; ssh-login-mounted-key covers R7")
        pytest.fail(f"no private key in {ctx.profile.key_dir}, and the profile needs one there")
    if not sshd.running:
        pytest.skip("sshd is not running (see sshd-start)")
    _need_ssh_client(ctx, host)
    ok, detail = _login(sshd.host or host, sshd.port, ctx.profile.user)
    expect(ok, f"ssh {ctx.profile.user}@localhost with {keys[0]}: {detail}")
    note("warn", f"{keys[0]} is baked into the image: anyone with the image can log in")


@check(
    "ssh-login-mounted-key",
    "R7",
    "the profile's user (root, or e.g. mpiuser) logs in with a key mounted the way an "
    "operator mounts a Secret (/root/.ssh, /home/mpiuser/.ssh)",
    fix="keep ssh settings in /etc/ssh (not ~/.ssh), StrictModes no, PubkeyAuthentication yes",
    varies="profiles whose `user_keys` list `mounted`; the profile's user, key directory and Secret layout",
)
def check_login_mounted_key(ctx, host, sshd, effective_sshd):
    if "mounted" not in ctx.profile.user_keys:
        pytest.skip(f"profile {ctx.profile.name} does not mount keys")
    if not sshd.running:
        pytest.skip("sshd is not running (see sshd-start)")
    _need_ssh_client(ctx, host)
    started, result = mounted_session(ctx, host, sshd, effective_sshd)
    expect(started.running, f"with keys mounted: {started.evidence}")
    ok = result.rc == 0 and "imagekit-login-ok" in result.stdout
    detail = (result.stderr.strip() or result.stdout.strip()).replace("\n", " | ")
    user = ctx.profile.user
    expect(ok, f"ssh {user}@localhost with the key mounted at {ctx.profile.key_dir}: {detail}")


# -- K4: what a rank started over ssh can find ---------------------------------------------


@check(
    "remote-environment",
    "K4",
    "a non-interactive ssh session (how mpirun starts ranks on workers) finds the MPI daemon, "
    "python3 and the image's LD_LIBRARY_PATH",
    fix="make the image's PATH and LD_LIBRARY_PATH reach ssh sessions: write them into "
    "/etc/environment (sshd reads it through pam_env) or a SetEnv line in sshd_config; "
    "ENV alone never reaches processes sshd starts",
    varies="the profile's user and key directory",
)
def check_remote_environment(ctx, host, sshd, effective_sshd):
    if not sshd.running:
        pytest.skip("sshd is not running (see sshd-start)")
    _need_ssh_client(ctx, host)
    daemon = next((d for d in ("orted", "prted") if has(ctx, host, d)), None)
    if daemon is None:
        pytest.skip("neither orted (Open MPI 4) nor prted (Open MPI 5) under the image's ENV")
    commands = [daemon] + (["python3"] if has(ctx, host, "python3") else [])
    started, result = mounted_session(ctx, host, sshd, effective_sshd)
    if not started.running:
        pytest.skip(f"sshd did not start with keys mounted: {started.evidence}")
    if result.rc != 0 or "imagekit-login-ok" not in result.stdout:
        pytest.skip("no ssh login with a mounted key (see ssh-login-mounted-key)")
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    lost = [
        f"{c} (under ENV: {host.run(f'command -v {c}').stdout.strip()})"
        for c in commands
        if not seen.get(c)
    ]
    session_libs = seen.get("LD_LIBRARY_PATH", "").split(":")
    lost += [
        f"LD_LIBRARY_PATH entry {d}"
        for d in image_env(ctx).get("LD_LIBRARY_PATH", "").split(":")
        if d and d not in session_libs
    ]
    expect(not lost, f"in a non-interactive ssh session: {'; '.join(lost)} not found")


# -- F3: what a rank started over ssh may lock -------------------------------------------------


@check(
    fabric.LockedMemory.check_id,
    fabric.LockedMemory.requirement,
    fabric.LockedMemory.title,
    fix=fabric.LockedMemory.fix,
    varies=fabric.LockedMemory.profiles,
)
def check_locked_memory(ctx, host, sshd, effective_sshd, note):
    skip = fabric.LockedMemory.skip_reason(ctx.profile)
    if skip:
        pytest.skip(skip)
    if not sshd.running:
        pytest.skip("sshd is not running (see sshd-start)")
    _need_ssh_client(ctx, host)
    started, result = mounted_session(ctx, host, sshd, effective_sshd)
    if result is None or result.rc != 0 or "imagekit-login-ok" not in result.stdout:
        pytest.skip("no ssh login with a mounted key (see ssh-login-mounted-key)")
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    runtime = host.run("sh -c 'ulimit -l'").stdout.strip()
    expect_judgement(fabric.LockedMemory.judge(seen.get("memlock", ""), runtime), note)
