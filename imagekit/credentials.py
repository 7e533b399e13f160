"""What a credential looks like: secret-sounding names and well-known token shapes. Used by
recipe validation (an `env` entry must not ship a secret in the image) and by the check
(credentials anywhere in an image). Evidence never repeats a secret: it is masked."""

from __future__ import annotations

import re
from dataclasses import dataclass

# An environment variable whose name says it holds a secret.
SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|"
    r"AUTH)",
    re.IGNORECASE,
)

# (what, pattern); group "secret" is the part to mask, else the whole match. Every pattern
# is linear on long input (a 200 KB recipe description once took minutes): a match starts only
# where a scheme can start (not inside a run of scheme characters), and every run is bounded.
TOKEN_SHAPES = [
    (
        "URL with a password",
        re.compile(
            r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,31}://"
            r"[^/\s:@'\"]{1,256}:(?P<secret>[^/\s@'\"]{1,256})@"
        ),
    ),
    ("GitHub token", re.compile(r"\b(?P<secret>gh[pousr]_[A-Za-z0-9]{20,})")),
    ("GitHub token", re.compile(r"\b(?P<secret>github_pat_[A-Za-z0-9_]{20,})")),
    ("Hugging Face token", re.compile(r"\b(?P<secret>hf_[A-Za-z0-9]{20,})")),
    ("AWS access key", re.compile(r"\b(?P<secret>(?:AKIA|ASIA)[0-9A-Z]{16})\b")),
    ("Slack token", re.compile(r"\b(?P<secret>xox[abposr]-[A-Za-z0-9-]{10,})")),
    ("private key", re.compile(r"(?P<secret>-----BEGIN [A-Z ]*PRIVATE KEY-----)")),
]


@dataclass(frozen=True)
class Found:
    what: str
    masked: str  # the match with the secret part masked


def mask(secret: str) -> str:
    """Enough to recognise it by, never enough to use it."""
    if secret.startswith("-----BEGIN"):
        return secret
    keep = 4 if len(secret) >= 12 else 1
    return secret[:keep] + "*" * 8


def find(text: str) -> list[Found]:
    found = []
    for what, pattern in TOKEN_SHAPES:
        for match in pattern.finditer(text):
            secret = match.group("secret")
            whole = match.group(0)
            found.append(Found(what, whole.replace(secret, mask(secret))))
    return found


# Names that sound secret and are not: imagekit's own build argument (the URL of the server
# that hands apt its credentials during a build; no secret in it), and Hugging Face's switch.
NOT_SECRET_NAMES = frozenset({"APT_AUTH_URL", "TOKENIZERS_PARALLELISM"})


def secret_name(name: str, allowed: frozenset[str] | tuple[str, ...] = ()) -> bool:
    """Whether `name` says it holds a secret (Docker's SecretsUsedInArgOrEnv rule), unless it
    is one of NOT_SECRET_NAMES or `allowed` (a recipe's or profile's env_not_secret)."""
    return (
        SECRET_NAME.search(name) is not None
        and name not in NOT_SECRET_NAMES
        and name not in allowed
    )


def recipe_env_problems(env: dict[str, str], not_secret: tuple[str, ...]) -> list[str]:
    """One line per `env` entry that would ship a credential in the image."""
    problems = []
    for name, value in env.items():
        shapes = find(str(value))
        if shapes:
            problems.append(
                f"env.{name}: the value holds a {shapes[0].what} ({shapes[0].masked}); "
                "image ENV is readable by anyone with the image: mount it at run time "
                "(a Kubernetes Secret as an env var or file) instead"
            )
        elif secret_name(name, not_secret):
            problems.append(
                f"env.{name}: the name says it is a secret, and image ENV is readable by anyone "
                "with the image: mount it at run time (a Kubernetes Secret) instead, or list it "
                "in env_not_secret if it is not one"
            )
    return problems


def recipe_field_problems(data: object, where: str = "") -> list[str]:
    """One line per recipe value (outside `env`) with a credential's shape, e.g. an index URL
    with a password: recipes are committed, and their values reach locks and image labels."""
    if isinstance(data, dict):
        return [
            problem
            for key, value in data.items()
            if not (where == "" and key == "env")
            for problem in recipe_field_problems(value, f"{where}.{key}" if where else str(key))
        ]
    if isinstance(data, list | tuple):
        return [p for i, v in enumerate(data) for p in recipe_field_problems(v, f"{where}[{i}]")]
    shapes = find(data) if isinstance(data, str) else []
    if not shapes:
        return []
    return [
        f"{where}: holds a {shapes[0].what} ({shapes[0].masked}); recipes are committed and "
        "their values reach locks and labels: pass credentials at build time "
        "(--index-url, --apt-mirror) instead"
    ]


# Files that are credentials by their name alone, wherever they sit.
CREDENTIAL_FILES = re.compile(
    r"(^|/)(\.netrc|_netrc|\.git-credentials|\.aws/credentials|"
    r"\.config/gcloud/(application_default_credentials\.json|credentials\.db)|"
    r"\.azure/(accessTokens\.json|msal_token_cache\.json))$"
)
# Config files that hold credentials when a password/token/auth line is set in them.
CONFIG_FILES = re.compile(
    r"(^|/)(\.npmrc|\.pypirc|\.docker/config\.json|pip\.conf|pip\.ini|\.condarc|condarc|"
    r"\.kube/config|auth\.conf|auth\.conf\.d/[^/]+|\.config/gh/hosts\.yml)$"
)
SECRET_SETTING = re.compile(
    r"""(?ix)(?:^|[\s{,"':/])
    (?P<key>_authToken|_auth|password|passwd|oauth_token|"auth"|token|client-key-data)
    [ \t]{0,8}["']?[ \t]{0,8}[:=]?[ \t]{0,8}["']?[ \t]{0,8}(?P<secret>[^\s"',}]{4,256})"""
)


def file_findings(path: str, head: bytes | None) -> list[str]:
    """Why the file at `path` (with its first bytes `head`) is a credential, masked. Private
    keys are left out: the private-keys check judges them (declared host keys are allowed)."""
    text = (head or b"").decode("utf-8", errors="replace")
    # Most files of an image are not read (no head): only their path can say anything.
    reasons = (
        [f"{f.what}: {f.masked}" for f in find(text) if f.what != "private key"] if text else []
    )
    if CREDENTIAL_FILES.search(path):
        reasons.insert(0, "a credentials file")
    elif CONFIG_FILES.search(path) and not reasons:
        for match in SECRET_SETTING.finditer(text):
            key, secret = match.group("key").strip('"'), match.group("secret")
            if secret.lower() not in ("true", "false", "null", "none", "<redacted>"):
                reasons.append(f"{key} set ({mask(secret)})")
    return reasons


# The legacy builder writes the build args a RUN saw in front of its command in the history:
# `|2 NPM_TOKEN=abc APT_MIRROR= /bin/sh -c ...` (count, then NAME=VALUE words).
_HISTORY_ARGS = re.compile(r"\|(\d{1,3}) ")


def build_args(created_by: str) -> list[tuple[str, str]]:
    """(name, value) of each build arg a history entry records (values read up to a space)."""
    match = _HISTORY_ARGS.match(created_by)
    if match is None:
        return []
    words = created_by[match.end() :].split(" ", int(match[1]))[: int(match[1])]
    return [tuple(word.split("=", 1)) for word in words if "=" in word]  # type: ignore[misc]
