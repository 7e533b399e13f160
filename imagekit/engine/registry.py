"""A small client for the registry HTTP API (distribution v2): what a tag points at (read
before pushing), one manifest's descriptor, and the PUT of an image index (a multi-platform
tag, which `docker push` cannot write). Credentials come from the Docker config (DOCKER_CONFIG or
~/.docker/config.json), as `docker login` writes them; TLS trusts /etc/docker/certs.d."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import requests

from imagekit.errors import RegistryError

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_INDEX = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
# An index of images with Docker's manifests is Docker's manifest list, of OCI's an OCI index.
INDEX_FOR = {DOCKER_MANIFEST: DOCKER_INDEX, OCI_MANIFEST: OCI_INDEX}
MANIFEST_TYPES = ", ".join([DOCKER_MANIFEST, OCI_MANIFEST])
ANY_MANIFEST_TYPES = ", ".join([DOCKER_MANIFEST, OCI_MANIFEST, DOCKER_INDEX, OCI_INDEX])
# A manifest or index imagekit reads or writes is small; a registry's answer past this is refused.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_INDEX_ENTRIES = 64
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
PLATFORM_WORD = re.compile(
    r"[a-z0-9_.-]{1,32}"
)  # an index's os or architecture, as OCI spells them


@dataclass(frozen=True)
class Descriptor:
    """What an index entry says of one manifest: its media type, digest and size in bytes."""

    media_type: str
    digest: str
    size: int


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
        response = self._request(f"/v2/{self.path}/manifests/{tag}", {"Accept": MANIFEST_TYPES})
        if response.status_code == 404:
            return None
        self._raise_for(response)
        return response.json().get("config", {}).get("digest")

    def descriptor(self, reference: str) -> Descriptor | None:
        """The manifest or index a tag or digest names, as an index entry would describe it;
        None when the registry has no such reference."""
        response = self._manifest(reference)
        if response is None:
            return None
        body = response.content
        media_type = response.headers.get("Content-Type", "").split(";", 1)[0].strip()
        if media_type not in (DOCKER_MANIFEST, OCI_MANIFEST, DOCKER_INDEX, OCI_INDEX):
            raise RegistryError(f"manifest {reference}: unexpected media type {media_type!r}")
        return Descriptor(media_type, "sha256:" + hashlib.sha256(body).hexdigest(), len(body))

    def index_configs(self, tag: str) -> dict[str, str] | None:
        """What an index at `tag` holds: each platform ("os/arch") and the image ID (config
        digest) of its manifest. None when the tag is absent; {} when it names one image's
        manifest rather than an index. The registry's answer is untrusted: a malformed or
        oversized index is a RegistryError."""
        response = self._manifest(tag)
        if response is None:
            return None
        try:
            body = response.json()
            if (
                body.get("mediaType", response.headers.get("Content-Type"))
                not in INDEX_FOR.values()
            ):
                return {}
            entries = body["manifests"][:MAX_INDEX_ENTRIES]
            found = {}
            for entry in entries:
                words = (entry["platform"]["os"], entry["platform"]["architecture"])
                if not all(isinstance(w, str) and PLATFORM_WORD.fullmatch(w) for w in words):
                    raise ValueError(words)
                platform = "/".join(words)
                digest = entry["digest"]
                if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
                    raise ValueError(digest)
                found[platform] = self.config_digest(digest) or ""
            return found
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RegistryError(f"{tag}: the registry's index is malformed") from None

    def _manifest(self, reference: str) -> requests.Response | None:
        """The registry's answer for a tag or digest, any manifest type, size-capped; None
        when it has no such reference."""
        response = self._request(
            f"/v2/{self.path}/manifests/{reference}", {"Accept": ANY_MANIFEST_TYPES}
        )
        if response.status_code == 404:
            return None
        self._raise_for(response)
        if len(response.content) > MAX_MANIFEST_BYTES:
            raise RegistryError(f"manifest {reference} is over {MAX_MANIFEST_BYTES} bytes")
        return response

    def put_manifest(self, tag: str, media_type: str, body: bytes) -> str:
        """Write a manifest (here: an index) under a tag; return its digest. The registry
        refuses one that names a manifest it does not hold, so a tag never dangles."""
        response = self._request(
            f"/v2/{self.path}/manifests/{tag}",
            {"Content-Type": media_type},
            method="PUT",
            data=body,
        )
        self._raise_for(response)
        return "sha256:" + hashlib.sha256(body).hexdigest()

    def blob_exists(self, digest: str) -> bool:
        response = self._request(f"/v2/{self.path}/blobs/{digest}", {}, method="HEAD")
        return response.status_code == 200

    # -- transport ---------------------------------------------------------------------

    def _request(
        self, path: str, headers: dict[str, str], method: str = "GET", data: bytes | None = None
    ) -> requests.Response:
        schemes = ["https", "http"] if is_loopback(self.host) else ["https"]
        last: Exception | None = None
        for scheme in schemes:
            url = f"{scheme}://{self.host}{path}"
            try:
                response = requests.request(
                    method,
                    url,
                    headers=headers,
                    data=data,
                    timeout=30,
                    verify=self.verify,
                    auth=self.auth,
                )
                if response.status_code == 401:
                    response = self._with_token(response, method, url, headers, data)
                return response
            except requests.exceptions.SSLError as exc:
                last = exc
            except requests.exceptions.ConnectionError as exc:
                last = exc
        raise RegistryError(f"cannot reach registry {self.host}: {_short(last)}")

    def _with_token(
        self, challenge: requests.Response, method, url, headers, data=None
    ) -> requests.Response:
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
            data=data,
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
