"""Requirement units (imagekit/requirements): one rule judged once, which the check suite and
adapt both apply. The parity test generates sshd and ssh settings and shows that the checks'
verdicts and adapt's remedies agree: adapt changes the settings exactly when a check fails or
warns about them (was: the check passed accept-new and adapt rewrote it; the check read
ChallengeResponseAuthentication and adapt did not)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imagekit.checks.suite import checks_ssh
from imagekit.profiles import Profile
from imagekit.requirements import (
    FABRIC,
    PLATFORM,
    REGISTRY,
    SSH_CLIENT,
    SSHD,
    env_units,
    ssh,
)
from imagekit.run import adapt

YES_NO = st.sampled_from(["yes", "no", "", "true"])
# Each name with the values sshd -T / ssh -G may print for it. A generated image starts from
# settings every check passes and changes or drops a few: the cases where one rule matters.
SSHD_VALUES = {
    "port": st.sampled_from(["22", "2222", "2022"]),
    "strictmodes": YES_NO,
    "pubkeyauthentication": YES_NO,
    "permitrootlogin": st.sampled_from(
        ["yes", "no", "prohibit-password", "without-password", "forced-commands-only"]
    ),
    "passwordauthentication": YES_NO,
    "kbdinteractiveauthentication": YES_NO,
    "challengeresponseauthentication": YES_NO,
    "usepam": st.sampled_from(["yes", "no"]),
}
SSH_VALUES = {
    "port": st.sampled_from(["22", "2222"]),
    "stricthostkeychecking": st.sampled_from(["ask", "yes", "no", "false", "accept-new"]),
    "userknownhostsfile": st.sampled_from(
        ["/dev/null", "~/.ssh/known_hosts ~/.ssh/known_hosts2", "/etc/ssh/known"]
    ),
}
GOOD_SSHD = {
    "port": "22",
    "strictmodes": "no",
    "pubkeyauthentication": "yes",
    "permitrootlogin": "prohibit-password",
    "passwordauthentication": "no",
    "kbdinteractiveauthentication": "no",
    "usepam": "yes",
}
GOOD_SSH = {"port": "22", "stricthostkeychecking": "no", "userknownhostsfile": "/dev/null"}


def _near(good: dict[str, str], values: dict):
    """`good` with up to three names changed to other values, and up to two dropped."""
    changed = st.fixed_dictionaries({}, optional=values).filter(lambda d: len(d) <= 3)
    dropped = st.sets(st.sampled_from(sorted(values)), max_size=2)
    return st.builds(
        lambda changes, gone: {k: v for k, v in {**good, **changes}.items() if k not in gone},
        changed,
        dropped,
    )


SSHD_SETTINGS = _near(GOOD_SSHD, SSHD_VALUES)
SSH_SETTINGS = _near(GOOD_SSH, SSH_VALUES)


def _verdict(check, *args, **kwargs) -> str:
    """Run one check function of the suite on fakes: pass, warn or fail."""
    notes = []
    try:
        check(*args, note=lambda level, text: notes.append(level), **kwargs)
    except pytest.fail.Exception:
        return "fail"
    return "warn" if "warn" in notes else "pass"


def _noted(check):
    """A check that takes no `note` argument, made to take one."""

    def run(*args, note, **kwargs):
        check(*args, **kwargs)

    return run


def _ctx(port: int):
    profile = SimpleNamespace(name="p", non_root=False, user="root")
    return SimpleNamespace(port=port, profile=profile)


class _Host:
    """A host where one account has a password: an unsafe sshd setting is a failure."""

    def run(self, command, **kwargs):
        return SimpleNamespace(stdout="alice\n", rc=0)


def _facts(sshd: dict[str, str], client: dict[str, str]):
    lines = [f"sshd.{k}={v}" for k, v in sshd.items()] + [f"ssh.{k}={v}" for k, v in client.items()]
    lines += ["file./usr/sbin/sshd=yes", "which.ssh=/usr/bin/ssh", "probe=done"]
    return adapt.parse_probe("\n".join(lines) + "\n", {"Config": {}})


@settings(max_examples=300, deadline=None, derandomize=True)
@given(sshd=SSHD_SETTINGS, client=SSH_SETTINGS, port=st.sampled_from([22, 2222]))
def test_check_and_adapt_agree_on_every_setting(sshd, client, port):
    ctx, host = _ctx(port), _Host()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checks_ssh, "ssh_client_settings", lambda user_host: client)
        patch.setattr(checks_ssh, "has", lambda ctx, host, command: True)
        _agree(ctx, host, sshd, client, port)


def _agree(ctx, host, sshd, client, port):
    sshd_verdicts = [
        _verdict(_noted(checks_ssh.check_strictmodes), ctx, sshd),
        _verdict(_noted(checks_ssh.check_pubkey_auth), ctx, sshd),
        _verdict(_noted(checks_ssh.check_root_login), ctx, sshd),
        _verdict(checks_ssh.check_password_auth, ctx, host, sshd),
    ]
    port_verdict = _verdict(_noted(checks_ssh.check_sshd_port), ctx, host, sshd)
    r9_verdict = _verdict(checks_ssh.check_host_key_prompt, ctx, host)
    facts = _facts(sshd, client)
    sshd_port_ok = ssh.SshdPort.judge(sshd, port).passed
    client_port_ok = ssh.ClientPort.judge(client, port).passed
    assert (port_verdict == "pass") == (sshd_port_ok and client_port_ok)
    usepam = sshd.get("usepam") == "yes"  # K4's remedy needs it; no check of its own
    assert adapt._sshd_wrong(facts, port) == (
        any(v != "pass" for v in sshd_verdicts) or not sshd_port_ok or not usepam
    )
    assert adapt._ssh_wrong(facts, port) == (r9_verdict != "pass" or not client_port_ok)


def test_accept_new_warns_and_adapt_writes_dev_null():
    """The case that used to split them: one rule, a warning, and adapt's remedy for it."""
    settings = {"stricthostkeychecking": "accept-new", "userknownhostsfile": "/dev/null"}
    assert ssh.NoHostKeyPrompt.judge(settings, 22).status == "warn"
    facts = _facts({}, {**settings, "port": "22"})
    assert adapt.failing_units(facts, "ssh", 22) == [ssh.NoHostKeyPrompt]
    assert ssh.NoHostKeyPrompt.remedy_lines(22) == [
        "StrictHostKeyChecking no",
        "UserKnownHostsFile /dev/null",
    ]


def test_challenge_response_counts_where_sshd_prints_it():
    """OpenSSH before 8.7 prints challengeresponseauthentication instead of kbdinteractive."""
    old = {"passwordauthentication": "no", "challengeresponseauthentication": "yes"}
    assert ssh.PasswordLoginsOff.judge(old, 22).failed
    assert ssh.PasswordLoginsOff.judge({**old, "challengeresponseauthentication": "no"}, 22).passed


def test_every_unit_is_registered_once_and_declares_its_words():
    assert set(REGISTRY) == set(SSHD) | set(SSH_CLIENT) | set(FABRIC) | set(PLATFORM)
    assert len(REGISTRY) == len(set(REGISTRY))
    assert len({unit.check_id for unit in REGISTRY}) == len(REGISTRY) - 1  # ClientPort: R10 twice
    for unit in REGISTRY:
        assert unit.check_id and unit.requirement and unit.title and unit.fix and unit.__doc__
        assert unit.profiles and (unit.symptom is None) == (unit.diagnosis is None)
    for unit in SSHD + SSH_CLIENT:
        assert unit.remedy and unit.settings and unit.source in ("sshd", "ssh")
        assert unit.judge({}, 22).status in ("pass", "warn", "fail")  # defaults of the program
    for unit in env_units():
        assert unit.names and unit.source == "env"
        assert unit.judge({}, Profile(fabric="rdma")).passed  # an ENV that sets nothing


@pytest.mark.parametrize(
    "unit, line",
    [
        (ssh.NoHostKeyPrompt, "Host key verification failed."),
        (ssh.StrictModes, "Authentication refused: bad ownership or modes for directory /root"),
    ],
)
def test_smoke_diagnoses_a_units_symptom_in_its_words(unit, line):
    from imagekit.run.smoke import diagnose

    assert diagnose(f"noise\n{line}\n") == [f"{unit.diagnosis} -- evidence: {line}"]
