"""Launch tooling (L1-L14, E1): the recommended mpirun line for a topology, a linter that
parses real mpirun command lines, and a Kubeflow MPIJob (kubeflow.org/v2beta1) manifest.
All pure: strings and data in, strings and data out."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from imagekit import grammar, operators
from imagekit.errors import UsageError
from imagekit.ompi import OMPI5_MCA_RENAMES, OPERATOR_HOSTFILE

HOSTFILE = OPERATOR_HOSTFILE
WORKER_COMMAND = ["/usr/sbin/sshd", "-De"]

# -- generating ---------------------------------------------------------------------------

PRODUCTION_MCA = (
    ("pml", "ob1"),  # L4
    ("btl", "^openib"),  # L5
    ("btl_tcp_if_exclude", "lo,docker0"),  # L6
    ("oob_tcp_if_exclude", "lo,docker0"),  # L6
    ("plm_rsh_no_tree_spawn", "1"),  # L10
    ("orte_abort_on_non_zero_status", "1"),  # L10
)
GPU_ENV = ("NCCL_DEBUG=WARN", "NCCL_SOCKET_IFNAME=eth0", "NCCL_IB_DISABLE=1")  # L8

# Open MPI 5 (PRRTE) names for ORTE's, and what it no longer has (K3). Each was run against
# Debian 13's Open MPI 5.0.7: it rejects -quiet, and -npernode with -map-by is an error.
OMPI5_GONE = {
    "orte_abort_on_non_zero_status": "Open MPI 5 ends the job when a rank exits non-zero",
    "orte_base_help_aggregate": "Open MPI 5 has no orte_* parameters",
}


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
        HOSTFILE,  # L2: the operator's, never --host
        "--allow-run-as-root",  # L14
        "-bind-to",
        "none",
    ]
    if not five:
        argv += ["-map-by", "slot"]  # L7
    notes = []
    mca = list(PRODUCTION_MCA)
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
    if req.gpu:
        nccl = [
            ("NCCL_DEBUG=INFO" if req.debug and e.startswith("NCCL_DEBUG") else e) for e in GPU_ENV
        ]
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


# -- parsing ------------------------------------------------------------------------------

LAUNCHERS = {"mpirun", "mpiexec", "orterun", "prterun"}
# Open MPI options that take values (how many), in both spellings; everything else is a flag.
VALUE_OPTIONS = {
    "np": 1,
    "n": 1,
    "c": 1,
    "npernode": 1,
    "N": 1,
    "hostfile": 1,
    "machinefile": 1,
    "default-hostfile": 1,
    "host": 1,
    "H": 1,
    "mca": 2,
    "gmca": 2,
    "x": 1,
    "bind-to": 1,
    "map-by": 1,
    "rank-by": 1,
    "wdir": 1,
    "wd": 1,
    "timeout": 1,
    "env-file": 1,
    "prefix": 1,
    "output-filename": 1,
    "tune": 1,
    "am": 1,
    "npersocket": 1,
    "cpus-per-proc": 1,
    "path": 1,
    "preload-files": 1,
    "app": 1,
    "hetero-apps": 0,
}


@dataclass
class MpirunCall:
    options: list[tuple[str, list[str]]]  # (name without dashes, values) in order
    program: list[str]

    def values(self, *names: str) -> list[list[str]]:
        return [v for n, v in self.options if n in names]

    def has(self, *names: str) -> bool:
        return any(n in names for n, _ in self.options)

    def mca(self) -> dict[str, str]:
        return {v[0]: v[1] for v in self.values("mca", "gmca") if len(v) == 2}

    def exported(self) -> set[str]:
        return {v[0].split("=", 1)[0] for v in self.values("x") if v}


def normalize(text: str) -> str:
    """Join continuation lines; drop comments written after a continuation backslash (as
    documentation often does: `--hostfile F \\ # comment`)."""
    lines = []
    for line in text.splitlines():
        line = re.sub(r"\\\s+#.*$", "\\\\", line.rstrip())
        lines.append(line)
    return re.sub(r"\\\n", " ", "\n".join(lines)).strip()


def parse(text: str) -> MpirunCall:
    try:
        words = shlex.split(normalize(text), comments=True)
    except ValueError as exc:
        raise UsageError(f"cannot parse the command line: {exc}") from None
    start = next((i for i, w in enumerate(words) if w.rsplit("/", 1)[-1] in LAUNCHERS), None)
    if start is None:
        raise UsageError("no mpirun (or mpiexec) in the command line")
    options: list[tuple[str, list[str]]] = []
    i = start + 1
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        raw = words[i]
        name = raw.lstrip("-")
        inline = None
        if "=" in name and raw.startswith("--"):
            name, inline = name.split("=", 1)
        arity = VALUE_OPTIONS.get(name, 0)
        if inline is not None:
            values, i = [inline], i + 1
        else:
            values, i = words[i + 1 : i + 1 + arity], i + 1 + arity
        options.append((name, values))
    if i < len(words) and words[i] == "--":
        i += 1
    return MpirunCall(options, words[i:])


# -- linting ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    lid: str
    severity: str  # error | warning | info
    message: str
    fix: str


@dataclass(frozen=True)
class LintContext:
    workers: int | None = None
    slots: int | None = None
    production: bool = True
    root_env: str = "unknown"  # yes | no | unknown: does the image set OMPI_ALLOW_RUN_AS_ROOT*?
    openmpi_major: int | None = None  # None: unknown (from --openmpi or --recipe)


def lint(text: str, ctx: LintContext | None = None) -> list[Finding]:
    ctx = ctx or LintContext()
    call = parse(text)
    found: list[Finding] = []
    for rule in RULES:
        found.extend(rule(call, ctx))
    return found


def _program_name(call: MpirunCall) -> tuple[str, list[str]]:
    if not call.program:
        return "", []
    return call.program[0].rsplit("/", 1)[-1], call.program[1:]


def rule_double_launcher(call, ctx):
    name, args = _program_name(call)
    launchers = {"deepspeed", "torchrun", "horovodrun", "accelerate"}
    module = args[:2] if name.startswith("python") else []
    if name in launchers or module in (
        ["-m", "torch.distributed.run"],
        ["-m", "deepspeed.launcher.runner"],
    ):
        yield Finding(
            "L12",
            "error",
            f"`{name}` is a launcher: under mpirun it launches every rank again",
            "run the script directly: mpirun ... python train.py --deepspeed",
        )


def rule_bare_script(call, ctx):
    name, _ = _program_name(call)
    if name.endswith(".sh"):
        yield Finding(
            "L13",
            "error",
            f"{call.program[0]} runs without an interpreter on remote workers",
            f"mpirun ... bash {call.program[0]} (and start the script with #!/usr/bin/env bash)",
        )
    if not call.program:
        yield Finding(
            "L1", "error", "no program to run after the mpirun options", "add the command"
        )


def rule_host(call, ctx):
    if call.has("host", "H"):
        yield Finding(
            "L2",
            "error",
            "--host conflicts with the operator's hostfile",
            f"remove --host; the operator writes {HOSTFILE}",
        )
    for values in call.values("hostfile", "machinefile", "default-hostfile"):
        if values and values[0] != HOSTFILE:
            yield Finding(
                "L2",
                "warning",
                f"hostfile {values[0]} is not the operator's",
                f"--hostfile {HOSTFILE}",
            )


def rule_oversubscribe(call, ctx):
    if call.has("oversubscribe"):
        severity = "error" if ctx.production else "info"
        yield Finding(
            "L3",
            severity,
            "--oversubscribe runs more ranks than slots",
            "debugging only: size -np to workers x slots instead",
        )


def rule_binding(call, ctx):
    for values in call.values("bind-to"):
        if values and values[0] in ("core", "socket", "hwthread", "numa", "l3cache"):
            yield Finding(
                "L7",
                "warning",
                f"-bind-to {values[0]} fights Kubernetes' CPU placement",
                "-bind-to none",
            )
    for values in call.values("map-by"):
        if values and values[0].split(":")[0] in ("node", "core", "socket"):
            yield Finding(
                "L7",
                "warning",
                f"-map-by {values[0]} spreads ranks unevenly over pods",
                "-map-by slot",
            )


def rule_transports(call, ctx):
    mca = call.mca()
    if mca.get("pml") == "ucx":
        yield Finding("L4", "error", "pml ucx is unreliable on Kubernetes networks", "-mca pml ob1")
    btl = mca.get("btl", "")
    if btl and not btl.startswith("^") and "openib" in btl.split(","):
        yield Finding(
            "L5",
            "error",
            "btl openib errors out without InfiniBand",
            "-mca btl ^openib (or tcp,self)",
        )


def rule_environment(call, ctx):
    exported = call.exported()
    if call.has("env-file"):
        return
    for var in ("PATH", "LD_LIBRARY_PATH"):
        if var not in exported:
            yield Finding(
                "L8",
                "warning",
                f"{var} is not passed to the workers (-x {var})",
                f"add -x {var}: the launcher's environment does not reach workers",
            )
    nccl = {v[0] for v in call.values("x") if v and v[0].startswith("NCCL_DEBUG=INFO")}
    if nccl and ctx.production:
        yield Finding(
            "L8", "info", "NCCL_DEBUG=INFO is for debugging", "use -x NCCL_DEBUG=WARN in production"
        )


def rule_np(call, ctx):
    np_values = call.values("np", "n", "c")
    if not np_values:
        yield Finding(
            "L1",
            "warning",
            "no -np: Open MPI fills every slot of the hostfile",
            "-np <workers x slots>",
        )
    elif ctx.workers and ctx.slots:
        want = ctx.workers * ctx.slots
        if np_values[0] and np_values[0][0] != str(want):
            yield Finding(
                "L1",
                "error",
                f"-np {np_values[0][0]} but {ctx.workers} workers x {ctx.slots} slots = {want}",
                f"-np {want} -npernode {ctx.slots}",
            )
    per_node = call.has("npernode", "N") or any(
        v and v[0].startswith("ppr:") for v in call.values("map-by")
    )
    if np_values and not per_node and ctx.workers:
        yield Finding("L1", "info", "no -npernode", "-npernode <slots> pins the per-worker count")


def rule_root(call, ctx):
    if call.has("allow-run-as-root") or ctx.root_env == "yes":
        return
    severity = "error" if ctx.root_env == "no" else "warning"
    yield Finding(
        "L14",
        severity,
        "mpirun as root aborts without --allow-run-as-root",
        "add --allow-run-as-root, or set OMPI_ALLOW_RUN_AS_ROOT=1 and "
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the image",
    )


def rule_debug_flags(call, ctx):
    if not ctx.production:
        return
    if call.has("leave-sessions-attached"):
        yield Finding(
            "L10",
            "warning",
            "--leave-sessions-attached keeps sessions after exit",
            "debugging only: remove it in production",
        )
    if call.has("v", "verbose", "debug", "debug-daemons"):
        yield Finding("L9", "warning", "verbose/debug output in production", "remove -v / --debug")


def rule_openmpi5(call, ctx):
    """K3: what Open MPI 5's mpirun ignores or refuses, when the image's major is known."""
    if ctx.openmpi_major is None or ctx.openmpi_major < 5:
        return
    orte = [key for key in call.mca() if key.startswith("orte_") or key.startswith("plm_rsh_")]
    for key in orte:
        new = OMPI5_MCA_RENAMES.get(key)
        yield Finding(
            "K3",
            "error",
            f"-mca {key} is ignored by Open MPI 5 (PRRTE)",
            f"-mca {new}" if new else OMPI5_GONE.get(key, "remove it"),
        )
    if call.has("quiet", "q"):
        yield Finding("K3", "error", "Open MPI 5's mpirun rejects -quiet", "remove -quiet")
    if call.has("npernode", "N") and call.has("map-by"):
        yield Finding(
            "K3",
            "error",
            "Open MPI 5 refuses -npernode together with -map-by",
            "--map-by ppr:<slots>:node (and no -npernode)",
        )


RULES = [
    rule_double_launcher,
    rule_bare_script,
    rule_host,
    rule_oversubscribe,
    rule_binding,
    rule_transports,
    rule_environment,
    rule_np,
    rule_root,
    rule_debug_flags,
    rule_openmpi5,
]


# -- MPIJob ---------------------------------------------------------------------------------


def mpijob(
    name: str,
    image: str,
    workers: int,
    slots: int,
    launcher: list[str],
    gpus_per_worker: int = 0,
    shm_size: str = "1Gi",
    profile=None,
) -> dict:
    """A kubeflow.org/v2beta1 MPIJob: launcher runs `launcher`, workers run sshd (W1-W4).
    A non-root `profile` gives K1's non-root form: runAsUser, the Secret at the user's
    ~/.ssh, workers' sshd started with its own config."""
    _job_options(name, gpus_per_worker, shm_size)
    non_root = profile is not None and profile.non_root
    if non_root and profile.uid is None:
        raise UsageError(f"--profile {profile.name}: give the user's uid (uid:) for runAsUser")

    def run_as() -> dict:  # a fresh mapping per container: YAML would alias a shared one
        return {"securityContext": {"runAsUser": profile.uid}} if non_root else {}

    shm_volume = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}}
    shm_mount = {"name": "dshm", "mountPath": "/dev/shm"}
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
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "launcher",
                                    "image": image,
                                    "command": launcher,
                                    **run_as(),
                                }
                            ]
                        }
                    },
                },
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
) -> list[dict]:
    """Kubeflow Trainer v2 (K2): a TrainingRuntime with an MPI policy, and the TrainJob that
    runs `launcher` with it. The image is set on the launcher *and* the nodes (a runtime that
    leaves the nodes on its default image runs the job on the wrong one: trainer#4030); nodes
    run sshd as their command, never the training command, and the launcher waits for them."""
    _job_options(name, gpus_per_worker, shm_size)
    non_root = profile is not None and profile.non_root
    if non_root and profile.uid is None:
        raise UsageError(f"--profile {profile.name}: give the user's uid (uid:) for runAsUser")
    # K2: Trainer's own runtimes run as mpiuser and read its root-owned 0640 Secret through
    # the pod's fsGroup.
    security = (
        {"runAsUser": profile.uid, "runAsGroup": profile.uid, "fsGroup": profile.uid}
        if non_root
        else None
    )
    runtime = f"{name}-runtime"
    shm_volume = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}}
    shm_mount = {"name": "dshm", "mountPath": "/dev/shm"}
    node = {
        "name": "node",
        "image": image,
        "command": list(WORKER_COMMAND) + (["-f", profile.sshd_config] if non_root else []),
        "readinessProbe": {"tcpSocket": {"port": ssh_port}, "initialDelaySeconds": 2},
        "volumeMounts": [shm_mount],
    }
    launcher_container = {"name": "node", "image": image}
    replicated = [
        _replicated_job("node", node, shm_volume, security=security),
        {
            **_replicated_job(
                "launcher", launcher_container, None, trainer_step=True, security=security
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


# -- the commands' entry points (`imagekit mpirun`, `imagekit mpijob`) ---------------------------


def mpirun_line(request: dict, recipe: Path | None, profile: str) -> LaunchLine:
    """The recommended launch line; MCA parameters the recipe bakes in are left out, and a
    profile whose sshd is not on port 22 gets the rsh agent pointed at its port."""
    fields = dict(request)  # the caller's mapping stays as it was
    plan = None
    if recipe is not None:  # the recipe machinery is the slow part of start-up: only then
        from imagekit.targets import recipe_plan

        plan = recipe_plan(recipe)
    if plan is not None:
        fields.setdefault("baked_mca", {k: v for k, v, _ in (*plan.mca, *plan.prte_mca)})
        if fields.get("openmpi_major") is None:
            fields["openmpi_major"] = plan.openmpi_major
        if fields.get("gpu") is None:
            fields["gpu"] = plan.accel == "gpu"
    fields["gpu"] = bool(fields.get("gpu"))
    fields["openmpi_major"] = int(fields.get("openmpi_major") or 4)
    fields["ssh_port"] = profile_port(profile)
    return recommend(LaunchRequest(**fields))


def profile_port(name_or_path: str) -> int:
    """A profile's sshd port. A built-in profile's is read straight from the data file:
    building the profile model (pydantic) would be most of `imagekit mpirun`'s start-up.
    The unit tests hold this equal to `load_profile(...).port` for every built-in profile."""
    from imagekit.datafiles import data_yaml

    body = data_yaml("profiles.yaml").get(name_or_path)
    if isinstance(body, dict):
        port = body.get("port", 22)
        if isinstance(port, int):
            return port
    from imagekit.profiles import load_profile  # a user's profile file: validated

    return load_profile(name_or_path).port


def openmpi_major_of(flag: str | None, recipe: Path | None) -> int | None:
    """`--openmpi` wins; else the recipe's Open MPI; else unknown."""
    if flag is not None:
        return int(flag)
    from imagekit.targets import recipe_plan

    plan = recipe_plan(recipe)
    return plan.openmpi_major if plan is not None else None


def mpijob_manifest(
    target: str,
    name: str,
    workers: int,
    slots: int,
    command: tuple[str, ...],
    gpus_per_worker: int,
    shm_size: str,
    operator: str = operators.DEFAULT,
    profile: str | None = None,
) -> list[dict]:
    """The documents to `kubectl apply` for TARGET under `operator`."""
    from imagekit.targets import recipe_plan, resolve_target

    image, recipe = resolve_target(target)
    chosen = None
    if profile is not None:
        from imagekit.profiles import load_profile

        chosen = load_profile(profile)
    line = mpirun_line(
        {
            "workers": workers,
            "slots": slots,
            "command": command,
            "gpu": True if gpus_per_worker else None,
        },
        recipe,
        profile or "seed",
    )
    if operators.OPERATORS[operator].manifest == "TrainJob":
        plan = recipe_plan(recipe)
        port = plan.ssh_port if plan is not None else 22
        if chosen is not None and chosen.non_root:
            port = chosen.port
        return trainjob(
            name, image, workers, slots, line.argv, gpus_per_worker, shm_size, port, chosen
        )
    return [mpijob(name, image, workers, slots, line.argv, gpus_per_worker, shm_size, chosen)]
