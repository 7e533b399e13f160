"""Every check the suite defines, read from the suite's own marks the way its collector reads
them, so the reference (imagekit/cli/reference.py) cannot drift from what runs."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from imagekit.checks.runner import SECTIONS


@dataclass(frozen=True)
class CheckEntry:
    id: str
    requirement: str
    title: str
    fix: str
    varies: str


def catalog() -> list[CheckEntry]:
    """Every check the suite defines, in report order (sections, then definition order)."""
    entries = []
    for section in SECTIONS:
        module = importlib.import_module(f"imagekit.checks.suite.{section.removesuffix('.py')}")
        for name, function in vars(module).items():
            if name.startswith("check_"):
                entries.extend(_entries(function))
    return entries


def _entries(function) -> list[CheckEntry]:
    marks = getattr(function, "pytestmark", [])
    # A parametrized check reports one ID a value (version-python, version-torch, ...).
    values = [str(v) for m in marks if m.name == "parametrize" for v in m.args[1]]
    return [
        CheckEntry(
            id=f"{m.kwargs['id']}-{{{','.join(values)}}}" if values else m.kwargs["id"],
            requirement=m.kwargs["req"],
            title=m.kwargs["title"],
            fix=m.kwargs["fix"],
            varies=m.kwargs["varies"],
        )
        for m in marks
        if m.name == "imagekit"
    ]
