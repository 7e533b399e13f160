"""imagekit's compliance checks, run by pytest-testinfra against one container of the image.

Each check proves one requirement (R1-R12) or one security property (SEC) and names the
fix. A check whose precondition another check already covers is skipped, not failed, so a
broken image fails exactly the checks for what is broken. Run by imagekit.checks.runner;
`host` is a testinfra host (as root), `ctx` the CheckContext, `note` adds warn/info lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pytest

from imagekit.checks import check
from imagekit.checks.runner import mounted_keys, start_mounted, testinfra_host

SSH_OPTS = (
    "-o BatchMode=yes -o ConnectTimeout=5 "
    # Isolate authentication from R9 (host-key prompts have their own check).
    "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
)


# -- facts -------------------------------------------------------------------------------


def expect(condition: object, evidence: str) -> None:
    """Fail the check with `evidence` (what was seen) when `condition` is false."""
    if not condition:
        pytest.fail(evidence, pytrace=False)


def has(host, command: str) -> bool:
    return host.run(f"command -v {command}").rc == 0


def sshd_binary(host) -> str | None:
    for path in ("/usr/sbin/sshd", "/usr/local/sbin/sshd"):
        if host.file(path).exists:
            return path
    return None


def repair_run_sshd(host, ctx) -> list[str]:
    """sshd (even `sshd -t`) refuses to run without /run/sshd; R6 has its own check (on the
    state read before any check ran), so repair it first and let the others prove the rest."""
    if ctx.initial.get("run_sshd") == "root 755 directory":
        return []
    host.run("mkdir -p /run/sshd && chown root:root /run/sshd && chmod 0755 /run/sshd")
    return ["created /run/sshd 0755 first (see R6)"]


@pytest.fixture(scope="module")
def effective_sshd(host, ctx) -> dict[str, str] | None:
    """`sshd -T` for root, with a throwaway host key so images without keys can be read."""
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


def listening_ports(host) -> set[int]:
    """TCP ports in LISTEN state, from /proc (no ss/netstat needed in the image)."""
    out = host.run("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null").stdout
    ports = set()
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) > 3 and parts[3] == "0A" and ":" in parts[1]:
            ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


@dataclass
class Sshd:
    running: bool
    port: int | None
    evidence: str
    repaired: list[str] = field(default_factory=list)


def start_sshd(host, ctx, settings: dict[str, str] | None) -> Sshd:
    """Start sshd the way an operator does (directly, no entrypoint). /run/sshd is repaired
    first when R6 already failed, so this proves R4 on its own."""
    repaired = repair_run_sshd(host, ctx)
    sshd = sshd_binary(host)
    if sshd is None or settings is None:
        return Sshd(False, None, "sshd missing or its configuration is invalid (see R4)")
    port = int(settings.get("port", "22"))
    result = host.run(f"{sshd} -E /tmp/imagekit-sshd.log")
    for _ in range(50):
        if port in listening_ports(host):
            return Sshd(True, port, f"sshd listening on {port}", repaired)
        host.run("sleep 0.1")
    log = host.run("tail -n 5 /tmp/imagekit-sshd.log").stdout.strip()
    detail = (log or result.stderr.strip() or result.stdout.strip()).replace("\n", " | ")
    return Sshd(False, port, f"sshd did not listen on port {port}: {detail}", repaired)


@pytest.fixture(scope="module")
def sshd(host, ctx, effective_sshd) -> Sshd:
    return start_sshd(host, ctx, effective_sshd)


def image_private_keys(host) -> list[str]:
    out = host.run("ls /root/.ssh/id_rsa /root/.ssh/id_ed25519 /root/.ssh/id_ecdsa 2>/dev/null")
    return out.stdout.split()


# -- R1, R11, R2 --------------------------------------------------------------------------


@check(
    "root-user",
    "R1",
    "the container runs as root (uid 0)",
    fix="remove the USER instruction, or end the Dockerfile with `USER root`",
)
def check_root_user(ctx):
    user = ctx.config.get("User") or ""
    box = ctx.engine.client.containers.get(ctx.container_id)
    code, out = box.exec_run(["id", "-u"], user=user or "root")  # the image's own user
    uid = out.decode().strip()
    expect(
        user in ("", "root", "0", "0:0", "root:root") and uid == "0",
        (f"image USER is {user!r}; a container runs as uid {uid}"),
    )


@check(
    "bash",
    "R11",
    "bash exists (mpirun ... bash run.sh)",
    fix="install bash (apt-get install -y bash)",
)
def check_bash(host):
    expect(host.file("/bin/bash").exists or host.file("/usr/bin/bash").exists, "no /bin/bash")


@check(
    "mpirun",
    "R2",
    "mpirun is on PATH",
    fix="install Open MPI (apt-get install -y openmpi-bin) or put its bin/ on PATH",
)
def check_mpirun(host, note):
    expect(has(host, "mpirun"), "mpirun not found on PATH " + host.run("echo $PATH").stdout.strip())
    version = host.run("mpirun --version").stdout.strip().splitlines()
    note("info", version[0] if version else "mpirun present")


# -- R4, R5, R3: sshd and its effective settings ---------------------------------------------


@check(
    "sshd-config",
    "R4",
    "sshd is installed and `sshd -t` accepts its configuration",
    fix="install openssh-server and fix /etc/ssh/sshd_config until `sshd -t` passes",
)
def check_sshd_config(host, effective_sshd):
    sshd = sshd_binary(host)
    expect(sshd is not None, "no sshd binary (/usr/sbin/sshd)")
    result = host.run(f"{sshd} -t")
    if result.rc != 0 and "no hostkeys available" in result.stderr:
        pytest.skip("no host keys in the image; see sshd-start")
    expect(result.rc == 0, f"sshd -t: {result.stderr.strip()}")


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
def check_root_login(effective_sshd):
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
def check_sshd_port(ctx, host, effective_sshd):
    server = int(_setting(effective_sshd, "port") or 22)
    client = host.run("ssh -G worker-0 | grep -i '^port '").stdout.split()
    client_port = int(client[1]) if len(client) == 2 else 22
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
def check_host_key_prompt(host, note):
    if not has(host, "ssh"):
        pytest.fail("no ssh client (openssh-client): mpirun cannot reach workers")
    settings = dict(
        (line.split(" ", 1) + [""])[:2] for line in host.run("ssh -G worker-0").stdout.splitlines()
    )
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


def _login(host, port: int) -> tuple[bool, str]:
    result = host.run(f"ssh {SSH_OPTS} -p {port} root@localhost echo imagekit-login-ok")
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
    keys = image_private_keys(host)
    if not keys:
        if "mounted" in ctx.profile.user_keys:
            pytest.skip("no key baked into the image; ssh-login-mounted-key covers R7")
        pytest.fail("no private key in /root/.ssh, and the profile needs one in the image")
    if not sshd.running:
        pytest.skip("sshd is not running (see sshd-start)")
    ok, detail = _login(host, sshd.port)
    expect(ok, f"ssh root@localhost with {keys[0]}: {detail}")
    note("warn", f"{keys[0]} is baked into the image: anyone with the image can log in")


@check(
    "ssh-login-mounted-key",
    "R7",
    "root logs in with a key mounted at /root/.ssh the way an operator mounts a Secret",
    fix="keep ssh settings in /etc/ssh (not ~/.ssh), StrictModes no, PubkeyAuthentication yes",
)
def check_login_mounted_key(ctx, host, sshd, effective_sshd):
    if "mounted" not in ctx.profile.user_keys:
        pytest.skip(f"profile {ctx.profile.name} does not mount keys")
    if not sshd.running:
        pytest.skip("sshd is not running (see sshd-start)")
    secret = mounted_keys(ctx, host)
    with start_mounted(ctx, secret) as box:
        other = testinfra_host(box.id)
        started = start_sshd(other, ctx, effective_sshd)
        expect(started.running, f"with keys mounted: {started.evidence}")
        ok, detail = _login(other, started.port)
    expect(ok, f"ssh root@localhost with the mounted key: {detail}")


# -- R8 ----------------------------------------------------------------------------------------


def _need_mpirun(host) -> None:
    if not has(host, "mpirun"):
        pytest.skip("no mpirun (see R2)")


@check(
    "mpirun-as-root",
    "R8",
    "mpirun runs as root without aborting",
    fix="set ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1, "
    "or launch with --allow-run-as-root",
)
def check_mpirun_as_root(ctx, host, note):
    _need_mpirun(host)
    bare = host.run("timeout 60 mpirun -np 1 true")
    flagged = host.run("timeout 60 mpirun --allow-run-as-root -np 1 true")
    if ctx.profile.run_as_root == "env":
        expect(bare.rc == 0, f"mpirun -np 1 true: {bare.stderr.strip()[:300]}")
    else:
        expect(
            flagged.rc == 0,
            (f"mpirun --allow-run-as-root -np 1 true: {flagged.stderr.strip()[:300]}"),
        )
        if bare.rc != 0:
            note("warn", "bare mpirun aborts as root: every launch needs --allow-run-as-root")


@check(
    "mpirun-two-ranks",
    "R8",
    "a 2-rank mpirun runs inside the container",
    fix="check Open MPI's install and openmpi-mca-params.conf; run the command shown",
)
def check_mpirun_two_ranks(host, note):
    _need_mpirun(host)
    cmd = (
        "timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "
        "sh -c 'echo rank=$OMPI_COMM_WORLD_RANK size=$OMPI_COMM_WORLD_SIZE'"
    )
    result = host.run(cmd)
    ranks = sorted(re.findall(r"rank=(\d) size=2", result.stdout))
    expect(
        result.rc == 0 and ranks == ["0", "1"],
        (f"{cmd}: rc {result.rc}: {(result.stderr or result.stdout).strip()[:300]}"),
    )
    note("info", "ranks 0 and 1 of 2 ran")


# -- R12: versions ----------------------------------------------------------------------------

PY_DIST = "python3 -c \"import importlib.metadata as m; print(m.version('{0}'))\""


def found_python(host) -> str | None:
    r = host.run("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    return r.stdout.strip() if r.rc == 0 else None


def found_openmpi(host) -> str | None:
    m = re.search(r"Open MPI\)? (\d+\.\d+\.\d+)", host.run("mpirun --version").stdout)
    return m.group(1) if m else None


def found_dist(name: str):
    def find(host) -> str | None:
        r = host.run(PY_DIST.format(name))
        return r.stdout.strip() if r.rc == 0 else None

    return find


def found_cuda(host) -> str | None:
    r = host.run("cat /usr/local/cuda/version.json")
    if r.rc == 0:
        try:
            return json.loads(r.stdout)["cuda"]["version"]
        except (ValueError, KeyError):
            pass
    m = re.search(r"release (\d+\.\d+)", host.run("nvcc --version").stdout)
    return m.group(1) if m else None


def found_nccl(host) -> str | None:
    for dist in ("nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl-cu13"):
        found = found_dist(dist)(host)
        if found:
            return found
    libs = host.run("ls /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/lib64 2>/dev/null")
    m = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)", libs.stdout)
    return m.group(1) if m else None


def _matches(component: str, expected: str, found: str) -> bool:
    if component == "python":
        return found == expected
    if component == "cuda":
        return found == expected or expected.startswith(found + ".")
    return found == expected or found.split("+")[0] == expected  # 2.13.0 declared, 2.13.0+cpu found


VERSION_PROBES = {
    "python": (found_python, "python3"),
    "openmpi": (found_openmpi, "mpirun"),
    "torch": (found_dist("torch"), None),
    "deepspeed": (found_dist("deepspeed"), None),
    "cuda": (found_cuda, None),
    "nccl": (found_nccl, None),
}


@pytest.mark.parametrize("component", list(VERSION_PROBES))
@check(
    "version",
    "R12",
    "the versions the image declares are the versions inside it",
    fix="rebuild so the installed version matches the declared one (or fix the labels/recipe)",
)
def check_version(ctx, host, note, component):
    probe, needs = VERSION_PROBES[component]
    if needs and not has(host, needs):
        pytest.skip(f"no {needs} (see R2/R11)" if component == "openmpi" else f"no {needs}")
    expected = ctx.expected.get(component)
    found = probe(host)
    if expected == "from-torch":
        note("info", f"{component} from torch: {found or 'none (CPU torch)'}")
        return
    if expected is None:
        if found is None:
            pytest.skip(f"{component}: not declared, not found")
        note("info", f"{component} {found} (reported, not asserted: nothing declares it)")
        return
    expect(
        found is not None,
        (f"{component} {expected} is declared ({ctx.expected_source}) but not installed"),
    )
    expect(
        _matches(component, expected, found),
        (f"{component}: declared {expected} ({ctx.expected_source}), found {found}"),
    )
    note("info", f"{component} {found}")


# -- security: what every layer ships -----------------------------------------------------

KEY_NAMES = re.compile(r"(^|/)(ssh_host_\w+_key|id_(rsa|dsa|ecdsa|ed25519)(_sk)?)$")
CREDENTIAL_FILES = re.compile(
    r"(^|/)(\.netrc|\.git-credentials|\.pypirc|\.docker/config\.json|\.aws/credentials)$"
)
URL_WITH_PASSWORD = re.compile(rb"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@")


def _where(f) -> str:
    return f"/{f.path} (layer {f.layer}{', deleted later but still shipped' if f.shadowed else ''})"


@check(
    "private-keys-in-layers",
    "SEC",
    "no undeclared private key material in any layer",
    fix="generate keys at run time, or mount them (Secret); declare baked keys in the recipe "
    "(ssh.user_keys: image / ssh.host_keys: build) or the profile",
)
def check_private_keys(ctx, note):
    found = [
        f
        for f in ctx.layers()
        if KEY_NAMES.search(f.path) or (f.head is not None and b"PRIVATE KEY-----" in f.head)
    ]
    allowed = set(ctx.profile.allow_keys_in_layers)
    if ctx.declared("host-keys") == "build":
        allowed.add("host")
    if ctx.declared("user-keys") == "image":
        allowed.add("user")
    bad, declared = [], []
    for f in found:
        kind = "host" if f.path.startswith("etc/ssh/") else "user"
        (declared if kind in allowed and not f.shadowed else bad).append(f"{kind} key {_where(f)}")
    expect(not bad, "; ".join(bad))
    if declared:
        note("warn", "declared: " + "; ".join(declared))


@check(
    "build-secrets-in-layers",
    "SEC",
    "no build-only CA bundle, build files or credentials left in any layer",
    fix="pass CAs and credentials to builder stages only (imagekit build --ca-bundle); "
    "deleting a file in a later layer does not remove it from the image",
)
def check_build_secrets(ctx):
    bad = []
    for f in ctx.layers():
        head = f.head or b""
        if "imagekit-build" in f.path:
            bad.append(f"build file {_where(f)}")
        elif b"BEGIN CERTIFICATE" in head and (
            f.shadowed or f.path.startswith(("tmp/", "var/tmp/", "root/"))
        ):
            bad.append(f"build-only certificate {_where(f)}")
        elif CREDENTIAL_FILES.search(f.path) or URL_WITH_PASSWORD.search(head):
            bad.append(f"credentials {_where(f)}")
    expect(not bad, "; ".join(bad))
