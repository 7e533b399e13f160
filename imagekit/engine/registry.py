"""A small client for the registry HTTP API (distribution v2), used only to read what a tag
points at before pushing. Credentials come from the Docker config (DOCKER_CONFIG or
~/.docker/config.json), as `docker login` writes them; TLS trusts /etc/docker/certs.d."""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import requests

from imagekit.errors import RegistryError

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    ]
)


def docker_config() -> dict:
    directory = Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker"))
    try:
        return json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def credentials(host: str) -> tuple[str, str] | None:
    entry = docker_config().get("auths", {}).get(host) or {}
    encoded = entry.get("auth")
    if not encoded:
        return None
    user, _, password = base64.b64decode(encoded).decode().partition(":")
    return user, password


def is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host
    return name == "localhost" or name.startswith("127.") or name == "[::1]"


@dataclass
class RegistryClient:
    host: str
    path: str
    auth: tuple[str, str] | None
    verify: str | bool = True

    @classmethod
    def for_repository(cls, repository: str) -> RegistryClient:
        host, _, path = repository.partition("/")
        ca = Path("/etc/docker/certs.d") / host / "ca.crt"
        return cls(host, path, credentials(host), str(ca) if ca.is_file() else True)

    def config_digest(self, tag: str) -> str | None:
        """The image ID (config digest) the tag points at, or None if the tag is absent."""
        response = self._get(f"/v2/{self.path}/manifests/{tag}", {"Accept": MANIFEST_TYPES})
        if response.status_code == 404:
            return None
        self._raise_for(response)
        return response.json().get("config", {}).get("digest")

    def blob_exists(self, digest: str) -> bool:
        response = self._get(f"/v2/{self.path}/blobs/{digest}", {}, method="HEAD")
        return response.status_code == 200

    # -- transport ---------------------------------------------------------------------

    def _get(self, path: str, headers: dict[str, str], method: str = "GET") -> requests.Response:
        schemes = ["https", "http"] if is_loopback(self.host) else ["https"]
        last: Exception | None = None
        for scheme in schemes:
            url = f"{scheme}://{self.host}{path}"
            try:
                response = requests.request(
                    method, url, headers=headers, timeout=30, verify=self.verify, auth=self.auth
                )
                if response.status_code == 401:
                    response = self._with_token(response, method, url, headers)
                return response
            except requests.exceptions.SSLError as exc:
                last = exc
            except requests.exceptions.ConnectionError as exc:
                last = exc
        raise RegistryError(f"cannot reach registry {self.host}: {_short(last)}")

    def _with_token(self, challenge: requests.Response, method, url, headers) -> requests.Response:
        header = challenge.headers.get("WWW-Authenticate", "")
        if not header.lower().startswith("bearer"):
            return challenge  # basic auth was already sent; 401 stands
        params = dict(re.findall(r'(\w+)="([^"]*)"', header))
        realm = params.pop("realm", "")
        token = requests.get(realm, params=params, auth=self.auth, timeout=30, verify=self.verify)
        if token.status_code != 200:
            return token
        body = token.json()
        bearer = body.get("token") or body.get("access_token")
        return requests.request(
            method,
            url,
            timeout=30,
            verify=self.verify,
            headers={**headers, "Authorization": f"Bearer {bearer}"},
        )

    def _raise_for(self, response: requests.Response) -> None:
        if response.status_code in (401, 403):
            raise RegistryError(
                f"{response.status_code} {response.reason}", auth=True, transient=False
            )
        if response.status_code >= 400:
            raise RegistryError(
                f"{response.status_code} {response.reason}", transient=response.status_code >= 500
            )


def _short(exc: Exception | None) -> str:
    text = str(exc) if exc else "unknown error"
    if "Connection refused" in text:
        return "connection refused"
    return text[:200]
