"""sshd and ssh as the operator uses them (R3-R7, R9, R10): settings, start, port, prompts, logins."""

from __future__ import annotations

import pytest

from imagekit.checks import check
from imagekit.checks.facts import (
    SSH_CLIENT_FIX,
    SSH_OPTS,
    expect,
    fail,
    has,
    image_private_keys,
    mounted_session,
    ssh_client_settings,
    sshd_binary,
)

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


def _setting(effective_sshd, name: str) -> str:
    if effective_sshd is None:
        pytest.skip("sshd missing or its configuration is invalid (see sshd-config)")
    return effective_sshd.get(name, "")


@check(
    "strictmodes",
    "R5",
    "sshd runs with StrictModes no",
    fix="set `StrictModes no` in /etc/ssh/sshd_config (Secret-mounted keys fail mode checks)",
)
def check_strictmodes(effective_sshd):
    value = _setting(effective_sshd, "strictmodes")
    expect(value == "no", f"sshd -T: strictmodes {value}")


@check(
    "pubkey-auth",
    "R3",
    "sshd accepts public keys",
    fix="set `PubkeyAuthentication yes` in /etc/ssh/sshd_config",
)
def check_pubkey_auth(effective_sshd):
    value = _setting(effective_sshd, "pubkeyauthentication")
    expect(value == "yes", f"sshd -T: pubkeyauthentication {value}")


@check(
    "root-login-key-only",
    "R3",
    "root may log in with a key and never with a password",
    fix="set `PermitRootLogin prohibit-password` in /etc/ssh/sshd_config",
)
def check_root_login(ctx, effective_sshd):
    if ctx.profile.non_root:
        pytest.skip(f"profile {ctx.profile.name}: {ctx.profile.user} logs in, not root")
    value = _setting(effective_sshd, "permitrootlogin")
    expect(value in ("prohibit-password", "without-password"), f"sshd -T: permitrootlogin {value}")


@check(
    "password-auth-off",
    "SEC",
    "password and keyboard-interactive logins are off",
    fix="set `PasswordAuthentication no` and `KbdInteractiveAuthentication no`",
)
def check_password_auth(host, effective_sshd, note):
    password = _setting(effective_sshd, "passwordauthentication")
    kbd = effective_sshd.get(
        "kbdinteractiveauthentication", effective_sshd.get("challengeresponseauthentication", "no")
    )
    if password == "no" and kbd == "no":
        return
    seen = f"sshd -T: passwordauthentication {password}, kbdinteractiveauthentication {kbd}"
    # Exploitable only if some account has a password: a hash, not *, ! or empty.
    users = host.run("awk -F: '$2 !~ /^([*!].*)?$/ {print $1}' /etc/shadow").stdout.split()
    expect(not users, f"{seen}; accounts with a password: {', '.join(users)}")
    note("warn", f"{seen}; no account has a password today, but turn it off")


# -- R6, R4 (start), R10, R9 -----------------------------------------------------------------


@check(
    "run-sshd",
    "R6",
    "/run/sshd exists, owned by root, mode 0755",
    fix="add `RUN mkdir -p /run/sshd && chmod 0755 /run/sshd` (sshd dies without it)",
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


@check(
    "sshd-port",
    "R10",
    "sshd and the ssh client use the platform's port",
    fix="set `Port` in /etc/ssh/sshd_config and /etc/ssh/ssh_config to the platform's port",
)
def check_sshd_port(ctx, user_host, effective_sshd):
    server = int(_setting(effective_sshd, "port") or 22)
    client = ssh_client_settings(user_host).get("port", "22")
    client_port = int(client) if client.isdigit() else 22
    expect(
        server == ctx.port and client_port == ctx.port,
        (
            f"profile {ctx.profile.name} expects port {ctx.port}; "
            f"sshd listens on {server}, the ssh client dials {client_port}"
        ),
    )


@check(
    "no-host-key-prompt",
    "R9",
    "the ssh client never asks about unknown host keys",
    fix="in /etc/ssh/ssh_config: `StrictHostKeyChecking no` and `UserKnownHostsFile /dev/null`",
)
def check_host_key_prompt(ctx, user_host, note):
    if not has(ctx, user_host, "ssh"):
        fail(
            "no ssh client (openssh-client): mpirun cannot reach workers",
            fix=SSH_CLIENT_FIX,
        )
    settings = ssh_client_settings(user_host)
    strict = settings.get("stricthostkeychecking", "ask")
    known = settings.get("userknownhostsfile", "~/.ssh/known_hosts")
    expect(
        strict in ("false", "no", "accept-new"),
        (f"ssh -G: stricthostkeychecking {strict}: mpirun would hang at a host-key prompt"),
    )
    if strict == "accept-new" or known.split()[0] != "/dev/null":
        note(
            "warn",
            f"stricthostkeychecking {strict}, userknownhostsfile {known}: writes to "
            "~/.ssh, which a Secret mount makes read-only",
        )


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


def _image_env(ctx, name: str) -> str:
    env = dict(e.split("=", 1) for e in ctx.config.get("Env") or [] if "=" in e)
    return env.get(name, "")


@check(
    "remote-environment",
    "K4",
    "a non-interactive ssh session (how mpirun starts ranks on workers) finds the MPI daemon, "
    "python3 and the image's LD_LIBRARY_PATH",
    fix="make the image's PATH and LD_LIBRARY_PATH reach ssh sessions: write them into "
    "/etc/environment (sshd reads it through pam_env) or a SetEnv line in sshd_config; "
    "ENV alone never reaches processes sshd starts",
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
        for d in _image_env(ctx, "LD_LIBRARY_PATH").split(":")
        if d and d not in session_libs
    ]
    expect(not lost, f"in a non-interactive ssh session: {'; '.join(lost)} not found")
