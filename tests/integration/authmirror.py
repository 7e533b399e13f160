"""Stand-ins for the private apt mirror and PyPI index that teams build behind: real HTTP(S)
servers that refuse every request without the right Basic credentials and answer the others
from the public archive / PyPI, so a build through them is a build with credentials."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
import tarfile
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


class AuthMirror(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, upstream: str, prefix: str, login: str, password: str):
        self.upstream = upstream.rstrip("/")
        self.prefix = prefix.rstrip("/")
        self.expected = "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()
        self.login, self.password = login, password
        self.authorized = 0
        self.refused = 0
        self.scheme = "http"
        super().__init__((host, 0), _Handler)

    def use_tls(self, workdir: Path) -> Path:
        """Serve https with a fresh self-signed certificate for this address; returns a CA
        bundle (the host's plus this certificate) for the build to trust."""
        host = self.server_address[0]
        key, cert = workdir / "mirror.key", workdir / "mirror.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", str(key), "-out", str(cert), "-subj", "/CN=imagekit-test-mirror",
             "-addext", f"subjectAltName=IP:{host}"],
            check=True, capture_output=True,
        )  # fmt: skip
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.scheme = "https"
        bundle = workdir / "ca-bundle.pem"
        with bundle.open("wb") as out:
            with HOST_CA_BUNDLE.open("rb") as host_bundle:
                shutil.copyfileobj(host_bundle, out)
            out.write(cert.read_bytes())
        return bundle

    def url(self, with_credentials: bool = True) -> str:
        host, port = self.server_address[:2]
        auth = f"{self.login}:{self.password}@" if with_credentials else ""
        return f"{self.scheme}://{auth}{host}:{port}{self.prefix}"

    def __enter__(self) -> AuthMirror:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: AuthMirror

    def do_GET(self) -> None:  # noqa: N802
        if self.headers.get("Authorization") != self.server.expected:
            self.server.refused += 1
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="imagekit-test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if not self.path.startswith(self.server.prefix + "/"):
            self.send_error(404)
            return
        self.server.authorized += 1
        upstream = self.server.upstream + self.path[len(self.server.prefix) :]
        request = urllib.request.Request(upstream, headers={"User-Agent": "imagekit-test"})
        try:
            response = urllib.request.urlopen(request, timeout=60)
        except urllib.error.HTTPError as exc:
            self.send_error(exc.code)
            return
        with response:
            self.send_response(200)
            for name in ("Content-Type", "Content-Length", "Last-Modified"):
                if response.headers.get(name):
                    self.send_header(name, response.headers[name])
            self.end_headers()
            shutil.copyfileobj(response, self.wfile, 1 << 16)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def leaks(engine, ref: str, secrets: list[bytes]) -> list[str]:
    """Every place in `docker save` of ref (as a registry would receive it: the config,
    the manifest, every file of every layer) that holds one of secrets."""
    found = []

    def scan(place: str, content: bytes) -> None:
        found.extend(place for secret in secrets if secret in content)

    with engine.saved_image(ref) as stream, tarfile.open(fileobj=stream, mode="r|") as saved:
        for member in saved:
            if not member.isfile():
                continue
            data = saved.extractfile(member)
            if not member.name.endswith("layer.tar"):
                scan(member.name, data.read())
                continue
            with tarfile.open(fileobj=data, mode="r|") as layer:
                for item in layer:
                    if item.isfile():
                        scan(f"{member.name}:{item.name}", layer.extractfile(item).read())
    return found
