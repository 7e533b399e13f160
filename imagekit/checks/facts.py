"""What the compliance checks read from a container (through a pytest-testinfra host) and
how they fail: plain helpers, importable by every check file in suite/."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from imagekit.checks.runner import PROBED_COMMANDS, testinfra_host
from imagekit.requirements import Judgement

SSH_OPTS = (
    "-o BatchMode=yes -o ConnectTimeout=5 "
    # Isolate authentication from R9 (host-key prompts have their own check).
    "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
)


class FailedWithFix(pytest.fail.Exception):
    """A check failed in a way its usual fix does not mend (a tool missing, not misset)."""

    def __init__(self, evidence: str, fix: str) -> None:
        super().__init__(evidence, pytrace=False)
        self.fix = fix


def fail(evidence: str, fix: str) -> None:
    """Fail the check with `evidence`, and `fix` in place of the check's usual one."""
    raise FailedWithFix(evidence, fix)


# Without its launch agent (ssh), Open MPI refuses to start at all, even for ranks on its own
# host: "The value of the MCA parameter plm_rsh_agent (Open MPI 5: plm_ssh_agent) was set to a
# path that could not be found". The fix is the ssh client, not the check's usual one.
SSH_CLIENT_FIX = (
    "install openssh-client: mpirun starts ranks through ssh, and will not start without it"
)
NO_LAUNCH_AGENT = re.compile(r"plm_(rsh|ssh)_agent")


def expect_mpirun(condition: object, evidence: str) -> None:
    """`expect` for an mpirun run: a missing ssh client gets its own fix."""
    if not condition and NO_LAUNCH_AGENT.search(evidence):
        fail(evidence, SSH_CLIENT_FIX)
    expect(condition, evidence)


def expect(condition: object, evidence: str) -> None:
    """Fail the check with `evidence` (what was seen) when `condition` is false."""
    if not condition:
        pytest.fail(evidence, pytrace=False)


# Plain `test -e` rather than testinfra's host.file: its first use on a host reads the
# system's type and release (uname, os-release: four more execs), which no check needs.
def expect_judgement(judgement: Judgement, note=None) -> None:
    """A requirement unit's verdict as a check's: "fail" fails, "warn" is noted."""
    expect(not judgement.failed, judgement.evidence)
    if judgement.status == "warn" and note is not None:
        note("warn", judgement.evidence)


def image_env(ctx) -> dict[str, str]:
    """The image config's ENV, by name."""
    return dict(e.split("=", 1) for e in ctx.config.get("Env") or [] if "=" in e)


def exists(host, path: str) -> bool:
    return host.run(f"test -e {path}").rc == 0


def _once(host, key: str, read: Callable[[], Any]) -> Any:
    """`read()` the first time `key` is asked of this host, remembered after: what is on the
    image does not change during a check (nothing is installed), and several checks ask."""
    known = host.__dict__.setdefault("_imagekit_facts", {})
    if key not in known:
        known[key] = read()
    return known[key]


def probed(ctx) -> bool:
    """Did the initial probe run (else each fact is asked of the image when needed)?"""
    return "end" in ctx.initial


def has(ctx, host, command: str) -> bool:
    """Is `command` on the image's PATH (the same for root and the profile's user: exec takes
    PATH from the image's ENV)?"""
    if probed(ctx) and command in PROBED_COMMANDS:
        return command in ctx.initial["has"]
    return _once(host, f"has:{command}", lambda: host.run(f"command -v {command}").rc == 0)


def sshd_binary(ctx, host) -> str | None:
    if probed(ctx):
        return ctx.initial.get("sshd")
    found = _once(
        host,
        "sshd",
        lambda: host.run(
            "for path in /usr/sbin/sshd /usr/local/sbin/sshd; do"
            ' if test -e "$path"; then echo "$path"; break; fi; done'
        ).stdout.strip(),
    )
    return found or None


def bash_path(ctx, host) -> str | None:
    if probed(ctx):
        return ctx.initial.get("bash")
    return next((p for p in ("/bin/bash", "/usr/bin/bash") if exists(host, p)), None)


def ssh_client_settings(host) -> dict[str, str]:
    """`ssh -G worker-0` as a dict (lower-case names): what the client would do, read once."""
    output = _once(host, "ssh -G", lambda: host.run("ssh -G worker-0", prints=True).stdout)
    return dict((line.split(" ", 1) + [""])[:2] for line in output.splitlines())


def repair_run_sshd(host, ctx) -> list[str]:
    """sshd (even `sshd -t`) refuses to run without /run/sshd; R6 has its own check (on the
    state read before any check ran), so repair it first and let the others prove the rest."""
    if ctx.initial.get("run_sshd") == "root 755 directory":
        return []
    host.run("mkdir -p /run/sshd && chown root:root /run/sshd && chmod 0755 /run/sshd")
    return ["created /run/sshd 0755 first (see R6)"]


# Starts sshd and waits (5 s at most; none when sshd exits non-zero, as it does when it
# refuses its configuration) until something listens on its port, reading
# /proc/net/tcp{,6} with shell builtins (no ss, netstat or grep needed in the image): one
# exec instead of a start and a read per try. Prints `listening`, or why not; exits 0 only
# when listening, so a success reads as one even if the engine loses the output (moby#27289).
_START_SSHD = r"""
sshd_out=$($1 2>&1); rc=$?
tries=0
while [ $tries -lt 50 ]; do
    for table in /proc/net/tcp /proc/net/tcp6; do
        [ -r "$table" ] || continue
        while read -r _ local _ state _; do
            case "$local:$state" in *":$2:0A") echo listening; exit 0 ;; esac
        done < "$table"
    done
    [ "$rc" -ne 0 ] && break  # sshd refused to start: nothing will listen
    sleep 0.1
    tries=$((tries + 1))
done
echo "not listening (sshd exited $rc)"
tail -n 5 "$3" 2>/dev/null || printf '%s\n' "$sshd_out"
exit 3
"""


@dataclass
class Sshd:
    running: bool
    port: int | None
    evidence: str
    repaired: list[str] = field(default_factory=list)
    host: Any = None  # where it runs, when not the check container itself (non-root: K1)


def start_sshd(host, ctx, settings: dict[str, str] | None) -> Sshd:
    """Start sshd the way an operator does (directly, no entrypoint). /run/sshd is repaired
    first when R6 already failed, so this proves R4 on its own."""
    # A non-root sshd (K1) runs without privilege separation: no /run/sshd to repair. `host`
    # is then the profile user's, and sshd reads the config the operator passes with -f.
    repaired = [] if ctx.profile.non_root else repair_run_sshd(host, ctx)
    sshd = sshd_binary(ctx, host)
    if sshd is None or settings is None:
        return Sshd(False, None, "sshd missing or its configuration is invalid (see R4)")
    port = int(settings.get("port", "22"))
    log = "/tmp/imagekit-sshd.log"
    command = f"{sshd}{config_flag(ctx)} -E {log}"
    script = _START_SSHD.replace("'", "'\\''")
    result = host.run(f"sh -c '{script}' sh '{command}' {port:04X} {log}")
    first, _, rest = result.stdout.strip().partition("\n")
    if result.rc == 0:
        return Sshd(True, port, f"sshd listening on {port}", repaired)
    detail = (rest.strip() or result.stderr.strip() or first).replace("\n", " | ")
    return Sshd(False, port, f"sshd did not listen on port {port}: {detail}", repaired)


# Printed by the remote shell after the login marker: one `name=resolved path` line per
# command, then the library path, as a non-interactive ssh session (mpirun's daemon start on
# a worker) sees them.
_REMOTE_PROBE = (
    "echo imagekit-login-ok; "
    'for c in orted prted python3; do printf "%s=%s\\n" "$c" "$(command -v "$c")"; done; '
    'printf "LD_LIBRARY_PATH=%s\\n" "$LD_LIBRARY_PATH"; '
    'printf "memlock=%s\\n" "$(ulimit -l)"'  # F3: what a rank started over ssh may pin
)


def mounted_session(ctx, host, sshd: Sshd, settings: dict[str, str] | None):
    """(Sshd, result) of one ssh login with a key mounted like a Secret that also reads the
    remote environment: the login check and K4's check share it. A non-root profile's `sshd`
    already runs in such a container (K1); else sshd is started in the run's mounted-key
    container. `result` is None when sshd did not start there. Asked once per run: the
    `sshd` fixture starts it in the background (it needs only a running sshd's settings and
    overlaps the checks in the first container), the checks read its answer."""
    return ctx.answer("mounted-session", lambda: _log_in_mounted(ctx, host, sshd, settings))


def prefetch_mounted_session(ctx, host, sshd: Sshd, settings: dict[str, str] | None) -> None:
    """Start `mounted_session` in the background (the `sshd` fixture, once sshd runs)."""
    ctx.in_background("mounted-session", lambda: _log_in_mounted(ctx, host, sshd, settings))


def _log_in_mounted(ctx, host, sshd: Sshd, settings: dict[str, str] | None):
    if sshd.host is not None:
        other, started = sshd.host, sshd
    else:
        other = testinfra_host(ctx.mounted_container(host))
        started = start_sshd(other, ctx, settings)
    if not started.running:
        return started, None
    quoted = _REMOTE_PROBE.replace("'", "'\\''")
    login = f"ssh {SSH_OPTS} -p {started.port} {ctx.profile.user}@localhost '{quoted}'"
    return started, other.run(login, prints=True)


def config_flag(ctx) -> str:
    """` -f FILE` when the profile's operator starts sshd with its own config file."""
    config = ctx.profile.sshd_config
    return "" if config == "/etc/ssh/sshd_config" else f" -f {config}"


def image_private_keys(ctx, host) -> list[str]:
    """The private keys baked into the profile's key directory (id_rsa, id_ed25519, id_ecdsa)."""
    if probed(ctx):
        return ctx.initial["keys"]
    key_dir = ctx.profile.key_dir
    names = " ".join(f"{key_dir}/{name}" for name in ("id_rsa", "id_ed25519", "id_ecdsa"))
    return host.run(f"ls {names} 2>/dev/null").stdout.split()


# Both launches in one exec, one after the other: run at once, Open MPI 4 races itself
# creating its session directory (/tmp/ompi.HOST.UID: "File exists"), a false failure.
_BOTH_MPIRUNS = r"""
d=/tmp/imagekit-mpirun-$$ && mkdir -p "$d" || exit 90
timeout 60 mpirun -np 1 true >/dev/null 2>"$d/bare"; echo $? >"$d/bare.rc"
timeout 60 mpirun --allow-run-as-root -np 1 true >/dev/null 2>"$d/flagged"; echo $? >"$d/flagged.rc"
echo "rc $(cat "$d/bare.rc") $(cat "$d/flagged.rc")"
cat "$d/bare"; echo "--imagekit-flagged--"; cat "$d/flagged"
rm -rf "$d"
"""


def both_mpiruns(host) -> tuple[tuple[int, str], tuple[int, str]]:
    """(exit code, stderr) of `mpirun -np 1 true` and of the same with --allow-run-as-root."""
    out = host.run(_BOTH_MPIRUNS, prints=True).stdout
    first, _, rest = out.partition("\n")
    codes = first.split()
    if len(codes) != 3 or codes[0] != "rc" or not all(c.isdigit() for c in codes[1:]):
        pytest.fail(f"could not run mpirun: {out.strip()[:300]}", pytrace=False)
    bare_err, _, flagged_err = rest.partition("--imagekit-flagged--\n")
    return (int(codes[1]), bare_err.strip()), (int(codes[2]), flagged_err.strip())


# Ends each command's output in a script that runs several: `EXIT_MARK <exit code>`.
EXIT_MARK = "--imagekit-exit"


def split_sshd_output(stdout: str) -> tuple[dict[str, str] | None, int, str]:
    """(`sshd -T`'s settings, None if it failed; `sshd -t`'s exit code and output)."""
    settings_part, _, rest = stdout.partition(f"{EXIT_MARK} ")
    t_code, _, rest = rest.partition("\n")
    _, _, rest = rest.partition(f"{EXIT_MARK} ")
    test_code, _, test_output = rest.partition("\n")
    if not t_code.strip().isdigit() or not test_code.strip().isdigit():
        return None, 1, f"could not run sshd: {stdout.strip()[-300:]}"
    if int(t_code) != 0:
        return None, int(test_code), test_output.strip()
    settings: dict[str, str] = {}
    for line in settings_part.splitlines():
        name, _, value = line.partition(" ")
        settings.setdefault(name.lower(), value.strip())
    return settings, int(test_code), test_output.strip()
