"""The grammar of every value imagekit writes into a file it makes: one home per shape.

Recipes, lock files, profile files and flags are untrusted input (a recipe arrives in a pull
request; a lock is machine-written, so nobody reads it). Each value that reaches a Dockerfile,
a script, a config file or a manifest is checked here, where its model is built, with
`fullmatch` (a `match(...$)` lets a trailing newline through). The template layer escapes for
where a value lands as well (`render.py`); this module is why it rarely has anything to do.

Each `check_*` returns the value or raises ValueError with a message that names the shape, so
pydantic models (`Annotated[str, AfterValidator(check_x)]`) and flag parsers share one text.
Standard library and `packaging` only: flags are checked on the start-up path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

# -- sizes ---------------------------------------------------------------------------------------
# Files users hand imagekit (recipes, locks, profile files) and free text in them. A recipe is a
# few KB and the largest lock here ~40 KB: the limits leave room and stop /dev/zero, a 200 MB
# "recipe" or a megabyte description before any parser or regex sees it.
MAX_INPUT_FILE_BYTES = 1024 * 1024
MAX_TEXT = 4096  # a description, an env value, a label
MAX_WORD = 512  # a package, a requirement, a URL, an MCA value
MAX_ITEMS = 1000  # packages, pins, env entries in one list or mapping
MAX_EPOCH = 4102444800  # 2100-01-01: a SOURCE_DATE_EPOCH past it overflows date tools

# -- characters -------------------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def control_characters(value: str, newline_ok: bool = False) -> bool:
    """Whether `value` holds a character no line of a Dockerfile, script or config may hold."""
    pattern = _CONTROL_BUT_NEWLINE if newline_ok else _CONTROL
    return pattern.search(value) is not None


def _shape(pattern: str, what: str, max_len: int = MAX_WORD):
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if len(value) > max_len:
            raise ValueError(f"longer than {max_len} characters")
        if not compiled.fullmatch(value):
            raise ValueError(f"{quoted(value)} is not {what}")
        return value

    check.__doc__ = f"{what}: {pattern}"
    return check


def quoted(value: str, limit: int = 60) -> str:
    """A value as an error shows it: repr (so a newline reads \\n), cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def shown(value: str, limit: int = 80) -> str:
    """A flag's value in a one-line error: as typed when it is short and printable, else as
    `_shown` writes it (a newline in it must not start a second line of the error)."""
    if len(value) <= limit and not control_characters(value):
        return value
    return quoted(value, limit)


# -- fabrics ----------------------------------------------------------------------------------
# UCX_NET_DEVICES / NCCL_IB_HCA: HCA ports, e.g. mlx5_0:1 or mlx5_0:1,mlx5_1:1 (F2).
NET_DEVICES = r"[A-Za-z0-9_]{1,32}(?::[0-9]{1,3})?(?:,[A-Za-z0-9_]{1,32}(?::[0-9]{1,3})?){0,63}"
check_net_devices = _shape(NET_DEVICES, "HCA ports, e.g. mlx5_0:1 or mlx5_0:1,mlx5_1:1", 2100)
# A Kubernetes extended resource: [DNS subdomain/]name (rdma/hca_shared_devices_a,
# nvidia.com/hostdev).
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
K8S_RESOURCE = rf"(?:{_DNS_LABEL}(?:\.{_DNS_LABEL}){{0,10}}/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?"
check_k8s_resource = _shape(K8S_RESOURCE, "a resource name like rdma/hca_shared_devices_a", 317)


# -- Debian -----------------------------------------------------------------------------------
# Debian policy 5.6.1 (names), 5.6.12 (versions): [epoch:]upstream[-revision].
DEBIAN_NAME = r"[a-z0-9][a-z0-9+.-]+"
DEBIAN_VERSION = r"(?:[0-9]+:)?[0-9A-Za-z][A-Za-z0-9.+~-]*"
DEBIAN_ARCH = r"[a-z0-9][a-z0-9-]*"
check_debian_name = _shape(DEBIAN_NAME, "a Debian package name (lowercase, digits, + - .)", 128)
check_debian_version = _shape(DEBIAN_VERSION, "a Debian package version", 128)
check_apt_package = _shape(
    rf"{DEBIAN_NAME}(?::{DEBIAN_ARCH})?(?:={DEBIAN_VERSION})?",
    "an apt package (name, name:arch or name=version)",
    256,
)

# -- Python -------------------------------------------------------------------------------------
# PEP 508 names; PEP 440 versions as written in pins (no spaces, nothing packaging would strip).
check_python_name = _shape(
    r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?", "a Python package name (PEP 508)", 128
)
check_pep440_text = _shape(r"[A-Za-z0-9.+!_-]+", "a version (PEP 440, e.g. 2.1.2)", 64)
check_file_name = _shape(r"[A-Za-z0-9_+!-][A-Za-z0-9._+!-]*", "a file name (no path)", 255)


def check_pep440(value: str) -> str:
    from packaging.version import InvalidVersion, Version

    check_pep440_text(value)
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError(f"{quoted(value)} is not a valid version (PEP 440, e.g. 2.1.2)") from None
    return value


def check_requirement(value: str) -> str:
    """A PEP 508 requirement, one line (packaging's parser; its markers may quote)."""
    from packaging.requirements import InvalidRequirement, Requirement

    if len(value) > MAX_WORD:
        raise ValueError(f"longer than {MAX_WORD} characters")
    if control_characters(value) or value != value.strip():
        raise ValueError(f"{quoted(value)}: a requirement is one line with no control characters")
    try:
        Requirement(value)
    except InvalidRequirement as exc:
        first = str(exc).splitlines()[0]
        raise ValueError(f"{quoted(value)} is not a PEP 508 requirement: {first}") from None
    return value


# -- environment, ops, digests, MCA --------------------------------------------------------------
check_env_name = _shape(
    r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable name (letters, digits, _)", 128
)
check_op_name = _shape(r"[A-Za-z_][A-Za-z0-9_]*", "a DeepSpeed op builder name", 64)
check_sha256 = _shape(r"[0-9a-f]{64}", "64 lowercase hex digits (a sha256)", 64)
check_digest = _shape(r"sha256:[0-9a-f]{64}", "a digest (sha256:64 hex digits)", 71)
check_mca_key = _shape(r"[a-z][a-z0-9_]*", "an MCA parameter name (lowercase, digits, _)", 128)
# Printable ASCII, no leading or trailing space: a conf file's value is the rest of its line.
check_mca_value = _shape(r"[!-~](?:[ -~]*[!-~])?", "an MCA value (printable, one line)")


def check_text(value: str, max_len: int = MAX_TEXT, newline_ok: bool = False) -> str:
    """Free text (a description, an env value): bounded, no control characters."""
    if len(value) > max_len:
        raise ValueError(f"longer than {max_len} characters")
    if control_characters(value, newline_ok=newline_ok):
        raise ValueError(f"{quoted(value)} holds a control character")
    return value


# -- URLs -----------------------------------------------------------------------------------------
# No whitespace, quotes, backslash, backtick, '#', '$' or control characters: a URL lands in
# sed replacements, pip.conf lines and shell words. Percent-encode anything else.
_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?\[\]@!&()*+,;=%]+")


def check_http_url(value: str) -> str:
    if len(value) > MAX_WORD:
        raise ValueError(f"longer than {MAX_WORD} characters")
    if not _URL_CHARS.fullmatch(value):
        raise ValueError(
            f"{quoted(value)} is not an http(s) URL (no spaces, quotes, '#', '$', '\\' or "
            "control characters; percent-encode them)"
        )
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a port out of range
    except ValueError:
        raise ValueError(f"{quoted(value)} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{quoted(value)} is not an http(s) URL (http://HOST/...)")
    return value


# -- sizes as Docker's flags take them ------------------------------------------------------
# go-units' RAMInBytes (`docker run --shm-size`, `docker build --memory`): a number, an
# optional space, a binary unit with an optional i and b ("1g", "1 GB", "1Gi", "512m"), or bytes.
DOCKER_SIZE = re.compile(r"([0-9]{1,20}(?:\.[0-9]{1,20})?) ?(?:([kmgtp])i?)?b?", re.IGNORECASE)
BINARY_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def size_in_bytes(text: str) -> int | None:
    """A size flag in bytes, as the engine gets it; None when `text` is not a size."""
    found = DOCKER_SIZE.fullmatch(text.strip(" "))
    if found is None:
        return None
    number, unit = found.groups()
    return int(float(number) * BINARY_UNITS[(unit or "").lower()])


def human_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.3g} {unit}"
    return f"{size} B"


# -- image references and tags ----------------------------------------------------------------
# As the distribution spec spells them (ASCII only: Python's \w would take any letter).
REF_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REF_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
# A registry host is told from a path component as Docker tells it: it has a dot or a port,
# or is localhost (`team/img` is a path; `A/img` is neither, so it is refused).
REF_HOST = (
    r"(?:(?:[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)+|localhost)(?::[0-9]{1,5})?"
    r"|[a-zA-Z0-9-]+:[0-9]{1,5})"
)
IMAGE_REF = re.compile(
    rf"(?:(?P<host>{REF_HOST})/)?"  # optional registry host[:port]/ (a dot, a port or localhost)
    rf"(?P<path>{REF_COMPONENT}(?:/{REF_COMPONENT})*)"
    rf"(?::(?P<tag>{REF_TAG}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?"
)
check_tag = _shape(
    REF_TAG, "a tag (letters, digits, '_', '.', '-'; at most 128, not '.'/'-' first)"
)


def check_image_ref(value: str) -> str:
    """[host[:port]/]name[:tag][@sha256:digest]: one parser for every image reference."""
    if len(value) > 255 or not IMAGE_REF.fullmatch(value):
        raise ValueError(f"{quoted(value)} is not an image reference ([host/]name[:tag][@digest])")
    return value


@dataclass(frozen=True)
class Reference:
    """An image reference in its parts: `name` is [host[:port]/]path."""

    name: str
    tag: str | None = None
    digest: str | None = None


def parse_ref(value: str) -> Reference:
    """The one parser of image references (a registry's port is not a tag; a digest is not
    one either). ValueError when `value` is not a reference."""
    match = IMAGE_REF.fullmatch(value) if len(value) <= 255 else None
    if match is None:
        raise ValueError(f"{quoted(value)} is not an image reference ([host/]name[:tag][@digest])")
    name = f"{match['host']}/{match['path']}" if match["host"] else match["path"]
    return Reference(name, match["tag"], match["digest"])


def check_tag_ref(value: str) -> str:
    """An image reference to tag with: no digest (a digest names content, not a tag)."""
    check_image_ref(value)
    if "@" in value:
        raise ValueError(f"{quoted(value)}: a digest cannot be a tag")
    return value
