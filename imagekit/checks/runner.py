"""Run the compliance checks (suite/checks_*.py) through pytest + pytest-testinfra against
one long-lived container of the image, and collect a CheckReport. The container (and the
short-lived one for the mounted-key check) is removed on success, failure and Ctrl-C."""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagekit import workdirs
from imagekit.checks.backend import hostspec
from imagekit.checks.layerscan import LayerCache, scan_image
from imagekit.checks.probecache import ProbeCache, cached, probe_key
from imagekit.checks.report import CheckReport
from imagekit.datafiles import data_text
from imagekit.engine.client import KEEPALIVE, Container, Engine, Message, Reporter
from imagekit.errors import EngineError
from imagekit.image.layers import LayerFile
from imagekit.labels import CHECK_LABEL, LABEL_PREFIX
from imagekit.profiles import Profile
from imagekit.requirements import REGISTRY, ProbedRequirement
from imagekit.secrets import keygen, split_keygen_output, write_secret

OPS_LABEL = f"{LABEL_PREFIX}.deepspeed.installed-ops"  # the ops the build compiled in
# Check files in report order (pytest collects them alphabetically): the basics an
# MPIJob needs first, the layer walk last, so the layer export overlaps the rest.
SECTIONS = (
    "checks_mpi.py",
    "checks_ssh.py",
    "checks_versions.py",
    "checks_cuda.py",
    "checks_units.py",
    "checks_profile.py",
    "checks_layers.py",
)


@dataclass
class CheckContext:
    """Everything a check may need, gathered once. Checks never talk to Docker directly."""

    image: str
    image_id: str
    config: dict[str, Any]
    labels: dict[str, str]
    profile: Profile
    port: int
    expected: dict[str, str]
    expected_source: str
    engine: Engine
    run: str = ""  # this check run's ID, the value of CHECK_LABEL
    gpus: str | None = None  # --gpus: the runtime injects the driver's libraries
    architecture: str = ""  # the image config's (amd64, arm64): a container cannot see it
    container: Container | None = None
    initial: dict[str, Any] = field(default_factory=dict)  # facts read before any check ran
    _layers: list[LayerFile] | None = None
    _jobs: dict[str, _Background] = field(default_factory=dict)  # started by prefetch_*
    shared: dict[str, Any] = field(default_factory=dict)  # made once, used by several checks
    _workdir: Path | None = None
    layer_source: str = ""  # how the layers were read, for the report

    def history(self) -> list[dict[str, Any]]:
        """The image's history (each layer's CreatedBy: build args land there)."""
        return self.engine.history(self.image_id)

    def keepalive(self) -> dict[str, Any]:
        """Arguments for a container that idles until removed, labelled with this run."""
        return {"entrypoint": KEEPALIVE, "command": [], "labels": {CHECK_LABEL: self.run}}

    def declared(self, what: str) -> str | None:
        return self.labels.get(f"{LABEL_PREFIX}.ssh.{what}")

    def in_background(self, name: str, function: Callable[[], Any]) -> None:
        """Start `function` on a thread unless a job of that name exists: work a check will
        need that can overlap the checks before it (the prefetch_* methods, the `sshd`
        fixture's mounted-key login)."""
        if name not in self._jobs:
            self._jobs[name] = _Background(function)

    def _result(self, name: str, start: Callable[[], None]) -> Any:
        """The background job's answer (started now if no prefetch started it)."""
        if name not in self._jobs:
            start()
        return self._jobs[name].result()

    def prefetch_layers(self) -> None:
        """Export and walk the layers in the background while the container checks run:
        the export is the slowest part of a check (the engine re-tars every layer). A daemon
        thread, so an interrupted check exits at once instead of waiting for the export."""
        self.in_background("layers", self._walk_layers)

    def prefetch_torch(self) -> None:
        """What the image's torch says (the CUDA it was built with, the NCCL it loads, its
        libraries and DeepSpeed's prebuilt ops), gathered by one background exec while the
        ssh and MPI checks run: importing torch takes seconds, and three checks need it."""
        box, ops = self.container, self.labels.get(OPS_LABEL, "")
        # An image's answer never changes: a second check of it reads the answer kept by ID.
        key = probe_key(self.image_id, data_text("cuda_probe.py"), ops, self.gpus or "")
        self.in_background(
            "torch", lambda: cached(ProbeCache.default(), key, lambda: _torch_probe(box, ops))
        )

    def prefetch_versions(self) -> None:
        """Every version the R12 checks compare, read by one background exec of
        data/versions_probe.sh (one or two execs per version before)."""
        box = self.container
        self.in_background("versions", lambda: _versions_probe(box))

    def prefetch_units(self) -> None:
        """Every requirement unit's probe that applies here (each script and its arguments
        once, however many units read it), in the background from the start: the probes of
        A1 walk every native file and run the image's loader over each library, which took
        most of a warm check when they ran one after the other as their checks came up. An
        answer that is the image's alone is kept by image ID, as the torch probe's is."""
        for unit in REGISTRY:
            if issubclass(unit, ProbedRequirement) and not unit.skip_reason(
                self.profile, self.labels
            ):
                self._prefetch_unit(unit)

    def _prefetch_unit(self, unit: type[ProbedRequirement]) -> None:
        box, args = self.container, unit.probe_args(self.labels)
        script = data_text(unit.probe)
        key = probe_key(self.image_id, script, *args, self.gpus or "")
        cache = ProbeCache.default() if unit.image_facts else None
        self.in_background(
            _unit_job(unit, args),
            lambda: cached(cache, key, lambda: _unit_probe(box, script, args)),
        )

    def unit_facts(self, unit: type[ProbedRequirement]) -> dict[str, Any]:
        """What the unit's probe printed ({"error": ...} when it did not run to its end)."""
        return self._result(
            _unit_job(unit, unit.probe_args(self.labels)), lambda: self._prefetch_unit(unit)
        )

    def prefetch_mounted(self) -> None:
        """Start the second container, the keys mounted like a Secret, in the background
        while the first checks run (starting a container is most of the mounted-key login's
        time). Only where the login and remote-environment checks share one: a non-root
        profile's sshd fixture is itself that container (K1)."""
        if self.profile.non_root or "mounted" not in self.profile.user_keys:
            return
        host = testinfra_host(self.container)
        self.in_background("mounted", lambda: start_mounted_for_run(self, mounted_keys(self, host)))

    def answer(self, name: str, function: Callable[[], Any]) -> Any:
        """The named job's answer: started in the background earlier, else run now."""
        return self._result(name, lambda: self.in_background(name, function))

    def version_facts(self) -> dict[str, Any]:
        """{"has": {commands found}, "python": "3.11", "openmpi": ..., "dist:torch": ...}."""
        return self._result("versions", self.prefetch_versions)

    def torch_facts(self) -> dict[str, Any]:
        """The probe's JSON: {"torch": None} without torch, {"error": ...} if it failed."""
        return self._result("torch", self.prefetch_torch)

    def mounted_container(self, host: Any) -> Container:
        """The shared container with the keys mounted (prefetched, or started now)."""
        if "mounted" not in self._jobs:
            return start_mounted_for_run(self, mounted_keys(self, host))
        return self._jobs["mounted"].result()

    def _walk_layers(self) -> list[LayerFile]:
        """Every layer's files and findings (layerscan.scan_image): from the layer cache,
        in place, or from an export; IMAGEKIT_LAYERS=export forces the export."""
        mode = os.environ.get("IMAGEKIT_LAYERS", "auto")
        result = scan_image(self.engine, self.image_id, LayerCache.default(), mode)
        self.layer_source = result.source
        return result.files

    def layers(self) -> list[LayerFile]:
        """Every file of every layer (the security checks need it)."""
        if self._layers is None:
            self._layers = self._result("layers", self.prefetch_layers)
        return self._layers

    def close(self) -> None:
        if "mounted" in self._jobs:  # else its container could start after the cleanup
            self._jobs["mounted"].wait()
        if self._workdir is not None:
            workdirs.remove(self._workdir)

    def workdir(self) -> Path:
        if self._workdir is None:
            self._workdir = workdirs.make("check")
        return self._workdir


class _Background:
    """One function run in a daemon thread; `result()` waits for it and re-raises."""

    def __init__(self, function):
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(function,), daemon=True)
        self._thread.start()

    def _run(self, function) -> None:
        try:
            self._value = function()
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def _torch_probe(box: Container, ops: str) -> dict[str, Any]:
    script = data_text("cuda_probe.py")
    # At normal priority: with the other checks down to a dozen execs, the checks that wait
    # for this answer (it imports torch, seconds of CPU) are what a check waits for last.
    code, out = box.read(["python3", "-c", script, ops])
    try:
        return json.loads(out.strip().splitlines()[-1]) if code == 0 else {"error": out}
    except (ValueError, IndexError):
        return {"error": out}


def _versions_probe(box: Container) -> dict[str, Any]:
    _, out = box.read(["/bin/sh", "-c", data_text("versions_probe.sh")])
    return parse_probe_output(out)


def _unit_job(unit: type[ProbedRequirement], args: tuple[str, ...]) -> str:
    return "\0".join(("probe", unit.probe, *args))


def _unit_probe(box: Container, script: str, args: tuple[str, ...]) -> dict[str, Any]:
    """A unit probe's `KEY<TAB>VALUE` facts (strings only, so they can be kept as JSON)."""
    code, out = box.read(["/bin/sh", "-c", script, "sh", *args])
    facts = parse_probe_output(out if code == 0 else "")
    if "end" not in facts:  # what the image printed instead, as no terminal would read it
        return {"error": f"exit {code}: {printable(out[-300:])}"}
    return {k: v for k, v in facts.items() if isinstance(v, str)}


def printable(text: str) -> str:
    """Text an image printed, each character that is not printable (an escape sequence meant
    for the terminal that shows a report, a newline) made `?`."""
    return "".join(c if c.isprintable() else "?" for c in text)


def parse_probe_output(output: str) -> dict[str, Any]:
    """A probe's `KEY<TAB>VALUE` lines (the first of each key wins); `has` lines gather into
    one set, `key` lines into the list `keys`. The image prints them, so it may print
    anything: a character that is not printable (an escape sequence meant for the terminal
    that shows a report) becomes `?` before any check reads it."""
    facts: dict[str, Any] = {"has": set(), "keys": []}
    for line in output.splitlines():
        key, tab, value = line.partition("\t")
        value = printable(value)
        if not tab or not value.strip():
            continue
        if key == "has":
            facts["has"].add(value.strip())
        elif key == "key":
            facts["keys"].append(value.strip())
        else:
            facts.setdefault(key, value.strip())
    return facts


# The versions R12 compares, and where they came from ("recipe PATH", "image labels").
Expected = tuple[dict[str, str], str]


def expected_versions(labels: dict[str, str], declared: Expected | None) -> Expected:
    """What the caller's recipe says (the CLI reads it: the recipe machinery is a stage below
    the checks, loaded only when a recipe is named), else what the image's labels declare."""
    if declared is not None:
        return declared
    prefix = f"{LABEL_PREFIX}.version."
    found = {k.removeprefix(prefix): v for k, v in labels.items() if k.startswith(prefix)}
    return found, ("image labels" if found else "")


def run_checks(
    image: str,
    profile: Profile,
    report: Reporter,
    expected: Expected | None = None,
    port: int | None = None,
    gpus: str | None = None,
) -> CheckReport:
    # pytest and the plugin load on a thread while the engine starts the check container.
    suite = _Background(lambda: importlib.import_module("imagekit.checks.collector"))
    engine = Engine.connect()
    info = engine.inspect_image(image)
    labels = info["Config"].get("Labels") or {}
    expected, source = expected_versions(labels, expected)
    ctx = CheckContext(
        image=image,
        image_id=info["Id"],
        config=info["Config"],
        labels=labels,
        profile=profile,
        port=port or profile.port,
        expected=expected,
        expected_source=source,
        engine=engine,
        run=f"imagekit-check-{uuid.uuid4().hex[:8]}",
        gpus=gpus,
        architecture=str(info.get("Architecture") or ""),
    )
    started = time.monotonic()
    report(Message(f"starting a container from {image}"))
    try:
        box = engine.start_container(image, user="0", gpus=gpus, **ctx.keepalive())
        ctx.container = box
        ctx.prefetch_torch()  # the longest read (importing torch): started first
        ctx.prefetch_versions()
        ctx.prefetch_units()
        ctx.initial = _initial_facts(box, profile.user, profile.key_dir)
        ctx.prefetch_mounted()  # its keys belong to the user the initial facts name
        results = suite.result().run_suite(ctx, report)
        _still_there(box)  # else the results blame the image for the engine's failure
    finally:
        ctx.close()
        # Every container of the run (the check container, the mounted-key one, and one whose
        # creation a signal cut short, which has no handle) is found by its label and
        # removed, all at once.
        engine.clean_up_labelled(f"{CHECK_LABEL}={ctx.run}", report)
    return CheckReport(
        image=image,
        image_id=info["Id"],
        profile=profile.name,
        expected_source=source,
        results=results,
        seconds=time.monotonic() - started,
    )


def _still_there(box: Container) -> None:
    """Checks fail when their commands cannot run; if that is because the engine or the
    container went away mid-run, the verdict is not the image's: raise instead of reporting."""
    status = box.status()  # raises EngineUnavailableError when the engine is gone
    if status != "running":
        raise EngineError(
            f"the check container {box.name} is {status}, not running: the check could not "
            "finish, so no verdict is given"
        )


# The commands data/initial_probe.sh looks up on PATH for every check run (one exec for all).
PROBED_COMMANDS = ("python3", "mpirun", "ssh", "orted", "prted", "ldd")


def _initial_facts(box: Container, user: str, key_dir: str) -> dict[str, Any]:
    """State that later checks (which start sshd) would change, read first; the profile's
    user's IDs (K1: a non-root profile's keys are mounted owned by it); which commands the
    checks need are on PATH, where sshd and bash are, the keys baked into the profile's key
    directory: data/initial_probe.sh, one exec."""
    script = data_text("initial_probe.sh")
    argv = ["/bin/sh", "-c", script, "sh", user, key_dir, *PROBED_COMMANDS]
    code, out = box.read(argv)
    facts = parse_probe_output(out if code == 0 else "")
    facts.setdefault("run_sshd", "missing")
    if "end" not in facts:  # the probe did not run: ask each fact of the image as it comes
        del facts["has"], facts["keys"]
    return facts


def mounted_keys(ctx: CheckContext, host: Any) -> Path:
    """A fresh key pair laid out like a Kubernetes Secret, made by the image's own ssh-keygen
    in the running check container (no extra container, nothing needed on this machine).
    Under a non-root profile the files belong to its user, as the operator arranges."""
    secret = ctx.workdir() / "secret"
    if not secret.exists():
        profile = ctx.profile
        output = host.check_output(keygen(profile.key_type))
        private, public = split_keygen_output(ctx.image, output)
        grouped = profile.non_root and profile.secret_files == "group-readable"
        mode = 0o640 if grouped else 0o600  # K2: the volume's defaultMode, for fsGroup
        owner = None
        if profile.non_root and "uid" in ctx.initial:
            owner = (0 if grouped else int(ctx.initial["uid"]), int(ctx.initial["gid"]))
        write_secret(secret, private, public, False, mode, mode, owner)
    return secret


def start_mounted(ctx: CheckContext, secret: Path):
    """A second container with the key pair mounted read-only where the profile's operator
    mounts its Secret (/root/.ssh, or e.g. /home/mpiuser/.ssh)."""
    return ctx.engine.container(ctx.image_id, **_mounted_options(ctx, secret))


def start_mounted_for_run(ctx: CheckContext, secret: Path) -> Container:
    """`start_mounted`, kept until the run ends (its label cleanup removes it), for checks
    that share one such container."""
    return ctx.engine.start_container(ctx.image_id, **_mounted_options(ctx, secret))


def _mounted_options(ctx: CheckContext, secret: Path) -> dict[str, Any]:
    """As an operator's pod: the Secret at the key directory."""
    return {"user": "0", "volumes": {str(secret): ctx.profile.key_dir}, **ctx.keepalive()}


def testinfra_host(container: Container, user: str = "root") -> Any:
    import testinfra

    return testinfra.get_host(hostspec(container.id, user))
