"""Requirements as units: each one's ID, title, the facts it reads, a pure judgement, its fix
(what a user changes) and its remedy (what `imagekit adapt` writes). The check suite, adapt and
the docs take all of it from here, so a requirement is judged in one place.

Units judged from a program's effective settings (`sshd -T`, `ssh -G`) live in `ssh.py`;
each is one class whose docstring is its reference text. Live proofs that need containers
(real logins, mpirun across workers) stay in the check suite and take their wording from here.
"""

from imagekit.requirements.base import Judgement, SettingsRequirement
from imagekit.requirements.ssh import SSH_CLIENT, SSHD

REGISTRY: tuple[type[SettingsRequirement], ...] = (*SSHD, *SSH_CLIENT)

__all__ = ["REGISTRY", "SSHD", "SSH_CLIENT", "Judgement", "SettingsRequirement"]
