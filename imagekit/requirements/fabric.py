"""What keeps an image on the cluster's RDMA fabric (F1-F5): one class a requirement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from imagekit.requirements.base import EnvRequirement, Judgement

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
    def skip_reason(cls, profile: Profile) -> str | None:
        if profile.fabric == "rdma":
            return None
        return f"profile {profile.name or 'file'}: fabric {profile.fabric} (F4 is for RDMA)"

    @classmethod
    def _offending(cls, env: Mapping[str, str]) -> list[str]:
        return [name for name, (off, _, _) in FABRIC_OFF.items() if name in env and off(env[name])]

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


FABRIC: tuple[type[EnvRequirement], ...] = (FabricKeptOn,)
