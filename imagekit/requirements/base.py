"""What every requirement unit is: a judgement over facts, and the words around it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

Status = Literal["pass", "warn", "fail"]


@dataclass(frozen=True)
class Judgement:
    """A unit's verdict on one image and what it saw (the evidence a report shows)."""

    status: Status
    evidence: str

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def failed(self) -> bool:
        return self.status == "fail"


class SettingsRequirement:
    """A requirement judged from one program's effective settings: `sshd -T` (source "sshd")
    or `ssh -G` (source "ssh"), as a mapping of lower-case names to values. A name the
    program did not print is missing from the mapping; `judge` applies the program's default.

    `judge` is pure. The check suite fails on "fail" and notes a "warn"; adapt writes
    `remedy` when the verdict is anything but "pass" (its one layer sets the whole group)."""

    check_id: ClassVar[str]  # the check's ID in reports (e.g. strictmodes)
    requirement: ClassVar[str]  # REQUIREMENTS.md ID (R5) or SEC
    title: ClassVar[str]
    fix: ClassVar[str]  # what a user changes by hand
    remedy: ClassVar[str]  # the setting adapt writes, `{port}` filled in
    source: ClassVar[Literal["sshd", "ssh"]]
    settings: ClassVar[tuple[str, ...]]  # the names it reads: the facts its probe must print
    # What a failed MPIJob's output shows when the requirement is not met (a regular
    # expression), and what `imagekit smoke` then tells the user. None: no telltale line.
    symptom: ClassVar[str | None] = None
    diagnosis: ClassVar[str | None] = None

    @classmethod
    def judge(cls, settings: Mapping[str, str], port: int) -> Judgement:
        raise NotImplementedError

    @classmethod
    def remedy_lines(cls, port: int) -> list[str]:
        return cls.remedy.format(port=port).splitlines()
