"""What to `kubectl apply`: a Kubeflow MPIJob (kubeflow.org/v2beta1) or a Trainer v2
TrainJob for an image, its launch line and a profile. Pure: data in, documents out."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping

from imagekit import grammar
from imagekit.errors import UsageError
from imagekit.operators import WORKER_COMMAND


def mpijob(
    name: str,
    image: str,
    workers: int,
    slots: int,
    launcher: list[str],
    gpus_per_worker: int = 0,
    shm_size: str = "1Gi",
    profile=None,
    rdma: Mapping[str, int] | None = None,
) -> dict:
    """A kubeflow.org/v2beta1 MPIJob: launcher runs `launcher`, workers run sshd (W1-W4).
    A non-root `profile` gives K1's non-root form: runAsUser, the Secret at the user's
    ~/.ssh, workers' sshd started with its own config."""
    _job_options(name, gpus_per_worker, shm_size)
    non_root = _non_root(profile)

    def run_as() -> dict:  # a fresh mapping per container: YAML would alias a shared one
        return {"securityContext": {"runAsUser": profile.uid}} if non_root else {}

    shm_volume, shm_mount = _shm(shm_size)
    worker_resources = {"limits": {"nvidia.com/gpu": gpus_per_worker}} if gpus_per_worker else {}
    worker = {
        "name": "worker",
        "image": image,
        "command": list(WORKER_COMMAND) + (["-f", profile.sshd_config] if non_root else []),
        "volumeMounts": [shm_mount],
        **run_as(),
    }
    if worker_resources:
        worker["resources"] = worker_resources
    launcher_container = {"name": "launcher", "image": image, "command": launcher, **run_as()}
    launcher_pod: dict = {"containers": [launcher_container]}
    if rdma:
        for container in (worker, launcher_container):
            _on_rdma(container, rdma, shm_mount)
        launcher_pod["volumes"] = [copy.deepcopy(shm_volume)]  # YAML would alias a shared one
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": slots,
            "sshAuthMountPath": profile.key_dir if non_root else "/root/.ssh",
            "mpiImplementation": "OpenMPI",
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": launcher_pod}},
                "Worker": {
                    "replicas": workers,
                    "template": {"spec": {"containers": [worker], "volumes": [shm_volume]}},
                },
            },
        },
    }


TRAINER_API = "trainer.kubeflow.org/v1alpha1"


def trainjob(
    name: str,
    image: str,
    workers: int,
    slots: int,
    launcher: list[str],
    gpus_per_worker: int = 0,
    shm_size: str = "1Gi",
    ssh_port: int = 22,
    profile=None,
    rdma: Mapping[str, int] | None = None,
) -> list[dict]:
    """Kubeflow Trainer v2 (K2): a TrainingRuntime with an MPI policy, and the TrainJob that
    runs `launcher` with it. The image is set on the launcher *and* the nodes (a runtime that
    leaves the nodes on its default image runs the job on the wrong one: trainer#4030); nodes
    run sshd as their command, never the training command, and the launcher waits for them."""
    _job_options(name, gpus_per_worker, shm_size)
    non_root = _non_root(profile)
    # K2: Trainer's own runtimes run as mpiuser and read its root-owned 0640 Secret through
    # the pod's fsGroup.
    security = (
        {"runAsUser": profile.uid, "runAsGroup": profile.uid, "fsGroup": profile.uid}
        if non_root
        else None
    )
    runtime = f"{name}-runtime"
    shm_volume, shm_mount = _shm(shm_size)
    node = {
        "name": "node",
        "image": image,
        "command": list(WORKER_COMMAND) + (["-f", profile.sshd_config] if non_root else []),
        "readinessProbe": {"tcpSocket": {"port": ssh_port}, "initialDelaySeconds": 2},
        "volumeMounts": [shm_mount],
    }
    launcher_container = {"name": "node", "image": image}
    if rdma:
        for container in (node, launcher_container):
            _on_rdma(container, rdma, shm_mount)
    replicated = [
        _replicated_job("node", node, shm_volume, security=security),
        {
            **_replicated_job(
                "launcher",
                launcher_container,
                copy.deepcopy(shm_volume) if rdma else None,
                trainer_step=True,
                security=security,
            ),
            "dependsOn": [{"name": "node", "status": "Ready"}],
        },
    ]
    training_runtime = {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": {"name": runtime},
        "spec": {
            "mlPolicy": {
                "numNodes": workers,
                "mpi": {
                    "numProcPerNode": slots,
                    "mpiImplementation": "OpenMPI",
                    # R1: root's images; K2: mpiuser's home for a non-root profile
                    "sshAuthMountPath": profile.key_dir if non_root else "/root/.ssh",
                    "runLauncherAsNode": False,
                },
            },
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": replicated,
                }
            },
        },
    }
    trainer: dict = {
        "image": image,
        "command": launcher,
        "numNodes": workers,
        "numProcPerNode": slots,
    }
    if gpus_per_worker:
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": gpus_per_worker}}
    job = {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {
                "name": runtime,
                "apiGroup": "trainer.kubeflow.org",
                "kind": "TrainingRuntime",
            },
            "trainer": trainer,
        },
    }
    return [training_runtime, job]


def _non_root(profile) -> bool:
    """Whether `profile` runs the job as a non-root user (K1, K2), who needs a uid."""
    non_root = profile is not None and profile.non_root
    if non_root and profile.uid is None:
        raise UsageError(f"--profile {profile.name}: give the user's uid (uid:) for runAsUser")
    return non_root


def _shm(size: str) -> tuple[dict, dict]:
    """/dev/shm as a memory-backed emptyDir of `size`: (the volume, its mount)."""
    volume = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size}}
    return volume, {"name": "dshm", "mountPath": "/dev/shm"}


def _on_rdma(container: dict, rdma: Mapping[str, int], shm_mount: dict) -> None:
    """F3: the cluster's RDMA device resource (requested and limited), IPC_LOCK (registering
    memory with the HCA pins it) and /dev/shm (NCCL's shared memory between local ranks)."""
    resources = container.setdefault("resources", {})
    for kind in ("requests", "limits"):
        resources.setdefault(kind, {}).update(rdma)
    security = container.setdefault("securityContext", {})
    security["capabilities"] = {"add": ["IPC_LOCK"]}
    mounts = container.setdefault("volumeMounts", [])
    if shm_mount not in mounts:
        mounts.append(copy.deepcopy(shm_mount))


def _replicated_job(
    name: str,
    container: dict,
    volume: dict | None,
    trainer_step: bool = False,
    security: dict | None = None,
) -> dict:
    pod: dict = {"containers": [container]}
    if security:
        pod["securityContext"] = dict(security)  # a copy: YAML would alias a shared one
    if volume:
        pod["volumes"] = [volume]
    template: dict = {}
    if trainer_step:  # where the TrainJob's trainer (image, command) is applied
        template["metadata"] = {
            "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
        }
    template["spec"] = {"template": {"spec": pod}}
    return {"name": name, "template": template}


# A Kubernetes quantity as a memory size: 1Gi, 512Mi, 1G, 1.5Gi, 1073741824 (not 1GB, 1g).
QUANTITY = re.compile(r"[0-9]{1,20}(\.[0-9]{1,20})?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")


def _job_options(name: str, gpus_per_worker: int, shm_size: str) -> None:
    """What the API server would refuse at `kubectl apply`, refused here, naming the flag."""
    if len(name) > 63 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
        raise UsageError(
            f"--name {grammar.shown(name)}: not a Kubernetes name (lowercase, digits, '-')"
        )
    if gpus_per_worker < 0:
        raise UsageError(f"--gpus-per-worker {gpus_per_worker}: must be 0 or more")
    if not QUANTITY.fullmatch(shm_size):
        raise UsageError(
            f"--shm-size {grammar.shown(shm_size)}: not a Kubernetes quantity (e.g. 1Gi, 512Mi)"
        )
