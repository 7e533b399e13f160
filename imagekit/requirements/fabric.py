"""What keeps an image on the cluster's RDMA fabric (F1-F5): one class a requirement."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from imagekit.labels import FABRIC_LABEL, FABRIC_PROVIDERS_LABEL, FABRIC_UCX_LABEL
from imagekit.requirements.base import EnvRequirement, Judgement, ProbedRequirement, Requirement

if TYPE_CHECKING:
    from imagekit.profiles import Profile

# UCX transports that ride RDMA: the reliable-connected, unreliable-datagram and dynamically
# connected families (rc, rc_v, rc_x, rc_mlx5, ud_..., dc_...), "ib" (all of them) and "all".
RDMA_TRANSPORT_FAMILIES = frozenset({"rc", "ud", "dc"})


def _tokens(value: str) -> tuple[bool, list[str]]:
    """A component list as UCX and Open MPI read it: `^a,b` excludes, `a,b` selects."""
    value = value.strip()
    excluded = value.startswith("^")
    return excluded, [t.strip().lower() for t in value.lstrip("^").split(",") if t.strip()]


def _ucx_tls_without_rdma(value: str) -> bool:
    excluded, tokens = _tokens(value)
    if excluded:
        return "ib" in tokens or "all" in tokens or RDMA_TRANSPORT_FAMILIES <= set(tokens)
    return not any(
        t in ("all", "ib") or t.split("_", 1)[0] in RDMA_TRANSPORT_FAMILIES for t in tokens
    )


def _pml_without_ucx(value: str) -> bool:
    excluded, tokens = _tokens(value)
    # cm runs over RDMA too (through an MTL: ofi, psm2), so only ob1-alone and ^ucx are off.
    return "ucx" in tokens if excluded else not {"ucx", "cm"} & set(tokens)


def _nonzero(value: str) -> bool:
    try:
        return int(value.strip()) != 0
    except ValueError:
        return False  # NCCL reads a non-number as unset


# name -> (turns the fabric off?, what it does, the value adapt sets instead)
FABRIC_OFF = {
    "NCCL_IB_DISABLE": (_nonzero, "NCCL never uses its IB transport", "0"),
    "NCCL_NET": (lambda v: v.strip().lower() == "socket", "NCCL runs over TCP sockets", "IB"),
    "OMPI_MCA_pml": (_pml_without_ucx, "Open MPI cannot select its UCX PML", "ucx"),
    "UCX_TLS": (_ucx_tls_without_rdma, "UCX has no RDMA transport (rc, ud, dc)", "all"),
}


def fabric_off(settings: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(name, value, what it does) for each setting in `settings` (an image's ENV, or a launch
    line's -x and -mca pml) that keeps NCCL or Open MPI off the RDMA fabric (F4)."""
    return [
        (name, settings[name], why)
        for name, (off, why, _) in FABRIC_OFF.items()
        if name in settings and off(settings[name])
    ]


class FabricKeptOn(EnvRequirement):
    """F4: on an RDMA cluster, no variable the image sets turns the fabric off. Each is right
    for the seed's TCP clusters (`NCCL_IB_DISABLE=1`, `-mca pml ob1`), and on RDMA each makes
    NCCL or Open MPI fall back to TCP without an error: the job runs, several times slower.
    Judged under a profile whose `fabric` is `rdma`; a launch line may still set them."""

    check_id = "fabric-not-turned-off"
    requirement = "F4"
    title = "no image setting turns the RDMA fabric off (NCCL, Open MPI, UCX)"
    fix = (
        "remove from the image's ENV: NCCL_IB_DISABLE=1, NCCL_NET=Socket, OMPI_MCA_pml=ob1, a "
        "UCX_TLS without rc/ud/dc (set them in the launch line of TCP clusters instead)"
    )
    profiles = "judged under profiles with `fabric: rdma`; skipped under `fabric: tcp`"
    names = tuple(FABRIC_OFF)

    @classmethod
    def skip_reason(cls, profile: Profile, labels: Mapping[str, str] | None = None) -> str | None:
        return _rdma_profile_only(cls, profile)

    @classmethod
    def _offending(cls, env: Mapping[str, str]) -> list[str]:
        return [name for name, _, _ in fabric_off(env)]

    @classmethod
    def judge(cls, env: Mapping[str, str], profile: Profile) -> Judgement:
        offending = cls._offending(env)
        if offending:
            return Judgement(
                "fail",
                "; ".join(f"ENV {n}={env[n]}: {FABRIC_OFF[n][1]}" for n in offending),
            )
        seen = [f"{n}={env[n]}" for n in cls.names if n in env]
        return Judgement("pass", f"ENV sets {', '.join(seen)}" if seen else "ENV sets none of them")

    @classmethod
    def remedy(cls, env: Mapping[str, str]) -> dict[str, str]:
        return {name: FABRIC_OFF[name][2] for name in cls._offending(env)}


@dataclass(frozen=True)
class DeclaredFabric:
    """What an image says it is made for (recipes' network section, as labels)."""

    rdma: bool
    providers: tuple[str, ...]
    ucx: bool

    @classmethod
    def of(cls, labels: Mapping[str, str]) -> DeclaredFabric:
        providers = tuple(
            p
            for p in labels.get(FABRIC_PROVIDERS_LABEL, "").split(",")
            if PROVIDER_NAME.fullmatch(p)  # a label is image metadata: untrusted
        )
        return cls(
            labels.get(FABRIC_LABEL) == "rdma",
            providers[:32],
            labels.get(FABRIC_UCX_LABEL) == "true",
        )


PROVIDER_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
FABRIC_PROBE = "fabric_probe.sh"


def _rdma_profile_only(unit: type, profile: Profile) -> str | None:
    """Why a unit judged only for RDMA clusters does not apply under a TCP profile."""
    if profile.fabric == "rdma":
        return None
    return (
        f"profile {profile.name or 'file'}: fabric {profile.fabric} "
        f"({unit.requirement} is for RDMA)"
    )


def _needed(labels: Mapping[str, str], profile: Profile) -> str | None:
    """Why the fabric section does not apply: neither the image nor the profile is RDMA."""
    if DeclaredFabric.of(labels).rdma or profile.fabric == "rdma":
        return None
    return "neither the image (io.imagekit.fabric) nor the profile (fabric) is RDMA"


class FabricProbed(ProbedRequirement):
    probe = FABRIC_PROBE
    profiles = "judged for images that declare fabric rdma and under profiles with fabric: rdma"
    image_facts = False  # libibverbs lists the host's devices

    @classmethod
    def skip_reason(cls, profile: Profile, labels: Mapping[str, str] | None = None) -> str | None:
        return _needed(labels or {}, profile)

    @classmethod
    def probe_args(cls, labels: Mapping[str, str]) -> tuple[str, ...]:
        return DeclaredFabric.of(labels).providers

    @classmethod
    def judge(cls, facts, labels, profile) -> Judgement:
        """The section applies to images that declare RDMA and under RDMA profiles; each
        unit's own rule (`judge_fabric`) runs only there."""
        skip = cls.skip_reason(profile, labels)
        if skip:
            return Judgement("skip", skip)
        return cls.judge_fabric(facts, labels, profile)

    @classmethod
    def judge_fabric(cls, facts, labels, profile) -> Judgement:
        raise NotImplementedError


class VerbsLoads(FabricProbed):
    """F2: NCCL's IB transport dlopens `libibverbs.so` (then `libibverbs.so.1`) at init and
    asks it for the HCAs; without it NCCL falls back to TCP sockets and says so only at INFO.
    Zero devices is fine (a machine without an HCA, as here); a library that cannot load is
    not."""

    check_id = "verbs-library"
    requirement = "F2"
    title = "libibverbs loads the way NCCL loads it, and lists devices"
    fix = "install libibverbs1 (and ibverbs-providers): recipes say network: {fabric: rdma}"

    @classmethod
    def judge_fabric(cls, facts, labels, profile) -> Judgement:
        verbs = facts.get("verbs", "")
        if verbs == "no python3":
            return Judgement("skip", "no python3 in the image to dlopen libibverbs with")
        return Judgement("pass" if verbs.startswith("loaded") else "fail", verbs or "no answer")


class ProvidersRegistered(FabricProbed):
    """F2: libibverbs finds an HCA only through a provider registered for it in
    /etc/libibverbs.d (mlx5 for NVIDIA/Mellanox InfiniBand and RoCE, efa, rxe, ...), whose
    library must load. Each provider the image declares is judged; under an RDMA profile an
    image that declares none needs at least one registered."""

    check_id = "verbs-providers"
    requirement = "F2"
    title = "each declared verbs provider is registered and its library resolves"
    fix = "install ibverbs-providers (rdma-core) and list the HCA's provider in network.providers"

    @classmethod
    def judge_fabric(cls, facts, labels, profile) -> Judgement:
        registered = set(facts.get("registered", "").split(","))
        declared = DeclaredFabric.of(labels).providers
        if not declared:
            names = sorted(registered - {""})
            if names:
                return Judgement("pass", f"registered: {', '.join(names)}")
            return Judgement("fail", "no provider registered in /etc/libibverbs.d")
        problems = []
        for name in declared:
            library = facts.get(f"provider.{name}", "-")
            # A missing libibverbs itself is verbs-library's finding, not the provider's.
            missing = (
                " ".join(
                    lib
                    for lib in facts.get(f"provider.{name}.missing", "-").split()
                    if lib not in ("-", "libibverbs.so.1")
                )
                or "-"
            )
            if name not in registered:
                problems.append(f"{name}: not registered in /etc/libibverbs.d")
            elif library == "-":
                problems.append(f"{name}: no lib{name}-rdmav*.so")
            elif missing != "-":
                problems.append(f"{name}: {library} needs {missing.strip()}, not found")
        if problems:
            return Judgement("fail", "; ".join(problems))
        return Judgement("pass", f"{', '.join(declared)}: registered, libraries resolve")


class UcxPml(FabricProbed):
    """F2: Open MPI reaches RDMA through its UCX PML, and UCX through its IB transports (rc,
    ud, dc, in libuct_ib). Judged where the image declares UCX, or under an RDMA profile; the
    transports UCX sees on this machine are reported (no HCA here: tcp, shared memory)."""

    check_id = "ucx-pml"
    requirement = "F2"
    title = "Open MPI has the UCX PML, and UCX its verbs transports"
    fix = "install Open MPI with UCX (Debian's openmpi-bin has it), libucx0 and ucx-utils: recipes say network.ucx: true"

    @classmethod
    def judge_fabric(cls, facts, labels, profile) -> Judgement:
        declared = DeclaredFabric.of(labels)
        if not declared.ucx and profile.fabric != "rdma":
            return Judgement("skip", "the image does not declare UCX (io.imagekit.fabric.ucx)")
        problems = []
        if facts.get("pml_ucx") != "yes":
            problems.append("Open MPI has no UCX PML (ompi_info lists no mca:pml:ucx)")
        if facts.get("uct_ib", "-") == "-":
            problems.append("UCX has no verbs transports (no libuct_ib)")
        if declared.ucx and not facts.get("ucx_info"):
            problems.append("no ucx_info (ucx-utils)")
        if problems:
            return Judgement("fail", "; ".join(problems))
        seen = facts.get("ucx_transports", "").split() or ["none listed"]
        return Judgement("pass", f"pml ucx; libuct_ib; transports here: {', '.join(seen)}")


class LockedMemory(Requirement):
    """F3: registering memory with an HCA pins it, so a rank needs an unlimited locked-memory
    limit. The pod's runtime sets the limit (an RDMA node: unlimited, with IPC_LOCK); a rank
    started through sshd gets what sshd and PAM leave of it, and an image can lower it there
    (limits.conf). A live proof: the check logs in over ssh, as mpirun does, and compares
    that session's `ulimit -l` with the container's own (checks_ssh.py)."""

    check_id = "locked-memory"
    requirement = "F3"
    title = "a rank started through sshd may lock as much memory as the pod (RDMA registration)"
    fix = (
        "do not lower memlock for ssh sessions (/etc/security/limits.conf, limits.d; "
        "`* - memlock unlimited`); give pods IPC_LOCK (`imagekit mpijob --rdma`)"
    )
    source = "ssh-login"
    profiles = "judged under profiles with `fabric: rdma`; skipped under `fabric: tcp`"
    symptom = (
        r"(?i)(couldn't|could not|cannot|unable to|failed to) (allocate|lock|pin|register)"
        r"[^\n]{0,40}(memory|MR\b)|ibv_reg_mr"
    )
    diagnosis = (
        "F3: ranks cannot pin memory for RDMA: the locked-memory limit a rank gets through "
        "sshd is too low (ulimit -l over ssh; IPC_LOCK, limits.conf memlock unlimited)"
    )

    @classmethod
    def skip_reason(cls, profile: Profile, labels: Mapping[str, str] | None = None) -> str | None:
        return _rdma_profile_only(cls, profile)

    @classmethod
    def judge(cls, login: str, runtime: str) -> Judgement:
        """`login`: `ulimit -l` in an ssh session; `runtime`: in the container itself (KiB,
        or unlimited). The image's part is the difference; a limited runtime is the node's."""
        evidence = f"ulimit -l over ssh: {_kib(login)}; in the container: {_kib(runtime)}"
        if _limit(login) < _limit(runtime):
            return Judgement("fail", f"{evidence}: the image lowers it for ssh sessions")
        if _limit(login) != float("inf"):
            return Judgement(
                "warn",
                f"{evidence}: this runtime's limit; an RDMA node's pods need unlimited "
                "(IPC_LOCK, the runtime's memlock)",
            )
        return Judgement("pass", evidence)


def _limit(value: str) -> float:
    value = value.strip()
    if value == "unlimited":
        return float("inf")
    return float(value) if value.isdigit() else -1.0


def _kib(value: str) -> str:
    value = value.strip()
    return f"{value} KiB" if value.isdigit() else (value or "nothing")


FABRIC: tuple[type[Requirement], ...] = (
    VerbsLoads,
    ProvidersRegistered,
    UcxPml,
    LockedMemory,
    FabricKeptOn,
)
