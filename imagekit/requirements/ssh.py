"""sshd and ssh settings an MPIJob needs (R3, R5, R9, R10, SEC): one class a requirement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from imagekit.requirements.base import Judgement, SettingsRequirement

if TYPE_CHECKING:
    from imagekit.profiles import Profile


def _verdict(ok: bool, evidence: str) -> Judgement:
    return Judgement("pass" if ok else "fail", evidence)


class StrictModes(SettingsRequirement):
    """R5: sshd must not check the modes of the key files: a Kubernetes Secret mounts them
    group- or world-readable (and owned by root for a non-root user), which StrictModes
    refuses, so every login fails."""

    check_id = "strictmodes"
    requirement = "R5"
    title = "sshd runs with StrictModes no"
    fix = "set `StrictModes no` in /etc/ssh/sshd_config (Secret-mounted keys fail mode checks)"
    remedy = "StrictModes no"
    source = "sshd"
    settings = ("strictmodes",)
    symptom = r"Authentication refused: bad ownership or modes"
    diagnosis = "R5: sshd refuses the mounted keys: StrictModes is on (set StrictModes no)"

    @classmethod
    def judge(cls, settings: Mapping[str, str], port: int) -> Judgement:
        value = settings.get("strictmodes", "yes")
        return _verdict(value == "no", f"sshd -T: strictmodes {value}")


class PubkeyAuth(SettingsRequirement):
    """R3: the launcher logs in to every worker with the key the operator mounts."""

    check_id = "pubkey-auth"
    requirement = "R3"
    title = "sshd accepts public-key logins"
    fix = "set `PubkeyAuthentication yes` in /etc/ssh/sshd_config"
    remedy = "PubkeyAuthentication yes"
    source = "sshd"
    settings = ("pubkeyauthentication",)

    @classmethod
    def judge(cls, settings: Mapping[str, str], port: int) -> Judgement:
        value = settings.get("pubkeyauthentication", "yes")
        return _verdict(value == "yes", f"sshd -T: pubkeyauthentication {value}")


ROOT_LOGIN_OK = ("prohibit-password", "without-password")


class RootLoginKeyOnly(SettingsRequirement):
    """R3: MPIJobs run as root by default; root logs in with a key and never a password.
    (Profiles whose user is not root skip it: that user logs in instead.)"""

    check_id = "root-login-key-only"
    requirement = "R3"
    title = "root may log in with a key and never with a password"
    fix = "set `PermitRootLogin prohibit-password` in /etc/ssh/sshd_config"
    remedy = "PermitRootLogin prohibit-password"
    source = "sshd"
    settings = ("permitrootlogin",)
    profiles = "skipped where the profile's user is not root (that user logs in instead)"

    @classmethod
    def skip_reason(cls, profile: Profile, labels: Mapping[str, str] | None = None) -> str | None:
        if profile.non_root:
            return f"profile {profile.name}: {profile.user} logs in, not root"
        return None

    @classmethod
    def judge(cls, settings: Mapping[str, str], port: int) -> Judgement:
        value = settings.get("permitrootlogin", "prohibit-password")
        return _verdict(value in ROOT_LOGIN_OK, f"sshd -T: permitrootlogin {value}")


class PasswordLoginsOff(SettingsRequirement):
    """SEC: password and keyboard-interactive logins are off. OpenSSH before 8.7 calls the
    second ChallengeResponseAuthentication; `sshd -T` prints whichever its version knows.
    The check softens a failure to a warning when no account has a password (it reads
    /etc/shadow); adapt turns both off either way."""

    check_id = "password-auth-off"
    requirement = "SEC"
    title = "password and keyboard-interactive logins are off"
    fix = "set `PasswordAuthentication no` and `KbdInteractiveAuthentication no`"
    # ChallengeResponseAuthentication: every OpenSSH reads it (8.7+ as KbdInteractive's alias).
    remedy = "PasswordAuthentication no\nChallengeResponseAuthentication no"
    source = "sshd"
    settings = (
        "passwordauthentication",
        "kbdinteractiveauthentication",
        "challengeresponseauthentication",
    )

    @classmethod
    def judge(cls, settings: Mapping[str, str], port: int) -> Judgement:
        password = settings.get("passwordauthentication", "yes")
        kbd = settings.get(
            "kbdinteractiveauthentication", settings.get("challengeresponseauthentication", "yes")
        )
        return _verdict(
            password == "no" and kbd == "no",
            f"sshd -T: passwordauthentication {password}, kbdinteractiveauthentication {kbd}",
        )


class SshdPort(SettingsRequirement):
    """R10: sshd listens on the platform's port (22 for the seed, 2222 for Kubeflow's
    non-root examples)."""

    check_id = "sshd-port"
    requirement = "R10"
    title = "sshd and the ssh client use the platform's port"
    fix = "set `Port` in /etc/ssh/sshd_config and /etc/ssh/ssh_config to the platform's port"
    remedy = "Port {port}"
    source = "sshd"
    settings = ("port",)
    profiles = "the profile's port: 22 (seed), 2222 (Kubeflow's profiles); --port overrides"
    uses_port = "sshd listens on"  # how the evidence says what the program does with it

    @classmethod
    def judge(cls, settings: Mapping[str, str], port: int) -> Judgement:
        value = settings.get("port", "22")
        return _verdict(value == str(port), f"{cls.uses_port} {value}")


class ClientPort(SshdPort):
    """R10: mpirun's ssh dials the port the workers' sshd listens on."""

    source = "ssh"
    uses_port = "the ssh client dials"


class NoHostKeyPrompt(SettingsRequirement):
    """R9: the launcher's ssh never asks about a worker's unknown host key (mpirun would hang
    at the prompt). `accept-new` does not ask, but writes to ~/.ssh/known_hosts, which a
    Secret mount makes read-only: a warning, as is any known-hosts file but /dev/null."""

    check_id = "no-host-key-prompt"
    requirement = "R9"
    title = "the ssh client never asks about unknown host keys"
    fix = "in /etc/ssh/ssh_config: `StrictHostKeyChecking no` and `UserKnownHostsFile /dev/null`"
    remedy = "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null"
    source = "ssh"
    settings = ("stricthostkeychecking", "userknownhostsfile")
    symptom = r"Host key verification failed|Are you sure you want to continue connecting"
    diagnosis = (
        "R9: ssh stops at a host-key prompt (StrictHostKeyChecking no, UserKnownHostsFile "
        "/dev/null in /etc/ssh/ssh_config)"
    )

    @classmethod
    def judge(cls, settings: Mapping[str, str], port: int) -> Judgement:
        strict = settings.get("stricthostkeychecking", "ask")
        known = settings.get("userknownhostsfile", "~/.ssh/known_hosts")
        if strict not in ("false", "no", "accept-new"):
            return Judgement(
                "fail", f"ssh -G: stricthostkeychecking {strict}: mpirun would hang at a prompt"
            )
        if strict == "accept-new" or known.split()[:1] != ["/dev/null"]:
            return Judgement(
                "warn",
                f"stricthostkeychecking {strict}, userknownhostsfile {known}: writes to "
                "~/.ssh, which a Secret mount makes read-only",
            )
        return Judgement("pass", f"ssh -G: stricthostkeychecking {strict}")


SSHD: tuple[type[SettingsRequirement], ...] = (
    StrictModes,
    PubkeyAuth,
    RootLoginKeyOnly,
    PasswordLoginsOff,
    SshdPort,
)
SSH_CLIENT: tuple[type[SettingsRequirement], ...] = (ClientPort, NoHostKeyPrompt)
