"""The check suite's pytest run: a plugin that hands the suite its context and collects each
check's outcome. Imported apart from runner.py (on a thread, while the check container
starts), since pytest is a fifth of a second of imports."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pytest

from imagekit import signals
from imagekit.checks.backend import hostspec
from imagekit.checks.report import CheckResult
from imagekit.checks.runner import SECTIONS, CheckContext
from imagekit.engine.client import Message, Reporter
from imagekit.errors import ImagekitError


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

    def pytest_configure(self, config):
        # checks_profile.py parametrizes over the profile's probes at collection time
        config.imagekit_context = self._context

    def pytest_collection_modifyitems(self, config, items):
        """Run (and report) the check files in SECTIONS order; a profile without probes has
        no probe check at all (rather than a skipped one)."""
        if not self._context.profile.probes:
            dropped = [i for i in items if getattr(i, "originalname", "") == "check_profile_probe"]
            if dropped:
                items[:] = [i for i in items if i not in dropped]
                config.hook.pytest_deselected(items=dropped)
        items.sort(key=_section_rank)

    def pytest_collection_finish(self, session):
        """The layer walk starts once the checks are collected: in place it is a second of
        Python in this process, which would halve the interpreter's speed for collecting
        (one GIL), while the container checks that run next mostly wait on the engine.
        The layer checks come last and wait for it."""
        self._context.prefetch_layers()

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
        probe = callspec.params.get("probe") if callspec else None
        if probe is not None:  # a profile's probe reports under its own ID, requirement, fix
            meta = {
                "id": probe.id,
                "req": probe.requirement,
                "title": probe.title,
                "fix": probe.fix,
            }
        own = [
            k
            for k in (callspec.params if callspec else {})
            if not k.startswith("_testinfra") and k != "probe"
        ]
        suffix = "".join(f"-{callspec.params[k]}" for k in own)
        position = (
            _section_rank(item),
            item.function.__code__.co_firstlineno,
            *(callspec.indices[k] for k in own),
        )
        result = CheckResult(
            id=meta["id"] + suffix,
            requirement=meta["req"],
            title=meta["title"],
            status=status,
            evidence=evidence,
            fix=(getattr(excinfo and excinfo.value, "fix", "") or meta.get("fix", ""))
            if status == "fail"
            else "",
            seconds=round(rep.duration, 3),
            order=position,
        )
        self._reporter(Message(f"{result.status:<4} {result.id}"))
        return result


def _section_rank(item) -> int:
    name = Path(str(item.fspath)).name
    return SECTIONS.index(name) if name in SECTIONS else len(SECTIONS)


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


def run_suite(ctx: CheckContext, report: Reporter) -> list[CheckResult]:
    collector = _Collector(ctx, report)
    with resources.as_file(resources.files("imagekit.checks").joinpath("suite")) as suite:
        return _run_pytest(suite, ctx, collector)


_PYTEST_ENV = ("PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS")


def _run_pytest(suite: Path, ctx: CheckContext, collector: _Collector) -> list[CheckResult]:
    args = [
        str(suite),
        "--hosts",
        hostspec(ctx.container.id),  # pytest-testinfra's `host` fixture
        "-c",
        str(suite / "pytest.ini"),
        "--rootdir",
        str(suite),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:terminal",
        "-p",
        "testinfra.plugin",  # the one plugin the suite uses; autoloading others is off
        "--import-mode=importlib",
    ]
    # The user's pytest settings and plugins (coverage, random order, ...) are theirs, not
    # the check suite's: a check must not depend on what else is installed.
    saved = {name: os.environ.pop(name, None) for name in _PYTEST_ENV}
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        code = pytest.main(args, plugins=[collector])
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value
    if code == pytest.ExitCode.INTERRUPTED:  # pytest swallowed our Ctrl-C / SIGTERM
        raise signals.interruption(KeyboardInterrupt())
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or not collector.results:
        raise ImagekitError(f"the check suite could not run (pytest exit {int(code)})")
    return sorted(collector.results, key=lambda r: r.order)
