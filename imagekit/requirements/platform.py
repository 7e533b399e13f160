"""What makes an image run on the nodes its config names (A1): its native files are built for
the config's architecture, and each library a rank loads finds what it needs. One class a
requirement."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
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
LIBS_PROBE = "libs_probe.sh"
NAMED = 5  # foreign files named in the evidence (the count says how many there are)
_MACHINE_COUNT = re.compile(r"machine\.(\d{1,5})")


def _number(text: str, limit: int = 10_000_000) -> int:
    """A count the probe printed (untrusted): ASCII digits only ("²" is a digit to str.isdigit
    and an error to int), capped; anything else is 0."""
    return min(int(text), limit) if text.isascii() and text.isdigit() else 0


def machine_name(number: int) -> str:
    return MACHINE_NAMES.get(number, f"ELF machine {number}")


def _counts(facts: Mapping[str, str]) -> dict[int, int]:
    """ELF machine -> files of it, from the probe's `machine.N` lines (untrusted text)."""
    counts = {}
    for key, value in facts.items():
        match = _MACHINE_COUNT.fullmatch(key)
        if match and _number(value):
            counts[int(match.group(1))] = _number(value)
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


# mpi4py's PyPI wheels carry one extension per MPI ABI (MPI.openmpi.*.so, MPI.mpich.*.so) and
# load the one whose libmpi the image has: the others are meant not to resolve.
_MPI4PY_VARIANT = re.compile(r".*/mpi4py/MPI\.([A-Za-z0-9_]+)\.[^/]*")


@dataclass(frozen=True)
class _Library:
    path: str
    missing: tuple[str, ...]  # what the image lacks
    error: str
    from_driver: tuple[str, ...] = ()  # what the node's driver provides at run time

    @property
    def resolves(self) -> bool:
        return not self.missing and not self.error

    def described(self) -> str:
        needs = f"needs {', '.join(self.missing)}" if self.missing else self.error
        return f"{self.path} ({needs})"


def _libraries(facts: Mapping[str, str], driver: frozenset[str]) -> list[_Library]:
    """The probe's `lib.N` rows (untrusted text), the driver's sonames taken out."""
    found = []
    for index in range(_number(facts.get("libs", ""), limit=10_000)):
        path = facts.get(f"lib.{index}")
        if path:
            missing = facts.get(f"lib.{index}.missing", "").split()
            found.append(
                _Library(
                    path,
                    tuple(name for name in missing if name not in driver),
                    facts.get(f"lib.{index}.error", ""),
                    tuple(name for name in missing if name in driver),
                )
            )
    return found


def _unused_variants(libraries: list[_Library]) -> set[str]:
    """The paths of mpi4py's ABI variants that need not resolve: all but the ones that do,
    when one does. When none does, every variant counts (mpi4py cannot load)."""
    variants = [lib for lib in libraries if _MPI4PY_VARIANT.fullmatch(lib.path)]
    if not any(lib.resolves for lib in variants):
        return set()
    return {lib.path for lib in variants if not lib.resolves}


class LibrariesResolve(ProbedRequirement):
    """A1: each native library of torch, its nvidia-* wheels, mpi4py and DeepSpeed's compiled
    ops finds every library it needs, by the image's own dynamic loader (what ldd runs) under
    the image's environment. A library that is missing, or is there for another architecture
    only, stops the import on every rank ("cannot open shared object file"), which no check
    of the files alone shows: a wheel built against a library of the builder stage, an op
    linked to a toolkit the image does not keep, an MPI the image does not have.

    Judged as a rank loads them: torch first, so what torch's libraries loaded is found by
    soname when mpi4py and the ops load. The driver's libraries (the profile's
    `driver_libraries`: libcuda.so.1, libnvidia-ml.so.1, ...) come from the node at run time,
    mounted by the NVIDIA container runtime, and are not required. mpi4py's wheels carry one
    extension per MPI ABI and load the one that resolves: one must."""

    check_id = "native-libraries"
    requirement = "A1"
    title = "each native library of torch, CUDA's wheels, mpi4py and DeepSpeed's ops resolves"
    profiles = "the profile's `driver_libraries` come from the node's driver, not the image"
    fix = (
        "install what provides each missing library in the image's final stage (apt: its "
        "package for the image's architecture), or build the named module against libraries "
        "the image keeps (pip --no-binary, or the op compiled in the image's own stage)"
    )
    probe = LIBS_PROBE

    @classmethod
    def judge(
        cls, facts: Mapping[str, str], labels: Mapping[str, str], profile: Profile
    ) -> Judgement:
        if facts.get("python3") == "none" or facts.get("loader") == "none":
            return Judgement("skip", "no python3 with a dynamic loader in the image")
        libraries = _libraries(facts, frozenset(profile.driver_libraries))
        if not libraries:
            return Judgement("skip", "no native library of torch, mpi4py or DeepSpeed's ops")
        unused = _unused_variants(libraries)
        broken = [lib for lib in libraries if not lib.resolves and lib.path not in unused]
        more = " (the first 2000)" if facts.get("truncated") == "1" else ""
        if broken:
            named = ", ".join(lib.described() for lib in broken[:NAMED])
            return Judgement(
                "fail",
                f"{len(broken)} of {len(libraries)} native libraries{more} do not resolve: {named}",
            )
        notes = f"; mpi4py's unused MPI ABI builds left out: {len(unused)}" if unused else ""
        driver = sorted({name for lib in libraries for name in lib.from_driver})
        if driver:
            notes += f"; left to the NVIDIA container runtime: {', '.join(driver)}"
        return Judgement("pass", f"{len(libraries)} native libraries{more} resolve{notes}")


PLATFORM = (NativeArchitecture, LibrariesResolve)
