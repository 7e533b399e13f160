"""`imagekit check` finds credentials wherever an image carries them: a corpus of images, each
hiding one credential in one place, fails naming the place, and never prints the secret."""

from __future__ import annotations

import json

import pytest

from .conftest import imagekit
from .images import build

# Built from pieces so this file holds no token-shaped string of its own.
HF = "hf_" + "Q7wErTyUiOpAsDfGhJkLzXcVbNm"
GHP = "ghp_" + "Z9yXwVuTsRqPoNmLkJiHgFeDcBa1"
SLACK = "xoxb-" + "2468013579-QwErTyUiOp"
AWS = "AKIA" + "QWERTYUIOPASDFGH"
PASSWORD = "s3cr3t" + "T0ken"
PLAIN = "correct" + "-horse-battery"  # a secret of no well-known shape

# name -> (Dockerfile lines on top of mini, files, build args, check that fails, place named)
CORPUS = {
    "apt-sources": (
        "COPY f /etc/apt/sources.list.d/private.list",
        f"deb http://builder:{PASSWORD}@apt.example.internal/debian bookworm main\n",
        None,
        "credentials-in-layers",
        "/etc/apt/sources.list.d/private.list",
    ),
    "apt-auth": (
        "COPY f /etc/apt/auth.conf.d/private.conf",
        f"machine apt.example.internal login builder password {PASSWORD}\n",
        None,
        "credentials-in-layers",
        "/etc/apt/auth.conf.d/private.conf",
    ),
    "environment": (
        "COPY f /etc/environment",
        f"GITHUB_TOKEN={GHP}\n",
        None,
        "credentials-in-layers",
        "/etc/environment",
    ),
    "profile-d": (
        "COPY f /etc/profile.d/hf.sh",
        f"export HF_TOKEN={HF}\n",
        None,
        "credentials-in-layers",
        "/etc/profile.d/hf.sh",
    ),
    "netrc": (
        "COPY f /root/.netrc",
        f"machine pypi.example login ci password {PASSWORD}\n",
        None,
        "credentials-in-layers",
        "/root/.netrc",
    ),
    "git-credentials": (
        "COPY f /home/dev/.git-credentials",
        f"https://dev:{PASSWORD}@git.example.internal\n",
        None,
        "credentials-in-layers",
        "/home/dev/.git-credentials",
    ),
    "docker-config": (
        "COPY f /root/.docker/config.json",
        json.dumps({"auths": {"registry.example": {"auth": "Y2k6" + PASSWORD}}}),
        None,
        "credentials-in-layers",
        "/root/.docker/config.json",
    ),
    "npmrc": (
        "COPY f /root/.npmrc",
        f"//registry.npmjs.org/:_authToken=npm_{PASSWORD}\n",
        None,
        "credentials-in-layers",
        "/root/.npmrc",
    ),
    "aws": (
        "COPY f /root/.aws/credentials",
        f"[default]\naws_access_key_id = {AWS}\naws_secret_access_key = {PASSWORD}\n",
        None,
        "credentials-in-layers",
        "/root/.aws/credentials",
    ),
    "pip-conf-deleted-later": (
        "COPY f /etc/pip.conf\nRUN rm /etc/pip.conf",
        f"[global]\nindex-url = https://ci:{PASSWORD}@pypi.example.internal/simple\n",
        None,
        "credentials-in-layers",
        "deleted later but still shipped",
    ),
    "env": (f"ENV HF_TOKEN={HF}", None, None, "credentials-in-config", "Env HF_TOKEN"),
    "label": (
        f'LABEL org.example.ci-token="{GHP}"',
        None,
        None,
        "credentials-in-config",
        "Label org.example.ci-token",
    ),
    "build-arg-in-history": (
        'ARG SLACK_HOOK\nRUN test -n "$SLACK_HOOK"',
        None,
        {"SLACK_HOOK": SLACK},
        "credentials-in-config",
        "history step",
    ),
    # #38: no well-known token shape, but a name that says secret (SecretsUsedInArgOrEnv).
    "env-by-name": (
        f"ENV DB_PASSWORD={PLAIN}",
        None,
        None,
        "credentials-in-config",
        "Env DB_PASSWORD: the name says it holds a secret",
    ),
    "build-arg-by-name": (
        'ARG NPM_TOKEN\nRUN test -n "$NPM_TOKEN"',
        None,
        {"NPM_TOKEN": PLAIN},
        "credentials-in-config",
        "build arg NPM_TOKEN says it holds a secret",
    ),
}
SECRETS = (HF, GHP, SLACK, AWS, PASSWORD, PLAIN)


@pytest.mark.parametrize("name", list(CORPUS))
def test_a_hidden_credential_fails_the_check_naming_the_place(engine, mini, tmp_path, name):
    extra, content, args, failing_check, place = CORPUS[name]
    files = {"f": content} if content is not None else {}
    ref = build(
        engine,
        tmp_path / name,
        f"imagekit-test/credential-{name}:latest",
        f"FROM {mini}\n{extra}\n",
        files,
        build_args=args,
    )
    report_path = tmp_path / "r.json"
    result = imagekit("check", ref, "--report", str(report_path), timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 7, output
    report = json.loads(report_path.read_text())
    failed = {r["id"]: r for r in report["results"] if r["status"] == "fail"}
    assert set(failed) == {failing_check}, output
    assert place in failed[failing_check]["evidence"], failed[failing_check]["evidence"]
    for secret in SECRETS:  # masked everywhere: terminal, report
        assert secret not in output and secret not in report_path.read_text()
