"""What every requirement unit is: a judgement over facts, and the words around it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

if TYPE_CHECKING:  # a unit reads a profile's fields; it never loads one
    from imagekit.profiles import Profile

Status = Literal["pass", "warn", "fail", "skip"]  # skip: the unit does not apply here
SAME_EVERYWHERE = "the same under every profile"  # how most checks vary by profile


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


class Requirement:
    """What every unit has: the check's ID and wording, the requirement it proves, its fix,
    and (optionally) smoke's telltale. A subclass says which facts it reads and how it judges
    them; `skip_reason` says which profiles it does not apply to, and `profiles` says so in
    words for the reference (`imagekit requirements`)."""

    check_id: ClassVar[str]  # the check's ID in reports (e.g. strictmodes)
    requirement: ClassVar[str]  # REQUIREMENTS.md ID (R5) or SEC
    title: ClassVar[str]
    fix: ClassVar[str]  # what a user changes by hand
    source: ClassVar[str]  # where its facts come from: "sshd", "ssh", "env"
    profiles: ClassVar[str] = SAME_EVERYWHERE
    # What a failed MPIJob's output shows when the requirement is not met (a regular
    # expression), and what `imagekit smoke` then tells the user. None: no telltale line.
    symptom: ClassVar[str | None] = None
    diagnosis: ClassVar[str | None] = None

    @classmethod
    def skip_reason(cls, profile: Profile, labels: Mapping[str, str] | None = None) -> str | None:
        """Why the unit does not apply under `profile` (to an image with these `labels`,
        where the unit reads them), or None when it does. Whatever its facts would be: a
        probed unit's probe does not run then, and its `judge` answers the same."""
        return None


class SettingsRequirement(Requirement):
    """A requirement judged from one program's effective settings: `sshd -T` (source "sshd")
    or `ssh -G` (source "ssh"), as a mapping of lower-case names to values. A name the
    program did not print is missing from the mapping; `judge` applies the program's default.

    `judge` is pure. The check suite fails on "fail" and notes a "warn"; adapt writes
    `remedy` when the verdict is anything but "pass" (its one layer sets the whole group)."""

    remedy: ClassVar[str]  # the setting adapt writes, `{port}` filled in
    source: ClassVar[Literal["sshd", "ssh"]]
    settings: ClassVar[tuple[str, ...]]  # the names it reads: the facts its probe must print

    @classmethod
    def judge(cls, settings: Mapping[str, str], port: int) -> Judgement:
        raise NotImplementedError

    @classmethod
    def remedy_lines(cls, port: int) -> list[str]:
        return cls.remedy.format(port=port).splitlines()


class EnvRequirement(Requirement):
    """A requirement judged from the image config's environment (`Env`) under a profile: no
    container runs. The check suite makes one check of each (checks_units.py), adapt sets
    `remedy(env)` as ENV lines when the verdict is "fail", and the reference lists it.

    `judge` and `remedy` are pure."""

    source: ClassVar[Literal["env"]] = "env"
    names: ClassVar[tuple[str, ...]]  # the variables it reads

    @classmethod
    def judge(cls, env: Mapping[str, str], profile: Profile) -> Judgement:
        raise NotImplementedError

    @classmethod
    def remedy(cls, env: Mapping[str, str]) -> dict[str, str]:
        """The ENV values that make `env` pass (a Dockerfile cannot unset a variable)."""
        raise NotImplementedError


class ProbedRequirement(Requirement):
    """A requirement judged from what a probe script (imagekit/data/`probe`) prints in the
    check's container, `KEY<TAB>VALUE` lines, together with the image's labels (what it
    declares) and the profile. The check suite runs each probe once for all its units
    (checks_units.py); `judge` is pure and may answer "skip" when the unit does not apply."""

    probe: ClassVar[str]  # a data file: the script, run as `sh -c SCRIPT sh ARGS...`
    # Whether what the probe prints depends on the image alone, so that an answer can be kept
    # by image ID (checks/probecache.py); False where it asks the host (devices, limits).
    image_facts: ClassVar[bool] = True

    @classmethod
    def probe_args(cls, labels: Mapping[str, str]) -> tuple[str, ...]:
        return ()

    @classmethod
    def judge(
        cls, facts: Mapping[str, str], labels: Mapping[str, str], profile: Profile
    ) -> Judgement:
        raise NotImplementedError
