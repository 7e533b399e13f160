"""The only module that talks to Docker (docker-py, Engine API). Everything above it sees
plain data and imagekit errors, never docker exceptions.

Builds go through the legacy builder (docker-py has no BuildKit), with `forcerm` so a
failed step leaves no container behind, and no tag: tags are applied only after success.
"""

from __future__ import annotations

import hashlib
import io
import ipaddress
import json
import os
import re
import tarfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
import requests.exceptions
import urllib3.exceptions

from imagekit import signals
from imagekit.engine import journal
from imagekit.errors import (
    BuildError,
    EngineError,
    EngineUnavailableError,
    ImagekitError,
    ImageNotFoundError,
    ImageUnusableError,
    RegistryError,
    UsageError,
)
from imagekit.events import Event, Log, Message, Reporter, Step  # noqa: F401 - re-exported
from imagekit.grammar import human_size, parse_ref

# A container that idles until stopped, whatever the image's entrypoint (checks, launchers).
KEEPALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 1; done"]
STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
INTERMEDIATE = re.compile(r"^ ---> (?:Running in )?([0-9a-f]{12,64})$")
RUNNING_IN = re.compile(r"^ ---> Running in ([0-9a-f]{12,64})$")
# The engine now and then loses a short exec's whole output (moby#27289): how often to ask again.
LOST_OUTPUT_TRIES = 3


def gpu_requests(gpus: str | None) -> list[docker.types.DeviceRequest] | None:
    """`--gpus all` or `--gpus N` as the Engine API's DeviceRequests (what `docker run --gpus`
    sends): the NVIDIA container runtime then mounts the GPUs and the driver's libraries."""
    if gpus is None:
        return None
    count = -1 if gpus == "all" else int(gpus)
    return [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])]


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

    def close(self) -> None:
        """Drop pooled connections (reopened on the next call)."""
        self.api.close()

    # -- images -------------------------------------------------------------------------

    def image_exists(self, ref: str) -> bool:
        try:
            self.inspect_image(ref)
        except ImageNotFoundError:
            return False
        return True

    def inspect_image(self, ref: str) -> dict[str, Any]:
        try:
            with _engine_errors(f"cannot inspect image {ref}", image=ref):
                return self.api.inspect_image(ref)
        except _Gone:
            raise ImageNotFoundError(f"image {ref}: not found in the engine") from None

    def load_archive(
        self, archive: Iterator[bytes], expected_id: str, what: str = "the normalized image"
    ) -> None:
        """`docker load` a docker-archive streamed as chunks; the engine must end up with
        `expected_id`."""
        try:
            for chunk in self.api.load_image(archive):
                if isinstance(chunk, dict) and "error" in chunk:
                    raise BuildError(f"loading {what} failed: {chunk['error']}")
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            raise BuildError(f"loading {what} failed: {_reason(exc)}") from None
        if not self.image_exists(expected_id):
            raise BuildError(f"the engine did not keep {what} {expected_id[:19]}")

    def tag(self, image_id: str, ref: str) -> None:
        repository, tag = split_ref(ref)
        with _engine_errors(f"cannot tag {ref}"):
            self.api.tag(image_id, repository, tag, force=True)

    def remove_image(self, ref: str) -> None:
        try:
            with _engine_errors(f"cannot remove image {ref}", image=ref):
                self.api.remove_image(ref, force=True)
        except (_Gone, ImageNotFoundError):
            pass

    def remove_image_tag(self, ref: str) -> None:
        """Untag `ref` (the image stays while other tags or containers use it); quiet when
        the tag or the engine is gone, since this runs on the way out of failures too."""
        try:
            tags = self.inspect_image(ref).get("RepoTags") or []
            if [t for t in tags if t != ref]:  # never the last name of an image
                with _engine_errors(f"cannot untag {ref}", image=ref):
                    self.api.remove_image(ref, force=False, noprune=True)
        except ImagekitError:
            pass

    def history(self, ref: str) -> list[dict[str, Any]]:
        with _engine_errors(f"cannot read the history of {ref}", image=ref):
            return self.api.history(ref)

    @contextmanager
    def saved_image(self, ref: str) -> Iterator[io.BufferedReader]:
        """`docker save` as a readable stream, never written to disk."""
        self.inspect_image(ref)
        with _engine_errors(f"cannot export {ref}", image=ref):
            chunks = self.api.get_image(ref, chunk_size=1 << 20)
        try:
            yield io.BufferedReader(ChunkStream(chunks), buffer_size=1 << 20)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    def layer_dirs(self, ref: str) -> list[Path] | None:
        """The image's layer directories, bottom first, where this process can read them: a
        local engine on overlay2 (the default) and root here. None otherwise; callers then
        export the image instead (`saved_image`)."""
        if not engine_address().startswith("unix://"):
            return None  # an engine elsewhere keeps its files elsewhere
        info = self.inspect_image(ref)
        driver = info.get("GraphDriver") or {}
        data = driver.get("Data") or {}
        if driver.get("Name") != "overlay2" or not data.get("UpperDir"):
            return None
        lower = [d for d in (data.get("LowerDir") or "").split(":") if d]
        dirs = [Path(d) for d in [*reversed(lower), data["UpperDir"]]]
        if len(dirs) != len((info.get("RootFS") or {}).get("Layers") or []):
            return None
        if not all(os.access(d, os.R_OK | os.X_OK) and d.is_dir() for d in dirs):
            return None
        return dirs

    def image_config(self, image_id: str) -> dict[str, Any] | None:
        """The image's config document (history, diff IDs), read from the engine's own image
        store where this process can read it (as `layer_dirs`), and only if its sha256 is the
        image ID, as the ID is defined: a file changed or misplaced is never trusted. None
        otherwise; callers then export the image."""
        if not engine_address().startswith("unix://"):
            return None
        try:
            with _engine_errors("cannot read the engine's settings"):
                info = self.api.info()
        except EngineError:
            return None
        algorithm, _, hexdigest = image_id.partition(":")
        root, driver = info.get("DockerRootDir"), info.get("Driver")
        if algorithm != "sha256" or not (
            root and driver and re.fullmatch(r"[0-9a-f]{64}", hexdigest)
        ):
            return None
        path = Path(root, "image", driver, "imagedb", "content", "sha256", hexdigest)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(data).hexdigest() != hexdigest:
            return None
        return json.loads(data)

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
        memory: int | None = None,
    ) -> BuildOutcome:
        """Build without tagging. Raises BuildError naming the failed step. Every RUN step
        runs under `memory` bytes (no swap on top), by default BUILD_MEMORY_SHARE of the
        engine host's memory: one step (a compiler at -O2 on a generated file) must not be
        able to take the build host down."""
        memory = memory or self.default_build_memory()
        tail: list[str] = []
        current: Step | None = None
        image_id: str | None = None
        last_layer: str | None = None
        step_container: str | None = None  # the container of the RUN step under way
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
            container_limits={"memory": memory, "memswap": memory} if memory else None,
        )
        try:
            for chunk in _chunks(stream):
                if "error" in chunk:
                    # The engine ends its answer after an error: read it to its end, so the
                    # connection goes back to the pool instead of staying open (a leaked socket).
                    _finish(stream)
                    failure = _step_failed(current, chunk, tail)
                    if _killed(chunk) and not self._answers_after(1.0):
                        # A stopping engine kills the step's container (137) and may say so
                        # before it hangs up: that is the engine going away, not the build.
                        if step_container is not None:  # if it is left behind: clean
                            journal.record(
                                step_container, f"build step: {current.instruction[:200]}"
                            )
                        raise EngineUnavailableError(
                            f"build failed: the Docker engine at {engine_address()} went away "
                            "(it killed the running step); no tag was created or moved",
                            hint="once the engine is back, `imagekit clean` removes leftovers",
                        )
                    if _killed(chunk) and memory:
                        raise _over_memory(current, memory, tail)
                    raise failure
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
                        running = RUNNING_IN.match(line)
                        step_container = running[1] if running else None
                    tail = (tail + [line])[-40:]
                    report(Log(line))
                    done = re.match(r"^Successfully built ([0-9a-f]+)$", line)
                    if done and image_id is None:
                        image_id = done[1]
        except KeyboardInterrupt:
            self._stop_build_containers(last_layer)
            raise
        except (docker.errors.APIError, *_TRANSPORT_ERRORS) as exc:
            if _connection_lost(exc):
                if step_container is not None:  # left behind in the engine: clean removes it
                    journal.record(step_container, f"build step: {current.instruction[:200]}")
                raise EngineUnavailableError(
                    f"build failed: the Docker engine at {engine_address()} went away "
                    f"({_reason(exc)}); no tag was created or moved",
                    hint="once the engine is back, `imagekit clean` removes the step's container",
                ) from None
            raise BuildError(f"build failed: {_reason(exc)}") from None
        if image_id is None:
            raise BuildError("build ended without an image", hint="\n".join(tail[-15:]))
        return BuildOutcome(image_id=image_id, steps=current.total if current else 0, log_tail=tail)

    def default_build_memory(self) -> int | None:
        """BUILD_MEMORY_SHARE of the memory of the engine's host (None when it does not say)."""
        try:
            with _engine_errors("cannot read the engine's settings"):
                total = self.api.info().get("MemTotal")
        except EngineError:
            return None
        return int(total * BUILD_MEMORY_SHARE) if isinstance(total, int) and total > 0 else None

    def _answers_after(self, seconds: float) -> bool:
        """Whether the engine still answers a moment later (a stopping one does not)."""
        time.sleep(seconds)
        try:
            self.api.ping()
        except Exception:  # noqa: BLE001 - any failure to answer means it is going away
            return False
        return True

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
    # Callers get Container and Network handles that speak plain data (exit codes, text)
    # and raise imagekit errors; no docker-py object leaves this module.

    def create_container(
        self,
        image: str,
        *,
        entrypoint: list[str] | None = None,
        command: list[str] | None = None,
        labels: dict[str, str] | None = None,
        name: str | None = None,
        hostname: str | None = None,
        network: str | None = None,
        aliases: list[str] | None = None,
        volumes: dict[str, str] | None = None,  # host path -> read-only mount point
        environment: dict[str, str] | None = None,
        user: str | None = None,
        shm_size: int | None = None,  # bytes
        gpus: str | None = None,
    ) -> Container:
        """A created (not started) container. `aliases` are extra DNS names on `network`;
        `gpus`: all or a count, as `docker run --gpus` (needs the NVIDIA container runtime)."""
        networking = None
        if network is not None:
            endpoint = self.api.create_endpoint_config(aliases=aliases or None)
            networking = self.api.create_networking_config({network: endpoint})
        binds = {src: {"bind": dest, "mode": "ro"} for src, dest in (volumes or {}).items()}
        with _engine_errors(f"cannot create a container from {image}", image=image):
            host_config = self.api.create_host_config(
                binds=binds or None,
                shm_size=shm_size,
                network_mode=network,
                device_requests=gpu_requests(gpus),
            )
            with signals.deferred():  # an ID we hold is one cleanup can remove
                created = self.api.create_container(
                    image,
                    command=command,
                    entrypoint=entrypoint,
                    name=name,
                    hostname=hostname,
                    labels=labels or {},
                    environment=environment,
                    user=user,
                    host_config=host_config,
                    networking_config=networking,
                )
        return Container(self, created["Id"], name or created["Id"][:12], image=image)

    def start_container(self, image: str, **kwargs: Any) -> Container:
        box = self.create_container(image, **kwargs)
        try:
            box.start()
        except ImagekitError:
            box.remove()
            raise
        return box

    @contextmanager
    def container(self, image: str, **kwargs: Any) -> Iterator[Container]:
        """A running container that is removed on exit, whatever happens."""
        box = self.start_container(image, **kwargs)
        try:
            yield box
        except BaseException:
            box.remove_quietly()  # the error that got us here matters, not this one
            raise
        box.remove()

    def run_once(self, image: str, command: list[str], **kwargs: Any) -> str:
        """Run a command to completion in a fresh container; raise with its output if it fails."""
        with self.container(image, entrypoint=command[:1], command=command[1:], **kwargs) as box:
            status = box.wait(timeout=120)
            output = box.logs()
        if status != 0:
            cannot = _cannot_exec(output.strip()[-300:])
            if cannot is not None:
                raise ImageUnusableError(image, cannot)
            shown = " ".join(" ".join(command).split())[:120]  # a script: one line of it
            raise ImagekitError(f"{image}: {shown} failed: {output.strip()[-300:]}")
        return output

    def bridge_gateway(self) -> tuple[str, str]:
        """The default bridge's gateway address and subnet: where build containers reach
        this machine (docker0), and the addresses they come from."""
        with _engine_errors("cannot inspect the bridge network"):
            config = (self.api.inspect_network("bridge").get("IPAM") or {}).get("Config") or []
        for entry in config:
            subnet = entry.get("Subnet", "")
            if "." not in subnet:
                continue  # IPv4 only: the builder's containers get one
            gateway = entry.get("Gateway") or str(next(ipaddress.ip_network(subnet).hosts()))
            return gateway, subnet
        raise EngineError("the engine's default bridge network has no IPv4 subnet")

    def create_network(self, name: str, labels: dict[str, str]) -> Network:
        """A private bridge network (no route out): containers reach each other by name."""
        with _engine_errors(f"cannot create network {name}"), signals.deferred():
            self.api.create_network(name, driver="bridge", internal=True, labels=labels)
        return Network(self, name)

    def labelled(self, label: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Containers and networks carrying `label` (`key` or `key=value`), as plain dicts."""
        with _engine_errors("cannot list containers"):
            containers = self.api.containers(all=True, filters={"label": label})
            networks = self.api.networks(filters={"label": label})
        return (
            [
                {"id": c["Id"], "name": c["Names"][0].lstrip("/"), "labels": c["Labels"]}
                for c in containers
            ],
            [{"id": n["Id"], "name": n["Name"], "labels": n.get("Labels") or {}} for n in networks],
        )

    def remove_container(self, container_id: str) -> bool:
        """Remove one container by ID; False when it no longer exists."""
        return _remove_container(self.api, container_id, container_id[:12])

    def container_exists(self, container_id: str) -> bool:
        try:
            with _engine_errors(f"cannot inspect container {container_id[:12]}"):
                self.api.inspect_container(container_id)
        except _Gone:
            return False
        return True

    def clean_up_labelled(self, label: str, report: Reporter) -> bool:
        """Cleanup at the end of a run, which may be on the way out of a failure: never
        raises (the run's own result or error is what the user needs), but says what is left
        behind and how to remove it; False then."""
        try:
            self.remove_labelled(label)
        except EngineError as exc:
            report(
                Message(
                    f"warning: containers labelled {label} were not removed ({exc}); "
                    "`imagekit clean` removes them"
                )
            )
            return False
        return True

    def remove_labelled(self, label: str, rounds: int = 5) -> int:
        """Remove every container and network carrying `label` (key=value); count the
        containers removed. Each round tries everything it lists (one refusal does not stop
        the rest) and lists again: a container still starting or an endpoint still attached
        can refuse once. Raises the last refusal if something is left after `rounds`."""
        removed = 0
        for attempt in range(rounds):
            containers, networks = self.labelled(label)
            if not containers and not networks:
                return removed
            refusals = self._remove_containers(containers)
            removed += len(containers) - len(refusals)
            for n in networks:  # after the containers: an attached network cannot go
                try:
                    Network(self, n["name"]).remove()
                except EngineError as exc:
                    refusals.append(exc)
            if refusals and attempt == rounds - 1:
                raise refusals[-1]
            if refusals:
                time.sleep(0.5)
        return removed

    def _remove_containers(self, containers: list[dict[str, str]]) -> list[EngineError]:
        """Remove them all at once (each removal is a kill and a wait for the engine: a check's
        or a smoke run's containers go in the time of one); the refusals, if any."""

        def remove(c: dict[str, str]) -> EngineError | None:
            try:
                Container(self, c["id"], c["name"]).remove()
            except EngineError as exc:
                return exc
            return None

        if len(containers) < 2:
            return [e for e in map(remove, containers) if e is not None]
        with ThreadPoolExecutor(max_workers=min(len(containers), 8)) as pool:
            return [e for e in pool.map(remove, containers) if e is not None]


class Container:
    """A handle on one container: exec, logs, files, removal. Output is text."""

    def __init__(self, engine: Engine, container_id: str, name: str, image: str = ""):
        self._api = engine.api
        self.id = container_id
        self.name = name
        self.image = image

    def start(self) -> None:
        with _engine_errors(f"cannot start container {self.name}"):
            try:
                self._api.start(self.id)
            except docker.errors.APIError as exc:
                cannot = _cannot_exec(str(exc))
                if cannot is None:
                    raise
                raise ImageUnusableError(self.image, cannot) from None

    def exec(self, argv: list[str], *, user: str | None = None) -> tuple[int, str]:
        """Run `argv` inside; (exit code, stdout and stderr together)."""
        with _engine_errors(f"exec in {self.name} failed"), self._while_running():
            exec_id = self._api.exec_create(self.id, argv, user=user or "")["Id"]
            output = self._api.exec_start(exec_id)
            code = self._api.exec_inspect(exec_id)["ExitCode"]
        return code, output.decode(errors="replace")

    @contextmanager
    def _while_running(self) -> Iterator[None]:
        """An exec into a container that stopped by itself says why (its last words), not
        "409 Conflict" or "500 ... is not running": the engine answers either, depending on
        whether the container stopped before the exec was created or before it started."""
        try:
            yield
        except docker.errors.APIError as exc:
            if "is not running" not in str(exc):
                raise
            last = (self.logs().strip().splitlines() or ["(no output)"])[-1][:300]
            cannot = _cannot_exec(last)
            if cannot is not None:
                raise ImageUnusableError(self.image, cannot) from None
            raise EngineError(f"container {self.name} of {self.image} stopped: {last}") from None

    def read(self, argv: list[str], *, user: str | None = None) -> tuple[int, str]:
        """`exec` for commands that print something whenever they succeed. The engine now and
        then loses all output of a short exec while reporting its exit code (moby#27289,
        docker-py#2042); a success with no output is that loss, so ask again (up to 3 times)
        rather than read "nothing" as the image's answer."""
        return _until_heard(lambda: self.exec(argv, user=user))

    def read_split(self, argv: list[str], *, user: str | None = None) -> tuple[int, bytes, bytes]:
        """`exec_split` for commands that print something whenever they succeed (see read)."""
        return _until_heard(lambda: self.exec_split(argv, user=user))

    def exec_split(self, argv: list[str], *, user: str | None = None) -> tuple[int, bytes, bytes]:
        """Run `argv` inside; (exit code, stdout, stderr), as bytes and kept apart."""
        with _engine_errors(f"exec in {self.name} failed"), self._while_running():
            exec_id = self._api.exec_create(self.id, argv, user=user or "")["Id"]
            stdout, stderr = self._api.exec_start(exec_id, demux=True)
            code = self._api.exec_inspect(exec_id)["ExitCode"]
        return code, stdout or b"", stderr or b""

    def exec_stream(self, argv: list[str], on_line: Callable[[str], None]) -> int:
        """Run `argv` inside, handing each output line to `on_line` as it comes; exit code."""
        buffer = ""
        with _engine_errors(f"exec in {self.name} failed"), self._while_running():
            exec_id = self._api.exec_create(self.id, argv)["Id"]
            for chunk in self._api.exec_start(exec_id, stream=True):
                buffer += chunk.decode(errors="replace")
                *lines, buffer = buffer.split("\n")
                for line in lines:
                    on_line(line)
            if buffer:
                on_line(buffer)
            return self._api.exec_inspect(exec_id)["ExitCode"]

    def logs(self) -> str:
        with _engine_errors(f"cannot read the logs of {self.name}"):
            return self._api.logs(self.id).decode(errors="replace")

    def status(self) -> str:
        """created, running, exited, dead, ... ('removed' once it is gone)."""
        try:
            with _engine_errors(f"cannot inspect {self.name}"):
                return self._api.inspect_container(self.id)["State"]["Status"]
        except _Gone:
            return "removed"

    def exited(self) -> bool:
        return self.status() in ("exited", "dead", "removed")

    def wait(self, timeout: int) -> int:
        with _engine_errors(f"waiting for {self.name} failed"):
            return int(self._api.wait(self.id, timeout=timeout).get("StatusCode", -1))

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write one file into the container (directories are created)."""
        directory, _, name = path.rpartition("/")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        self.exec(["mkdir", "-p", directory or "/"], user="0")  # as kubelet would, any USER
        with _engine_errors(f"cannot write {path} into {self.name}"):
            self._api.put_archive(self.id, directory or "/", buf.getvalue())

    def remove(self) -> None:
        """Remove it, running or not; gone already is fine."""
        _remove_container(self._api, self.id, self.name)

    def remove_quietly(self) -> None:
        try:
            self.remove()
        except EngineError:
            pass


class Network:
    def __init__(self, engine: Engine, name: str):
        self._api = engine.api
        self.name = name

    def remove(self) -> None:
        try:
            with _engine_errors(f"cannot remove network {self.name}"):
                self._api.remove_network(self.name)
        except _Gone:
            pass


class _Gone(ImagekitError):
    """The object asked for does not exist (any more)."""


def _remove_container(api: docker.APIClient, container_id: str, name: str) -> bool:
    """Remove one container, running or not; False when it was gone already."""
    try:
        with _engine_errors(f"cannot remove container {name}"):
            api.remove_container(container_id, force=True, v=True)
    except _Gone:
        return False
    except EngineError as exc:
        if _STUCK_ROOTFS in exc.message:
            raise EngineError(exc.message, hint=_STUCK_ROOTFS_HINT) from None
        raise
    return True


# An engine stopped while removing a container can leave that container's filesystem mounted;
# every later removal is then refused with "device or resource busy", and no retry helps.
_STUCK_ROOTFS = "failed to remove root filesystem"
_STUCK_ROOTFS_HINT = (
    "the engine stopped while removing it and left its files mounted (moby/moby#32461); it can "
    "go once that mount is gone (at the latest after a reboot): then `imagekit clean` again"
)


@contextmanager
def _engine_errors(what: str, image: str | None = None) -> Iterator[None]:
    """docker-py's exceptions -> imagekit errors: one line, the engine's exit code."""
    try:
        yield
    except docker.errors.ImageNotFound:
        raise ImageNotFoundError(f"image {image}: not found in the engine") from None
    except docker.errors.NotFound as exc:
        raise _Gone(f"{what}: {_reason(exc)}") from None
    except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as exc:
        if image and "invalid reference format" in str(exc):  # the engine's 400: bad input
            raise UsageError(
                f"image {image!r}: not a valid image reference ([host/]name[:tag] or an ID)"
            ) from None
        if _connection_lost(exc):
            raise EngineUnavailableError(
                f"{what}: the Docker engine at {engine_address()} went away ({_reason(exc)})",
                hint="once the engine is back, `imagekit clean` removes what this run left",
            ) from None
        raise EngineError(f"{what}: {_reason(exc)}") from None


# What a dropped connection to the engine raises, depending on where in a response it drops.
_TRANSPORT_ERRORS = (
    requests.exceptions.RequestException,
    urllib3.exceptions.HTTPError,
    ConnectionError,
)


def _connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, _TRANSPORT_ERRORS) and not isinstance(exc, requests.exceptions.HTTPError):
        return True
    text = str(exc)
    return any(
        marker in text
        for marker in ("Connection refused", "No such file or directory", "Connection aborted")
    )


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
                with _engine_errors("reading the image export failed"):
                    self._pending = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def _until_heard(ask: Callable[[], tuple]) -> tuple:
    """`ask()` -> (exit code, output...), asked again while it succeeds with no output at all
    (at most LOST_OUTPUT_TRIES times): a lasting silence is the command's real answer."""
    for _ in range(LOST_OUTPUT_TRIES):
        answer = ask()
        if answer[0] != 0 or any(part.strip() for part in answer[1:]):
            break
    return answer


def split_ref(ref: str) -> tuple[str, str]:
    """'host:5000/a/b:tag' -> ('host:5000/a/b', 'tag'); no tag: 'latest' (grammar.parse_ref)."""
    try:
        parsed = parse_ref(ref)
    except ValueError:
        return ref, "latest"
    return parsed.name, parsed.tag or "latest"


# The runtime's words when it cannot execute a container's first program: at start
# ('exec: "/bin/sh": stat /bin/sh: no such file or directory'), or, for a binary it started but
# could not execute, the container's last log line ('exec /bin/sh: exec format error').
_CANNOT_EXEC = re.compile(
    r'exec:? "?(?P<program>[^":]+)"?: (?:(?P<missing>stat \S+: no such file or directory'
    r"|executable file not found in \$PATH)|(?P<format>exec format error))"
)


def _cannot_exec(text: str) -> str | None:
    """What is wrong with an image that cannot run anything (no such program in it, or one
    for another CPU), from the runtime's long OCI message; None for any other failure."""
    found = _CANNOT_EXEC.search(text)
    if found is None:
        return None
    program = found["program"]
    if found["format"]:
        return (
            f"cannot run {program}: exec format error (an image for another CPU "
            "architecture? docker image inspect IMAGE --format '{{.Architecture}}'; such an "
            "image runs under qemu once its handler is registered: ./dev setup)"
        )
    return (
        f"has no {program} (distroless or scratch?); an MPIJob image needs a POSIX shell: "
        "ssh runs mpirun's remote commands through it, and so do imagekit's probes"
    )


def _chunks(stream: Iterator[Any]) -> Iterator[dict[str, Any]]:
    for chunk in stream:
        if isinstance(chunk, dict):
            yield chunk


def _finish(stream: Iterator[Any]) -> None:
    """Read the rest of a streamed answer; a connection that broke meanwhile is done anyway."""
    try:
        for _ in stream:
            pass
    except (docker.errors.APIError, *_TRANSPORT_ERRORS):
        pass


_RUN_FAILED = re.compile(r"^The command '.*' returned a non-zero code: (\d+)$", re.S)


def _killed(chunk: dict[str, Any]) -> bool:
    """The step's command died by SIGKILL (exit 137): an OOM kill, or an engine stopping."""
    detail = chunk.get("errorDetail", {}).get("message") or chunk.get("error") or ""
    return bool(re.search(r"returned a non-zero code: 137\b", detail))


# A build step may use this share of the engine host's memory unless `--memory` says otherwise:
# the rest keeps the engine, the shell and imagekit itself alive when a compiler runs away
# (mpi4py's generated MPI.c at -O2 took 23 GB of 24 here).
BUILD_MEMORY_SHARE = 0.75


def _over_memory(step: Step | None, memory: int, tail: list[str]) -> BuildError:
    where = f"step {step.number}/{step.total}" if step else "a build step"
    what = f": {step.instruction[:160]}" if step else ""
    return BuildError(
        f"{where} was killed (exit 137), most likely for going over the build's memory limit "
        f"of {human_size(memory)}{what}",
        hint="raise the limit with --memory SIZE (default: 3/4 of the engine host's memory), "
        "or make the step need less (MAX_JOBS=1 for compiles)\nlast output:\n"
        + "\n".join(tail[-15:]),
    )


def _step_failed(step: Step | None, chunk: dict[str, Any], tail: list[str]) -> BuildError:
    detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
    # The engine repeats the whole RUN line (hundreds of pinned packages); the step line
    # above already names it.
    detail = _RUN_FAILED.sub(r"the command exited \1", detail.strip())
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
