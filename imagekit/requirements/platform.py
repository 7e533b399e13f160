"""What makes an image run on the nodes its config names (A1): one class a requirement."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from imagekit.requirements.base import Judgement, ProbedRequirement

if TYPE_CHECKING:
    from imagekit.profiles import Profile

# The image config's architecture (OCI/Docker names) -> the ELF e_machine of its native code.
ELF_MACHINES: dict[str, tuple[int, str]] = {
    "amd64": (62, "x86-64"),
    "arm64": (183, "aarch64"),
    "386": (3, "i386"),
    "arm": (40, "arm"),
    "ppc64le": (21, "ppc64"),
    "s390x": (22, "s390"),
    "riscv64": (243, "riscv"),
}
MACHINE_NAMES = {number: name for number, name in ELF_MACHINES.values()}
# A container cannot see its image's config: the check suite adds the config's architecture
# to the facts this unit's probe printed, under this key (which the probe never prints).
CONFIG_ARCH_FACT = "config.architecture"
ARCH_PROBE = "arch_probe.sh"
NAMED = 5  # foreign files named in the evidence (the count says how many there are)
_MACHINE_COUNT = re.compile(r"machine\.(\d{1,5})")


def machine_name(number: int) -> str:
    return MACHINE_NAMES.get(number, f"ELF machine {number}")


def _counts(facts: Mapping[str, str]) -> dict[int, int]:
    """ELF machine -> files of it, from the probe's `machine.N` lines (untrusted text)."""
    counts = {}
    for key, value in facts.items():
        match = _MACHINE_COUNT.fullmatch(key)
        if match and value.isdigit():
            counts[int(match.group(1))] = int(value)
    return counts


def _named(facts: Mapping[str, str], machines: list[int]) -> list[str]:
    paths = []
    for machine in machines:
        for index in range(10):
            path = facts.get(f"machine.{machine}.{index}")
            if path:
                paths.append(f"{path} ({machine_name(machine)})")
    return paths[:NAMED]


class NativeArchitecture(ProbedRequirement):
    """A1: every native file a job loads or runs (Python packages such as torch, mpi4py and
    DeepSpeed's compiled ops; Open MPI; python3, sshd, ssh, mpirun) is built for the
    architecture the image's config names. A node pulls the image its platform asks for and
    trusts the config: an amd64 library in an arm64 image fails only when a rank imports it
    ("cannot open shared object file" or "wrong ELF class"), on the node, at run time.
    Judged for every image; the probe reads each file's ELF header (python3 in the image)."""

    check_id = "architecture"
    requirement = "A1"
    title = "every native file is built for the architecture the image's config names"
    fix = (
        "install the build of each named file for the image's architecture (apt: the arch's "
        "package; pip: a wheel with that platform tag, or build it from source in the image), "
        "or build the image for the platform its files are for"
    )
    probe = ARCH_PROBE

    @classmethod
    def judge(
        cls, facts: Mapping[str, str], labels: Mapping[str, str], profile: Profile
    ) -> Judgement:
        architecture = facts.get(CONFIG_ARCH_FACT, "")
        if facts.get("python3") == "none":
            return Judgement("skip", "no python3 in the image: its ELF headers were not read")
        expected = ELF_MACHINES.get(architecture)
        if expected is None:
            return Judgement(
                "warn", f"config architecture {architecture!r}: no known ELF machine for it"
            )
        counts = _counts(facts)
        total = sum(counts.values())
        if not total:
            return Judgement(
                "warn", "no native file read (python3 found none where jobs load code)"
            )
        foreign = sorted(m for m in counts if m != expected[0])
        if not foreign:
            more = " (the first 200000 files)" if facts.get("truncated") == "1" else ""
            return Judgement(
                "pass", f"{total} native files{more}, all {expected[1]} (config: {architecture})"
            )
        wrong = sum(counts[m] for m in foreign)
        return Judgement(
            "fail",
            f"{wrong} of {total} native files are not {expected[1]}, which the config "
            f"({architecture}) promises: " + ", ".join(_named(facts, foreign)),
        )


PLATFORM = (NativeArchitecture,)
