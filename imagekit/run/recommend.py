"""The recommended mpirun line for a topology (L1-L14, K3): the seed's tables as code. Pure:
a request in, argv and its notes out."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from imagekit.errors import UsageError
from imagekit.ompi import OMPI5_GONE, OMPI5_MCA_RENAMES, OPERATOR_HOSTFILE

PRODUCTION_MCA = (
    ("pml", "ob1"),  # L4
    ("btl", "^openib"),  # L5
    ("btl_tcp_if_exclude", "lo,docker0"),  # L6
    ("oob_tcp_if_exclude", "lo,docker0"),  # L6
    ("plm_rsh_no_tree_spawn", "1"),  # L10
    ("orte_abort_on_non_zero_status", "1"),  # L10
)
GPU_ENV = ("NCCL_DEBUG=WARN", "NCCL_SOCKET_IFNAME=eth0", "NCCL_IB_DISABLE=1")  # L8
# F1-F4: on an RDMA cluster Open MPI runs over UCX (its one-sided too) and NCCL over IB; only
# NCCL's bootstrap stays on the pod network. L4 and L5's TCP lines are for TCP clusters.
RDMA_MCA = (("pml", "ucx"), ("osc", "ucx"))
RDMA_GPU_ENV = tuple(e for e in GPU_ENV if not e.startswith("NCCL_IB_DISABLE="))
# A host without an HCA (a laptop, CI): Open MPI 4.1's UCX PML accepts only RDMA transports
# unless told otherwise, and UCX then runs over TCP: the same code path, no RDMA.
UCX_OVER_TCP_MCA = (("pml_ucx_tls", "any"), ("pml_ucx_devices", "any"))
UCX_OVER_TCP_ENV = ("UCX_TLS=tcp,self",)


@dataclass(frozen=True)
class LaunchRequest:
    workers: int
    slots: int
    command: tuple[str, ...]
    gpu: bool = False
    debug: bool = False
    env: tuple[str, ...] = ()
    timeout: int = 3600
    baked_mca: dict[str, str] = field(default_factory=dict)  # already in openmpi-mca-params.conf
    workdir: str | None = None
    ssh_port: int = 22  # workers' sshd port; mpirun's ssh is pointed at it when not 22
    # Whether the launcher has LD_LIBRARY_PATH: `-x` of an unset variable only prints a
    # warning (Debian images set none; CUDA images do).
    ld_library_path: bool = True
    openmpi_major: int = 4  # 5: PRRTE's option and parameter names (K3)
    fabric: str = "tcp"  # tcp | rdma (F1)
    net_devices: str | None = None  # rdma: the HCA ports, e.g. mlx5_0:1 (UCX_NET_DEVICES)
    over_tcp: bool = False  # rdma without an HCA: UCX over its TCP transport (smoke)
    extra_mca: tuple[tuple[str, str], ...] = ()  # appended as given (smoke's verbosity)


@dataclass(frozen=True)
class LaunchLine:
    argv: list[str]
    notes: list[str]

    def shell(self) -> str:
        return shlex.join(self.argv)


def recommend(req: LaunchRequest) -> LaunchLine:
    if req.workers < 1 or req.slots < 1:
        raise UsageError("--workers and --slots must be at least 1")
    if not req.command:
        raise UsageError("give the program to run after --, e.g. -- python3 train.py")
    five = req.openmpi_major >= 5
    argv = ["mpirun", "-np", str(req.workers * req.slots)]
    if five:  # L1 + L7 in one: PRRTE refuses -npernode next to -map-by
        argv += ["--map-by", f"ppr:{req.slots}:node"]
    else:
        argv += ["-npernode", str(req.slots)]  # L1
    argv += [
        "--hostfile",
        OPERATOR_HOSTFILE,  # L2: the operator's, never --host
        "--allow-run-as-root",  # L14
        "-bind-to",
        "none",
    ]
    if not five:
        argv += ["-map-by", "slot"]  # L7
    notes = []
    rdma = req.fabric == "rdma"
    mca = [m for m in PRODUCTION_MCA if not (rdma and m[0] == "pml")]
    if rdma:
        mca[:0] = RDMA_MCA
        if req.over_tcp:
            mca += UCX_OVER_TCP_MCA
            notes.append("UCX over TCP: no HCA here; the same UCX path, without RDMA")
        elif not req.net_devices:
            notes.append(
                "F2: pin the HCA ports with --net-devices (UCX_NET_DEVICES, NCCL_IB_HCA), "
                "e.g. mlx5_0:1; unpinned, UCX and NCCL pick among all they find"
            )
    mca += list(req.extra_mca)
    if req.ssh_port != 22:  # workers' sshd listens elsewhere (e.g. mpi-operator's 2222)
        mca.append(("plm_rsh_args", f"-p {req.ssh_port}"))
    if req.debug:  # L9: the debugging set
        mca.append(("orte_base_help_aggregate", "0"))
        argv += ["-v", "--display-map", "--report-bindings"]
    if five:
        mca, gone = _openmpi5_mca(mca)
        notes.extend(f"left out for Open MPI 5: {key} ({why})" for key, why in gone)
    skipped = [f"{k} {v}" for k, v in mca if req.baked_mca.get(k) == v]
    for key, value in mca:
        if req.baked_mca.get(key) != value:
            argv += ["-mca", key, value]
    if skipped:
        notes.append("left out, already in the image's MCA parameter files: " + ", ".join(skipped))
    argv += ["-x", "PATH"]  # L8
    if req.ld_library_path:
        argv += ["-x", "LD_LIBRARY_PATH"]
    if rdma and req.over_tcp:
        for item in UCX_OVER_TCP_ENV:
            argv += ["-x", item]
    if rdma and req.net_devices:
        argv += ["-x", f"UCX_NET_DEVICES={req.net_devices}"]
    if req.gpu:
        nccl = [
            ("NCCL_DEBUG=INFO" if req.debug and e.startswith("NCCL_DEBUG") else e)
            for e in (RDMA_GPU_ENV if rdma else GPU_ENV)
        ]
        if rdma and req.net_devices:
            nccl.append(f"NCCL_IB_HCA={req.net_devices}")
        for item in nccl:
            argv += ["-x", item]
    for var in req.env:
        argv += ["-x", var]
    argv += ["--tag-output", "--timeout" if five else "-timeout", str(req.timeout)]  # L10, L11
    if not req.debug and not five:
        argv.append("-quiet")  # L11: production (Open MPI 5's mpirun rejects it)
    if req.workdir:
        argv += ["-wdir", req.workdir]
    program = list(req.command)
    if program[0].endswith(".sh"):
        program = ["bash", *program]  # L13
        notes.append("L13: scripts run through bash on remote workers")
    return LaunchLine(argv + program, notes)


def _openmpi5_mca(
    mca: list[tuple[str, str]],
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(parameters under their Open MPI 5 names, [(parameter, why it is left out)])."""
    kept, gone = [], []
    for key, value in mca:
        if key in OMPI5_GONE:
            gone.append((key, OMPI5_GONE[key]))
        else:
            kept.append((OMPI5_MCA_RENAMES.get(key, key), value))
    return kept, gone
