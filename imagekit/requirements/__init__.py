"""Requirements as units: each one's ID, title, the facts it reads, a pure judgement, its fix
(what a user changes) and its remedy (what `imagekit adapt` writes). The check suite, adapt and
the docs take all of it from here, so a requirement is judged in one place.

Units judged from a program's effective settings (`sshd -T`, `ssh -G`) live in `ssh.py`,
those judged from the image's ENV or a probe in `fabric.py` (the fabric) and
`platform.py` (the architecture); each is one class whose docstring is its
reference text. Adding a requirement is one class here, listed in `REGISTRY`: the check suite,
adapt, smoke's hints and `imagekit requirements` (the reference) take it from there. Live proofs that need containers
(real logins, mpirun across workers) stay in the check suite and take their wording from here.
"""

from imagekit.requirements.base import (
    EnvRequirement,
    Judgement,
    ProbedRequirement,
    Requirement,
    SettingsRequirement,
)
from imagekit.requirements.fabric import FABRIC
from imagekit.requirements.platform import PLATFORM
from imagekit.requirements.ssh import SSH_CLIENT, SSHD

REGISTRY: tuple[type[Requirement], ...] = (*SSHD, *SSH_CLIENT, *FABRIC, *PLATFORM)


def env_units() -> tuple[type[EnvRequirement], ...]:
    return tuple(u for u in REGISTRY if issubclass(u, EnvRequirement))


def with_symptoms() -> tuple[type[Requirement], ...]:
    """The units whose failure a job's output shows (smoke's hints), in registry order."""
    return tuple(u for u in REGISTRY if u.symptom)


__all__ = [
    "FABRIC",
    "PLATFORM",
    "REGISTRY",
    "SSHD",
    "SSH_CLIENT",
    "EnvRequirement",
    "Judgement",
    "ProbedRequirement",
    "Requirement",
    "SettingsRequirement",
    "env_units",
    "with_symptoms",
]
