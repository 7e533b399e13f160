"""Run the compliance checks (suite/checks_*.py) through pytest + pytest-testinfra against
one long-lived container of the image, and collect a CheckReport. The container (and the
short-lived one for the mounted-key check) is removed on success, failure and Ctrl-C."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import testinfra

from imagekit.checks.profiles import Profile
from imagekit.checks.report import CheckReport, CheckResult
from imagekit.engine import KEEPALIVE, Engine, Message, Reporter
from imagekit.errors import ImagekitError
from imagekit.layers import LayerFile, walk
from imagekit.plan import LABEL_PREFIX, make_plan
from imagekit.recipe import load_recipe
from imagekit.secrets import KEYGEN, split_keygen_output, write_secret

SUITE = Path(__file__).parent / "suite"


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
    container_id: str = ""
    initial: dict[str, str] = field(default_factory=dict)  # facts read before any check ran
    _layers: list[LayerFile] | None = None
    _workdir: Path | None = None

    def declared(self, what: str) -> str | None:
        return self.labels.get(f"{LABEL_PREFIX}.ssh.{what}")

    def prefetch_layers(self) -> None:
        """Export and walk the layers in the background while the container checks run:
        the export is the slowest part of a check (the engine re-tars every layer)."""
        self._prefetch = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._layers_future = self._prefetch.submit(self._walk_layers)

    def _walk_layers(self) -> list[LayerFile]:
        with self.engine.saved_image(self.image_id) as stream:
            return walk(stream, inspect=_worth_reading)

    def layers(self) -> list[LayerFile]:
        """Every file of every layer (the security checks need it)."""
        if self._layers is None:
            future = getattr(self, "_layers_future", None)
            self._layers = future.result() if future is not None else self._walk_layers()
        return self._layers

    def close(self) -> None:
        if getattr(self, "_prefetch", None) is not None:
            self._prefetch.shutdown(wait=True, cancel_futures=True)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def workdir(self) -> Path:
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="imagekit-check-"))
        return self._workdir


def _worth_reading(path: str, size: int) -> bool:
    """Small files where keys, certificates or credentials hide; their heads are read."""
    name = path.rsplit("/", 1)[-1]
    if size > 64 * 1024 or name.endswith((".pub", ".py", ".pyc", ".so", ".h", ".txt", ".html")):
        return False
    return (
        "/.ssh/" in f"/{path}"
        or path.startswith(("etc/ssh/", "tmp/", "root/", "home/", "etc/pip", "var/tmp/"))
        or name.endswith((".pem", ".crt", ".key", ".conf", ".netrc", ".json", ".cfg"))
    )


def expected_versions(labels: dict[str, str], recipe: Path | None) -> tuple[dict[str, str], str]:
    if recipe is not None:
        return make_plan(load_recipe(recipe)).expected, f"recipe {recipe}"
    prefix = f"{LABEL_PREFIX}.version."
    found = {k.removeprefix(prefix): v for k, v in labels.items() if k.startswith(prefix)}
    return found, ("image labels" if found else "")


def run_checks(
    image: str,
    profile: Profile,
    report: Reporter,
    recipe: Path | None = None,
    port: int | None = None,
) -> CheckReport:
    engine = Engine.connect()
    info = engine.inspect_image(image)
    labels = info["Config"].get("Labels") or {}
    expected, source = expected_versions(labels, recipe)
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
    )
    started = time.monotonic()
    report(Message(f"starting a container from {image}"))
    try:
        ctx.prefetch_layers()
        with engine.container(image, entrypoint=KEEPALIVE, command=[], user="0") as box:
            ctx.container_id = box.id
            ctx.initial = _initial_facts(box)
            results = _run_suite(ctx, report)
    finally:
        ctx.close()
    return CheckReport(
        image=image,
        image_id=info["Id"],
        profile=profile.name,
        expected_source=source,
        results=results,
        seconds=time.monotonic() - started,
    )


def _initial_facts(box: Any) -> dict[str, str]:
    """State that later checks (which start sshd) would change, read first."""
    code, out = box.exec_run(["/bin/sh", "-c", "stat -c '%U %a %F' /run/sshd 2>/dev/null"])
    return {"run_sshd": out.decode().strip() if code == 0 else "missing"}


def mounted_keys(ctx: CheckContext, host: Any) -> Path:
    """A fresh key pair laid out like a Kubernetes Secret, made by the image's own ssh-keygen
    in the running check container (no extra container, nothing needed on this machine)."""
    secret = ctx.workdir() / "secret"
    if not secret.exists():
        output = host.check_output(KEYGEN)
        private, public = split_keygen_output(ctx.image, output)
        write_secret(secret, private, public, world_writable=False)
    return secret


def start_mounted(ctx: CheckContext, secret: Path):
    """A second container with the key pair mounted read-only at /root/.ssh, like a Secret."""
    return ctx.engine.container(
        ctx.image_id,
        entrypoint=KEEPALIVE,
        command=[],
        user="0",
        volumes={str(secret): {"bind": "/root/.ssh", "mode": "ro"}},
    )


def testinfra_host(container_id: str) -> Any:
    return testinfra.get_host(f"docker://root@{container_id}")


# ---------------------------------------------------------------------------------------


class _Collector:
    """pytest plugin: hands the context to the checks and collects their outcomes."""

    # Attribute names must not collide with the fixture names below (pytest scans them).
    def __init__(self, context: CheckContext, reporter: Reporter):
        self._context = context
        self._reporter = reporter
        self.results: list[CheckResult] = []
        self._notes: dict[str, list[tuple[str, str]]] = {}

    @pytest.fixture(scope="session")
    def ctx(self) -> CheckContext:
        return self._context

    @pytest.fixture
    def note(self, request):
        def add(level: str, text: str) -> None:
            self._notes.setdefault(request.node.nodeid, []).append((level, text))

        return add

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        marker = item.get_closest_marker("imagekit")
        if marker is None:
            return
        failed_setup = rep.when == "setup" and not rep.passed
        if rep.when == "call" or failed_setup:
            self.results.append(self._result(item, rep, marker.kwargs, call.excinfo))

    def _result(self, item, rep, meta: dict[str, str], excinfo) -> CheckResult:
        notes = self._notes.get(item.nodeid, [])
        if rep.skipped:
            status, evidence = "skip", _message(excinfo)
        elif rep.failed:
            status, evidence = "fail", _message(excinfo)
        else:
            levels = {level for level, _ in notes}
            status = "warn" if "warn" in levels else "info" if "info" in levels else "pass"
            evidence = "; ".join(text for _, text in notes)
        # pytest-testinfra parametrizes every check by host; only our own params name checks.
        callspec = getattr(item, "callspec", None)
        own = [k for k in (callspec.params if callspec else {}) if not k.startswith("_testinfra")]
        suffix = "".join(f"-{callspec.params[k]}" for k in own)
        position = (item.function.__code__.co_firstlineno, *(callspec.indices[k] for k in own))
        result = CheckResult(
            id=meta["id"] + suffix,
            requirement=meta["req"],
            title=meta["title"],
            status=status,
            evidence=evidence,
            fix=meta.get("fix", "") if status == "fail" else "",
            seconds=round(rep.duration, 3),
            order=position,
        )
        self._reporter(Message(f"{result.status:<4} {result.id}"))
        return result


def _message(excinfo) -> str:
    """The check's own words: an assert's message, pytest.fail/skip's text, or the error."""
    if excinfo is None:
        return ""
    exc = excinfo.value
    text = getattr(exc, "msg", None) or str(exc)
    if isinstance(exc, AssertionError):
        text = text.split("\nassert ", 1)[0]  # drop pytest's rewritten-assert explanation
    elif not isinstance(exc, pytest.fail.Exception | pytest.skip.Exception):
        text = f"{type(exc).__name__}: {text}"
    return text.strip() or type(exc).__name__


def _run_suite(ctx: CheckContext, report: Reporter) -> list[CheckResult]:
    collector = _Collector(ctx, report)
    args = [
        str(SUITE),
        "--hosts",
        f"docker://root@{ctx.container_id}",  # pytest-testinfra's `host` fixture
        "-c",
        str(SUITE / "pytest.ini"),
        "--rootdir",
        str(SUITE),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:terminal",
        "-p",
        "no:randomly",
        "--import-mode=importlib",
    ]
    old = os.environ.pop("PYTEST_ADDOPTS", None)
    try:
        code = pytest.main(args, plugins=[collector])
    finally:
        if old is not None:
            os.environ["PYTEST_ADDOPTS"] = old
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or not collector.results:
        raise ImagekitError(f"the check suite could not run (pytest exit {int(code)})")
    return sorted(collector.results, key=lambda r: r.order)
