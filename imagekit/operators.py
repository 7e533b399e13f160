"""The operators whose MPIJobs imagekit prepares images for, each one value with every fact
smoke, mpijob, profiles and the command line need of it. Standard library only: `imagekit
mpirun` and `mpijob` read it on their start-up path.

Both write the hostfile at /etc/mpi/hostfile (ompi.OPERATOR_HOSTFILE) and start workers with
`/usr/sbin/sshd -De`; they differ in how they name pods, mount the hostfile and hand a
non-root user the Secret's key (K2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# K1, K2: how both operators start a worker (mpi-operator's non-root examples add `-f CONFIG`).
WORKER_COMMAND = ("/usr/sbin/sshd", "-De")


@dataclass(frozen=True)
class Operator:
    name: str  # as the command line and profiles spell it
    title: str
    # How the hostfile reaches the launcher: mpi-operator writes a file (0644), Trainer v2
    # mounts a ConfigMap (read-only, 0444).
    hostfile_mode: int
    # A non-root user's key: its own Secret files (mpi-operator), or root's files at 0640 read
    # through the group (fsGroup: Trainer v2, K2). Profiles say the same in `secret_files`.
    secret_files: Literal["owned", "group-readable"]
    # The Secret's key pair: Trainer v2 stores an ECDSA P-521 key under the name id_rsa, and
    # its volume's defaultMode is 0640 (K2).
    key_type: Literal["rsa", "ecdsa"]
    key_mode: int
    # Trainer v2 also sets Open MPI's default slots and retries ssh connections (K2).
    sets_default_slots: bool
    ssh_connection_attempts: int | None
    manifest: Literal["MPIJob", "TrainJob"]

    def pods(self, job: str, workers: int) -> tuple[tuple[str, ...], tuple[str, ...], str]:
        """(worker hostnames, the FQDNs the hostfile names, the launcher's hostname):
        mpi-operator's worker service (`<job>-worker-<i>.<job>-worker.<ns>.svc`), or Trainer
        v2's JobSet pods (`<job>-<replicatedjob>-<i>-<j>.<job>`, K2)."""
        if self.name == TRAINER_V2.name:
            names = tuple(f"{job}-node-0-{i}" for i in range(workers))
            return names, tuple(f"{n}.{job}" for n in names), f"{job}-launcher-0-0"
        names = tuple(f"{job}-worker-{i}" for i in range(workers))
        return names, tuple(f"{n}.{job}-worker.default.svc" for n in names), f"{job}-launcher"


MPI_OPERATOR = Operator(
    name="mpi-operator",
    title="Kubeflow mpi-operator v2 (kubeflow.org/v2beta1 MPIJob)",
    hostfile_mode=0o644,
    secret_files="owned",
    key_type="rsa",
    key_mode=0o600,
    sets_default_slots=False,
    ssh_connection_attempts=None,
    manifest="MPIJob",
)
TRAINER_V2 = Operator(
    name="trainer-v2",
    title="Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1 TrainingRuntime + TrainJob)",
    hostfile_mode=0o444,
    secret_files="group-readable",
    key_type="ecdsa",
    key_mode=0o640,
    sets_default_slots=True,
    ssh_connection_attempts=10,
    manifest="TrainJob",
)
OPERATORS = {op.name: op for op in (MPI_OPERATOR, TRAINER_V2)}
NAMES = tuple(OPERATORS)
DEFAULT = MPI_OPERATOR.name


def by_secret_files(secret_files: str) -> Operator:
    """The operator whose Secret layout a profile describes."""
    return next(op for op in OPERATORS.values() if op.secret_files == secret_files)
