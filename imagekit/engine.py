"""The only module that talks to Docker (docker-py, Engine API). Everything above it sees
plain data and imagekit errors, never docker exceptions.

Builds go through the legacy builder (docker-py has no BuildKit), with `forcerm` so a
failed step leaves no container behind, and no tag: tags are applied only after success.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from imagekit.errors import BuildError, EngineUnavailableError, ImagekitError, ImageNotFoundError

# A container that idles until stopped, whatever the image's entrypoint (checks, launchers).
KEEPALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 1; done"]
STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
INTERMEDIATE = re.compile(r"^ ---> (?:Running in )?([0-9a-f]{12,64})$")


@dataclass(frozen=True)
class Step:
    number: int
    total: int
    instruction: str


@dataclass(frozen=True)
class Log:
    line: str


@dataclass(frozen=True)
class Message:
    """A status line from imagekit itself (bootstrapping a base, tagging, ...)."""

    text: str


Event = Step | Log | Message
Reporter = Callable[[Event], None]


@dataclass
class BuildOutcome:
    image_id: str
    steps: int
    log_tail: list[str] = field(default_factory=list)


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


class Engine:
    """A connected Docker engine. Construct with `Engine.connect()`."""

    def __init__(self, client: docker.DockerClient):
        self.client = client
        self.api = client.api

    @classmethod
    def connect(cls) -> Engine:
        try:
            client = docker.from_env(timeout=600)
            client.ping()
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineUnavailableError(
                f"cannot reach the Docker engine at {engine_address()}: {_reason(exc)}",
                hint="start dockerd, or point DOCKER_HOST at a running engine",
            ) from None
        return cls(client)

    # -- images -------------------------------------------------------------------------

    def image_exists(self, ref: str) -> bool:
        try:
            self.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            return False
        return True

    def inspect_image(self, ref: str) -> dict[str, Any]:
        try:
            return self.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            raise ImageNotFoundError(f"image {ref}: not found in the engine") from None
        except docker.errors.APIError as exc:
            raise ImageNotFoundError(f"image {ref}: {_reason(exc)}") from None

    def import_tarball(self, tarball: Path, ref: str) -> str:
        repository, tag = ref.rsplit(":", 1)
        self.api.import_image_from_file(str(tarball), repository=repository, tag=tag)
        return self.inspect_image(ref)["Id"]

    def load_archive(self, archive: Iterator[bytes], expected_id: str) -> None:
        """`docker load` a docker-archive streamed as chunks; the engine must end up with
        `expected_id`."""
        try:
            for chunk in self.api.load_image(archive):
                if isinstance(chunk, dict) and "error" in chunk:
                    raise BuildError(f"loading the normalized image failed: {chunk['error']}")
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            raise BuildError(f"loading the normalized image failed: {_reason(exc)}") from None
        if not self.image_exists(expected_id):
            raise BuildError(f"the engine did not keep the normalized image {expected_id[:19]}")

    def tag(self, image_id: str, ref: str) -> None:
        repository, tag = split_ref(ref)
        self.api.tag(image_id, repository, tag, force=True)

    def remove_image(self, ref: str) -> None:
        try:
            self.api.remove_image(ref, force=True)
        except docker.errors.ImageNotFound:
            pass

    def history(self, ref: str) -> list[dict[str, Any]]:
        return self.api.history(ref)

    @contextmanager
    def saved_image(self, ref: str) -> Iterator[io.BufferedReader]:
        """`docker save` as a readable stream, never written to disk."""
        self.inspect_image(ref)
        chunks = self.api.get_image(ref, chunk_size=1 << 20)
        try:
            yield io.BufferedReader(ChunkStream(chunks), buffer_size=1 << 20)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    # -- builds -------------------------------------------------------------------------

    def build(
        self,
        context_dir: Path,
        *,
        report: Reporter,
        no_cache: bool = False,
        pull: bool = False,
        build_args: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        target: str | None = None,
    ) -> BuildOutcome:
        """Build without tagging. Raises BuildError naming the failed step."""
        tail: list[str] = []
        current: Step | None = None
        image_id: str | None = None
        last_layer: str | None = None
        stream = self.api.build(
            path=str(context_dir),
            rm=True,
            forcerm=True,
            nocache=no_cache,
            pull=pull,
            buildargs=build_args or {},
            labels=labels or {},
            target=target,
            decode=True,
        )
        try:
            for chunk in _chunks(stream):
                if "error" in chunk:
                    raise _step_failed(current, chunk, tail)
                if "aux" in chunk and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
                for line in chunk.get("stream", "").splitlines():
                    if not line.strip():
                        continue
                    match = STEP.match(line)
                    if match:
                        current = Step(int(match[1]), int(match[2]), match[3])
                        report(current)
                        continue
                    layer = INTERMEDIATE.match(line)
                    if layer:
                        last_layer = layer[1]
                    tail = (tail + [line])[-40:]
                    report(Log(line))
                    done = re.match(r"^Successfully built ([0-9a-f]+)$", line)
                    if done and image_id is None:
                        image_id = done[1]
        except KeyboardInterrupt:
            self._stop_build_containers(last_layer)
            raise
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            raise BuildError(f"build failed: {_reason(exc)}") from None
        if image_id is None:
            raise BuildError("build ended without an image", hint="\n".join(tail[-15:]))
        return BuildOutcome(image_id=image_id, steps=current.total if current else 0, log_tail=tail)

    def _stop_build_containers(self, layer: str | None) -> None:
        """Ctrl-C: the daemon stops the legacy build when the client hangs up; make sure
        the step's container is gone too (it runs from the last layer we saw)."""
        self.api.close()
        if layer is None:
            return
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            leftovers = [
                c
                for c in self.api.containers(all=True)
                if c["ImageID"].removeprefix("sha256:").startswith(layer)
                or c["Id"].startswith(layer)
            ]
            if not leftovers:
                return
            for c in leftovers:
                try:
                    self.api.remove_container(c["Id"], force=True)
                except docker.errors.APIError:
                    pass
            time.sleep(0.5)

    # -- registries -----------------------------------------------------------------------

    def push(self, repository: str, tag: str, report: Reporter) -> str:
        """Push one tag (credentials from the Docker config); return the manifest digest.
        Raises RegistryError, flagged `auth` for refused credentials."""
        from imagekit.registry import RegistryError

        digest = None
        layers: dict[str, str] = {}
        try:
            for chunk in self.api.push(repository, tag=tag, stream=True, decode=True):
                if "error" in chunk:
                    text = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                    auth = bool(
                        re.search(
                            r"unauthorized|authentication required|denied|"
                            r"no basic auth credentials|401|403",
                            text,
                            re.I,
                        )
                    )
                    raise RegistryError(text.strip(), auth=auth, transient=not auth)
                if "id" in chunk and "status" in chunk:
                    status = chunk["status"]
                    if layers.get(chunk["id"]) != status:
                        layers[chunk["id"]] = status
                        report(Log(f"{chunk['id']}: {status}"))
                aux = chunk.get("aux") or {}
                digest = aux.get("Digest", digest)
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            raise RegistryError(_reason(exc)) from None
        if not digest:
            raise RegistryError("the engine reported no digest for the push")
        return digest

    # -- containers ---------------------------------------------------------------------

    def run_once(self, image: str, command: list[str], **kwargs: Any) -> str:
        """Run a command to completion in a fresh container; raise with its output if it fails."""
        with self.container(image, entrypoint=command[:1], command=command[1:], **kwargs) as box:
            status = box.wait(timeout=120)
            output = box.logs().decode(errors="replace")
        if status.get("StatusCode") != 0:
            raise ImagekitError(
                f"{image}: {' '.join(command)[:120]} failed: {output.strip()[-300:]}"
            )
        return output

    def network(self, name: str, **labels: str) -> Any:
        try:
            return self.client.networks.create(name, driver="bridge", internal=True, labels=labels)
        except docker.errors.APIError as exc:
            raise ImagekitError(f"cannot create network {name}: {_reason(exc)}") from None

    def remove_labelled(self, label: str) -> int:
        """Remove every container and network carrying `label` (key=value); count removed."""
        removed = 0
        for c in self.client.containers.list(all=True, filters={"label": label}):
            try:
                c.remove(force=True)
                removed += 1
            except docker.errors.NotFound:
                pass
        for n in self.client.networks.list(filters={"label": label}):
            try:
                n.remove()
            except docker.errors.NotFound:
                pass
        return removed

    def put_file(self, container: Any, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write one file into a container (directories are created)."""
        import tarfile as _tarfile

        directory, _, name = path.rpartition("/")
        buf = io.BytesIO()
        with _tarfile.open(fileobj=buf, mode="w") as tar:
            info = _tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        try:
            container.exec_run(["mkdir", "-p", directory or "/"])
            container.put_archive(directory or "/", buf.getvalue())
        except docker.errors.APIError as exc:
            raise ImagekitError(
                f"cannot write {path} into {container.name}: {_reason(exc)}"
            ) from None

    @contextmanager
    def container(self, image: str, **kwargs: Any) -> Iterator[Any]:
        """A running container that is removed on exit, whatever happens."""
        try:
            container = self.client.containers.run(image, detach=True, **kwargs)
        except docker.errors.ImageNotFound:
            raise ImageNotFoundError(f"image {image}: not found in the engine") from None
        except docker.errors.APIError as exc:
            raise ImagekitError(f"cannot start a container from {image}: {_reason(exc)}") from None
        try:
            yield container
        finally:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass


class ChunkStream(io.RawIOBase):
    """A read-only file over an iterator of byte chunks (docker-py's streamed responses)."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def split_ref(ref: str) -> tuple[str, str]:
    """'host:5000/a/b:tag' -> ('host:5000/a/b', 'tag')"""
    name, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return name, tag


def _chunks(stream: Iterator[Any]) -> Iterator[dict[str, Any]]:
    for chunk in stream:
        if isinstance(chunk, dict):
            yield chunk


def _step_failed(step: Step | None, chunk: dict[str, Any], tail: list[str]) -> BuildError:
    detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
    detail = detail.strip()
    where = (
        f"step {step.number}/{step.total} failed: {step.instruction[:200]}"
        if step
        else "build failed"
    )
    return BuildError(f"{where}\n{detail}", hint="last output:\n" + "\n".join(tail[-15:]))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "Connection refused" in text or "No such file or directory" in text:
        return "connection refused (is dockerd running?)"
    return text[:300]
