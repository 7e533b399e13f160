"""An apt mirror with credentials, used by a build without the credentials entering the image.

`--apt-mirror http://user:TOKEN@mirror/debian` is split in two. The URL without credentials
becomes the build argument APT_MIRROR (recorded in the image history, so it must hold no
secret) and names the mirror in the image's sources. The credentials become an apt
`auth.conf.d` entry that a small HTTP server on the Docker bridge gateway hands out while the
build runs: `imagekit-apt-install` fetches it at the start of each RUN that calls apt and
deletes it when that RUN ends, so no layer ever holds it (the legacy builder has no
`RUN --mount=type=secret`, and a COPY would be a layer). The server's URL is a build argument
too; it holds no secret and stays the same from build to build (a fixed port), so layers
that used it still come from cache.

An https mirror signed by a private CA is trusted the same way: with `--ca-bundle FILE`, the
server also hands out the bundle (APT_CA_URL), which `imagekit-apt-install` gives apt as
`Acquire::https::CAInfo` for that RUN only. A CA bundle used only for the build is not the
image's trust: it never reaches a layer either.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from imagekit import grammar
from imagekit.errors import BuildError, UsageError
from imagekit.events import Message, Reporter

if TYPE_CHECKING:
    from imagekit.engine.client import BuildOutcome, Engine

# The port the credentials are served on while a build runs. Fixed, so the URL in the build
# argument (and so the build cache key) is the same on every build; IMAGEKIT_APT_AUTH_PORT
# picks another, and a busy port falls back to any free one (that build then misses the cache
# for its apt layers).
DEFAULT_PORT = 7469
AUTH_PATH = "/apt-auth.conf"
CA_PATH = "/apt-ca.pem"
# What the server can hand a build: (build argument naming its URL, path, what it is).
SERVED = (("APT_AUTH_URL", AUTH_PATH, "credentials"), ("APT_CA_URL", CA_PATH, "CA bundle"))


@dataclass(frozen=True)
class AptMirror:
    """A mirror URL as the image may see it, and the credentials it must not see."""

    url: str  # no credentials: goes into the build arguments and the image's sources
    login: str | None = None
    password: str | None = None

    @property
    def has_credentials(self) -> bool:
        return self.login is not None

    def auth_conf(self) -> str:
        """An apt_auth.conf(5) entry. The scheme is written out: apt applies an entry
        without one to https only, and private mirrors are often plain http."""
        parts = urlsplit(self.url)
        machine = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        return f"machine {machine}\nlogin {self.login}\npassword {self.password or ''}\n"


def parse_mirror(url: str) -> AptMirror:
    """`--apt-mirror URL`, checked, with any user:password taken out of it."""
    try:
        grammar.check_http_url(url)
    except ValueError:
        raise UsageError(
            f"--apt-mirror {grammar.shown(_masked(url))}: not an http(s) URL"
        ) from None
    parts = urlsplit(url)
    if parts.username is None:
        return AptMirror(url)
    netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    if ":" in parts.hostname:  # an IPv6 literal keeps its brackets
        netloc = netloc.replace(parts.hostname, f"[{parts.hostname}]", 1)
    public = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return AptMirror(public, unquote(parts.username), unquote(parts.password or ""))


# templates/apt-install.sh's marker for an https apt source whose certificate apt cannot
# verify (apt-get update only warns, and the install would then miss every package).
UNTRUSTED_MARKER = re.compile(r"imagekit-apt-untrusted: (https://\S+)")


def untrusted_source(text: str) -> str | None:
    """The apt source whose certificate apt could not verify, from a step's output."""
    match = UNTRUSTED_MARKER.search(text)
    return match[1] if match else None


def explain_untrusted(text: str, mirror_url: str | None, ca_bundle: Path | None) -> str | None:
    """A failed step's (or container's) output -> the one line naming the flag to fix, when
    apt refused a certificate; None for any other failure. Build, lock and adapt share it."""
    source = untrusted_source(text)
    return None if source is None else untrusted_message(source, mirror_url, ca_bundle)


def untrusted_message(source: str, mirror_url: str | None, ca_bundle: Path | None) -> str:
    """One line saying which certificate apt refused and which flag fixes it."""
    mirror = parse_mirror(mirror_url) if mirror_url else None
    if mirror is None or urlsplit(mirror.url).netloc != urlsplit(source).netloc:
        return (
            f"apt cannot verify the https certificate of {source}, an apt source of the base "
            "(not --apt-mirror, so --ca-bundle does not reach it): the base must trust its CA"
        )
    if ca_bundle is None:
        return (
            f"--apt-mirror {mirror.url}: apt cannot verify its https certificate; pass "
            "--ca-bundle FILE (or IMAGEKIT_CA_BUNDLE) holding the CA that signed it"
        )
    return (
        f"--apt-mirror {mirror.url}: apt cannot verify its https certificate with --ca-bundle "
        f"{ca_bundle}: the bundle lacks the CA that signed it, or the certificate does not "
        "name this host"
    )


def _masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":********@", 1)


def display(url: str | None) -> str | None:
    """The mirror as progress lines and errors may show it."""
    return _masked(url) if url else url


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], documents: dict[str, bytes], clients: ipaddress.IPv4Network
    ):
        self.documents = documents  # URL path -> body
        self.clients = clients
        self.served = 0
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        client = ipaddress.ip_address(self.client_address[0])
        body = self.server.documents.get(self.path)
        if body is None or client not in self.server.clients:
            self.send_error(404)
            return
        self.server.served += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # the build's own output says what happened


def _bind(gateway: str, documents: dict[str, bytes], subnet: str, report: Reporter) -> _Server:
    port = int(os.environ.get("IMAGEKIT_APT_AUTH_PORT", DEFAULT_PORT))
    clients = ipaddress.ip_network(subnet, strict=False)
    try:
        return _Server((gateway, port), documents, clients)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            report(
                Message(
                    f"warning: port {port} on {gateway} is busy; apt credentials and CA are served on "
                    "another port, so this build's apt layers cannot come from cache "
                    "(IMAGEKIT_APT_AUTH_PORT picks a port)"
                )
            )
            return _Server((gateway, 0), documents, clients)
        raise UsageError(
            f"--apt-mirror: cannot serve its credentials or CA to the build on {gateway} "
            f"(the Docker bridge gateway): {exc.strerror}. The engine must run on this machine."
        ) from None


@contextmanager
def apt_build_args(
    mirror_url: str | None, engine: Engine, report: Reporter, ca_bundle: Path | None = None
) -> Iterator[dict[str, str]]:
    """The build arguments that point a build (or a lock's resolution) at the mirror, with
    its credentials, and for an https mirror the CA bundle, served for as long as the block
    runs, and never after."""
    if not mirror_url:
        yield {}
        return
    mirror = parse_mirror(mirror_url)
    documents = {}
    if mirror.has_credentials:
        documents[AUTH_PATH] = mirror.auth_conf().encode()
    if ca_bundle is not None and mirror.url.startswith("https:"):
        documents[CA_PATH] = ca_bundle.read_bytes()
    if not documents:
        yield {"APT_MIRROR": mirror.url}
        return
    gateway, subnet = engine.bridge_gateway()
    server = _bind(gateway, documents, subnet, report)
    thread = threading.Thread(target=server.serve_forever, name="apt-auth", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    served = [(arg, path, what) for arg, path, what in SERVED if path in documents]
    what = " and ".join(what for _, _, what in served)
    report(Message(f"apt: {what} for {mirror.url} served to the build only (never a layer)"))
    try:
        yield {"APT_MIRROR": mirror.url} | {
            arg: f"http://{host}:{port}{path}" for arg, path, _ in served
        }
    finally:
        server.shutdown()
        server.server_close()


def build_through_mirror(
    engine: Engine,
    context_dir: Path,
    report: Reporter,
    mirror_url: str | None,
    ca_bundle: Path | None,
    build_args: dict[str, str] | None = None,
    **options,
) -> BuildOutcome:
    """engine.build with the mirror's credentials and CA served to it (build, adapt and
    lock's pip stage alike); a step that could not verify an https source ends as the one
    line that names the flag to add, not as apt's later 'Unable to locate package'."""
    with apt_build_args(mirror_url, engine, report, ca_bundle) as apt_args:
        try:
            return engine.build(
                context_dir, report=report, build_args={**(build_args or {}), **apt_args}, **options
            )
        except BuildError as exc:
            untrusted = explain_untrusted(f"{exc.message}\n{exc.hint or ''}", mirror_url, ca_bundle)
            if untrusted is None:
                raise
            raise BuildError(untrusted, hint=exc.hint) from None
