"""`imagekit smoke`: run an MPIJob the way the operator does (W1-W6), in real containers on
one machine: a private network, N workers started with `/usr/sbin/sshd -De` (the operator's
worker command, bypassing the entrypoint), a launcher with the operator's hostfile at
/etc/mpi/hostfile, real ssh and a real mpirun. Everything it creates carries one label and
is removed on success, failure, timeout and Ctrl-C."""

from __future__ import annotations

import json
import re
import shlex
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from imagekit import grammar, operators, workdirs
from imagekit.build.plan import LABEL_PREFIX
from imagekit.datafiles import data_text
from imagekit.engine.client import KEEPALIVE, Container, Engine, Log, Message, Reporter
from imagekit.errors import ImagekitError, UsageError
from imagekit.grammar import size_in_bytes
from imagekit.labels import SMOKE_LABEL
from imagekit.ompi import OPERATOR_HOSTFILE, openmpi_major
from imagekit.operators import WORKER_COMMAND
from imagekit.requirements import with_symptoms
from imagekit.requirements.fabric import DeclaredFabric
from imagekit.run.recommend import LaunchRequest, recommend
from imagekit.secrets import make_secret

SSH_PORT_LABEL = f"{LABEL_PREFIX}.ssh.port"
OPENMPI_LABEL = f"{LABEL_PREFIX}.version.openmpi"
TIMEOUT_SLACK = 15  # seconds mpirun -timeout waits beyond the launcher's timeout
PROBE_PATH = "/opt/imagekit-smoke/probe.py"


@dataclass(frozen=True)
class SmokeOptions:
    workers: int = 2
    slots: int = 2
    keys: str = "mounted"  # mounted | image
    port: int | None = None  # default: the image's io.imagekit.ssh.port label, else 22
    timeout: int = 600
    shm_size: str = "1g"
    command: tuple[str, ...] = ()  # empty: the seed's recommended mpirun line with the probe
    copies: tuple[tuple[Path, str], ...] = ()  # (local file or dir, path in every container)
    workdir: str | None = None
    operator: str = operators.DEFAULT  # whose layout to imitate: a name in operators.NAMES
    # K1's non-root workers (from a profile): who runs sshd and mpirun, where the keys are
    # mounted, which config sshd is started with (`sshd -De -f FILE`).
    user: str = "root"
    key_dir: str = "/root/.ssh"
    sshd_config: str | None = None
    # Extra variables for every rank: set in each container and passed on with mpirun -x
    # (DS_ACCELERATOR=cpu runs a GPU image's MPI half on a host without GPUs).
    env: tuple[tuple[str, str], ...] = ()
    gpus: str | None = None  # all | N, on every worker (the NVIDIA container runtime's)
    # F1: rdma runs the default line over Open MPI's UCX PML (UCX over TCP: no HCA here) and
    # proves from Open MPI's own selection output that every rank used it. None: the image's
    # io.imagekit.fabric label, else tcp.
    fabric: str | None = None


@dataclass(frozen=True)
class Topology:
    job: str
    workers: tuple[str, ...]  # hostnames, as the pods' hostnames
    fqdns: tuple[str, ...]  # what the operator writes into the hostfile
    slots: int
    launcher: str = ""

    def __post_init__(self) -> None:
        if not self.launcher:
            object.__setattr__(self, "launcher", f"{self.job}-launcher")

    def hostfile(self) -> str:
        return "".join(f"{fqdn} slots={self.slots}\n" for fqdn in self.fqdns)

    def expected_host(self, rank: int) -> str:
        """-map-by slot fills each worker's slots in hostfile order."""
        return self.workers[rank // self.slots]


def topology(job: str, workers: int, slots: int, operator: str = operators.DEFAULT) -> Topology:
    """Host names as the operator makes them (operators.Operator.pods)."""
    names, fqdns, launcher = operators.OPERATORS[operator].pods(job, workers)
    return Topology(job, names, fqdns, slots, launcher=launcher)


def default_command(
    top: Topology, env: dict[str, str], options: SmokeOptions, openmpi_major: int = 4
) -> list[str]:
    """The recommended launch line (`imagekit mpirun`, L1-L14) running the built-in probe.
    The launcher's own `timeout` bounds the run a little before mpirun's -timeout would."""
    rdma = options.fabric == "rdma"
    request = LaunchRequest(
        workers=len(top.workers),
        slots=top.slots,
        command=("python3", PROBE_PATH),
        timeout=options.timeout + TIMEOUT_SLACK,
        ssh_port=options.port or 22,
        ld_library_path="LD_LIBRARY_PATH" in env,
        openmpi_major=openmpi_major,
        env=tuple(name for name, _ in options.env),
        fabric="rdma" if rdma else "tcp",
        over_tcp=rdma,
        extra_mca=(PML_VERBOSE,) if rdma else (),
    )
    return recommend(request).argv


# Open MPI names the PML each process selected at this verbosity; with --tag-output each line
# carries its rank: `[1,3]<stderr>:[host:pid] select: component ucx selected`.
PML_VERBOSE = ("pml_base_verbose", "10")
PML_SELECTED = re.compile(r"\[\d+,(\d+)\]<\w+>:.*\bselect: component (\w+) selected")


def pml_selected(output: str) -> dict[int, str]:
    return {int(rank): pml for rank, pml in PML_SELECTED.findall(output)}


def pml_problems(selected: dict[int, str], ranks: int) -> list[str]:
    """F1: every rank ran over UCX; a rank on ob1 is a job that silently left the fabric."""
    problems = [
        f"rank {rank} selected the {pml} PML, not ucx: it ran over TCP, off the RDMA fabric"
        for rank, pml in sorted(selected.items())
        if pml != "ucx"
    ]
    unseen = sorted(set(range(ranks)) - set(selected))
    if unseen:
        problems.append(
            f"no PML selection seen for ranks {unseen} (pml_base_verbose output; the probe "
            "initializes MPI through mpi4py: an image without it cannot show its PML)"
        )
    return problems


def declared_fabric(config: dict) -> str:
    """The fabric an imagekit image declares (io.imagekit.fabric); tcp when it says none."""
    return "rdma" if DeclaredFabric.of(config.get("Labels") or {}).rdma else "tcp"


@dataclass
class RankRecord:
    rank: int
    size: int
    local_rank: int
    host: str
    allreduce: int | None
    uid: int | None = None


@dataclass
class SmokeResult:
    passed: bool
    topology: Topology
    command: list[str]
    ranks: list[RankRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    exit_code: int | None = None
    output: list[str] = field(default_factory=list)
    pml: dict[int, str] = field(default_factory=dict)  # rank -> the PML it selected (rdma)


# -- the seed's FAQ, as evidence patterns ------------------------------------------------------

DIAGNOSES = [
    (
        re.compile(r"Missing privilege separation directory"),
        "R6: sshd died: /run/sshd is missing (mkdir -p /run/sshd && chmod 0755 /run/sshd)",
    ),
    (
        re.compile(r"no hostkeys available"),
        "R4: sshd cannot start: no host keys in the image (ssh-keygen -A at build time)",
    ),
    # The requirement units' own telltales (imagekit/requirements), in registry order.
    *((re.compile(unit.symptom), unit.diagnosis) for unit in with_symptoms()),
    (
        re.compile(r"Permissions 0\d+ for '[^']*' are too open"),
        "K5: the ssh client ignores the mounted private key: it is readable by its group, and "
        "ssh accepts a key its own user owns only at 0600. Trainer v2 lays its Secret out "
        "(0640, fsGroup) for a non-root user: run as that user, or give root a 0600 copy",
    ),
    (
        re.compile(r"Permission denied \(publickey"),
        "R3/R7: publickey denied (is the key in /root/.ssh/authorized_keys? StrictModes no?)",
    ),
    (
        re.compile(r"Connection refused"),
        "R4/R10: nothing listens on the ssh port (sshd not running, or another port)",
    ),
    (
        re.compile(
            r"Could not resolve hostname|Name or service not known|Temporary failure in name"
        ),
        "W3: a worker in the hostfile does not resolve",
    ),
    (
        re.compile(r"mpirun has detected an attempt to run as root"),
        "R8/L14: mpirun refuses to run as root (--allow-run-as-root or OMPI_ALLOW_RUN_AS_ROOT=1)",
    ),
    (
        re.compile(r"ORTE was unable to reliably start one or more daemons"),
        "W4: mpirun could not start its daemons on the workers over ssh",
    ),
]


def diagnose(*texts: str) -> list[str]:
    found = []
    for pattern, meaning in DIAGNOSES:
        for text in texts:
            match = pattern.search(text)
            if match:
                line = next(ln for ln in text.splitlines() if pattern.search(ln)).strip()
                found.append(f"{meaning} -- evidence: {line[:200]}")
                break
    return found


# -- the run ------------------------------------------------------------------------------


def declared_port(config: dict) -> int | None:
    """The sshd port an imagekit image declares (io.imagekit.ssh.port); None means 22."""
    value = (config.get("Labels") or {}).get(SSH_PORT_LABEL, "")
    return int(value) if value.isdigit() and value != "22" else None


def declared_openmpi_major(config: dict) -> int | None:
    """The Open MPI major an imagekit image declares (io.imagekit.version.openmpi); None for
    an image without the label (one imagekit did not build, or adapted)."""
    return openmpi_major((config.get("Labels") or {}).get(OPENMPI_LABEL, ""))


MPIRUN_VERSION = re.compile(r"\(Open MPI\) (\d+)\.")


def running_openmpi_major(launcher: Container) -> int:
    """The Open MPI major `mpirun --version` reports in the launcher, for an image that does
    not declare one: Open MPI 5's mpirun rejects Open MPI 4's launch line (-quiet, K3). An
    answer that names no version (no mpirun at all) gets Open MPI 4's line, and the run's own
    diagnosis."""
    rc, output = launcher.read(["mpirun", "--version"])
    found = MPIRUN_VERSION.search(output) if rc == 0 else None
    return int(found.group(1)) if found else 4


def check_options(options: SmokeOptions) -> None:
    if not 1 <= options.workers <= 16:
        raise UsageError(f"--workers {options.workers}: must be 1..16")
    if not 1 <= options.slots <= 64:
        raise UsageError(f"--slots {options.slots}: must be 1..64")
    if options.keys not in ("mounted", "image"):
        raise UsageError(f"--keys {options.keys}: must be mounted or image")
    if options.operator not in operators.OPERATORS:
        raise UsageError(
            f"--operator {grammar.shown(options.operator)}: must be one of "
            f"{', '.join(operators.NAMES)}"
        )
    if not size_in_bytes(options.shm_size):
        raise UsageError(
            f"--shm-size {grammar.shown(options.shm_size)}: not a size like 1g, 512m or 1073741824"
        )
    for source, _ in options.copies:
        if not source.exists():
            raise UsageError(f"--copy {source}: no such file or directory")


def smoke(
    image: str, options: SmokeOptions, report: Reporter, engine: Engine | None = None
) -> SmokeResult:
    """`engine`: the engine to use (default: connect to DOCKER_HOST); unit tests pass a fake
    with the same interface."""
    check_options(options)
    engine = engine or Engine.connect()
    info = engine.inspect_image(image)
    env = dict(item.split("=", 1) for item in info["Config"].get("Env") or [] if "=" in item)
    options = replace(
        options,
        port=options.port or declared_port(info["Config"]),
        fabric=options.fabric or declared_fabric(info["Config"]),
    )
    run_as = _user_ids(engine, image, options.user)
    job = f"imagekit-smoke-{uuid.uuid4().hex[:8]}"
    top = topology(job, options.workers, options.slots, options.operator)
    declared_major = declared_openmpi_major(info["Config"])
    command = list(options.command)
    if not command and declared_major is not None:
        command = default_command(top, env, options, declared_major)
    result = SmokeResult(False, top, command)
    label = {SMOKE_LABEL: job}
    started = time.monotonic()
    workdir = workdirs.make("smoke")
    try:
        engine.create_network(job, label)
        volumes = {}
        if options.keys == "mounted":
            # mpi-operator hands a non-root user its own Secret files; Trainer v2 keeps them
            # root's, readable through the group (fsGroup, 0640: K2).
            operator = operator_of(options)
            group_readable = operator.secret_files == "group-readable"
            owner = None if run_as is None else ((0, run_as[1]) if group_readable else run_as)
            secret = make_secret(
                engine,
                image,
                workdir / "ssh",
                world_writable=True,
                labels=label,
                # K2: Trainer's Secret holds an ECDSA P-521 key under the name id_rsa, 0640
                key_type=operator.key_type,
                private_mode=operator.key_mode,
                public_mode=operator.key_mode,  # the volume's defaultMode
                owner=owner,
            )
            volumes = {str(secret): options.key_dir}
            report(Message(f"{job}: fresh key pair mounted at {options.key_dir} like a Secret"))
        user = None if run_as is None else f"{run_as[0]}:{run_as[1]}"
        workers = [
            _start_worker(engine, image, top, i, volumes, options, label, user)
            for i in range(options.workers)
        ]
        launcher = _start_launcher(engine, image, top, volumes, options, label, user)
        if not command:  # an image that declares no Open MPI: ask its mpirun
            major = running_openmpi_major(launcher)
            command = result.command = default_command(top, env, options, major)
        for box in [*workers, launcher]:
            if not box.exited():  # a worker whose sshd died is diagnosed below
                _copy_in(box, options)
        result.timings["containers up"] = time.monotonic() - started
        report(
            Message(
                f"{job}: {len(workers)} workers and a launcher up "
                f"({result.timings['containers up']:.1f}s)"
            )
        )
        unready = _wait_for_sshd(launcher, workers, top, report, options.port)
        result.timings["sshd ready"] = time.monotonic() - started
        if unready:
            result.problems = unready
            return result
        logins_before = [ssh_logins(box.logs()) for box in workers]
        _run(launcher, command, options, result, report)
        result.timings["mpirun"] = time.monotonic() - started - result.timings["sshd ready"]
        reached = [
            name
            for name, box, before in zip(top.workers, workers, logins_before, strict=True)
            if ssh_logins(box.logs()) > before
        ]
        expected_uid = 0 if run_as is None else run_as[0]
        _verify(result, logs=_worker_logs(workers), reached=reached, uid=expected_uid)
        return result
    finally:
        engine.clean_up_labelled(f"{SMOKE_LABEL}={job}", report)
        workdirs.remove(workdir)
        result.timings["total (with cleanup)"] = time.monotonic() - started


def _user_ids(engine: Engine, image: str, user: str) -> tuple[int, int] | None:
    """(uid, gid) of a non-root profile's user in the image; None for root."""
    if user == "root":
        return None
    try:
        out = engine.run_once(image, ["/bin/sh", "-c", f"id -u {user} && id -g {user}"], user="0")
    except ImagekitError:
        raise UsageError(
            f"{image}: no user {user} in the image, and the profile runs sshd and mpirun as "
            "it (K1: runAsUser)"
        ) from None
    uid, gid = out.split()
    return int(uid), int(gid)


def worker_command(options: SmokeOptions) -> list[str]:
    """The operator's worker command: `sshd -De`, with `-f FILE` for K1's non-root sshd."""
    config = ["-f", options.sshd_config] if options.sshd_config else []
    return [*WORKER_COMMAND, *config]


def _start_worker(engine, image, top, index, volumes, options, label, user=None) -> Container:
    name = top.workers[index]
    command = worker_command(options)
    return engine.start_container(
        image,
        entrypoint=command[:1],  # the operator's pod command bypasses ENTRYPOINT
        command=command[1:],
        user=user,  # runAsUser
        name=name,
        hostname=name,
        # The operator's headless service gives each worker this FQDN (the hostfile uses it).
        network=top.job,
        aliases=[name, top.fqdns[index]],
        volumes=volumes,
        shm_size=size_in_bytes(options.shm_size),
        labels=label,
        environment=dict(options.env) or None,
        gpus=options.gpus,
    )


def _start_launcher(engine, image, top, volumes, options, label, user=None) -> Container:
    box = engine.start_container(
        image,
        entrypoint=KEEPALIVE,
        command=[],
        user=user,  # runAsUser: mpirun and its ssh run as the profile's user
        name=top.launcher,
        hostname=top.launcher,
        network=top.job,
        volumes=volumes,
        shm_size=size_in_bytes(options.shm_size),
        labels=label,
        environment={**launcher_env(options, top), **dict(options.env)},
    )
    box.put_file(
        OPERATOR_HOSTFILE, top.hostfile().encode(), mode=operator_of(options).hostfile_mode
    )
    return box


def operator_of(options: SmokeOptions) -> operators.Operator:
    return operators.OPERATORS[options.operator]


def launcher_env(options: SmokeOptions, top: Topology | None = None) -> dict[str, str]:
    """What the operator sets on a launcher: mpi-operator v2 the default hostfile and FQDN
    hostnames; Trainer v2 (K2) also the default slots and ssh connection attempts."""
    env = {
        "OMPI_MCA_orte_default_hostfile": OPERATOR_HOSTFILE,
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
    }
    rsh_args = [f"-p {options.port}"] if options.port is not None else []
    operator = operator_of(options)
    if operator.sets_default_slots:
        env["OMPI_MCA_orte_set_default_slots"] = str(top.slots if top else options.slots)
    if operator.ssh_connection_attempts:
        rsh_args.insert(0, f"-o ConnectionAttempts={operator.ssh_connection_attempts}")
    if rsh_args:
        env["OMPI_MCA_plm_rsh_args"] = " ".join(rsh_args)
    return env


def _copy_in(box: Container, options: SmokeOptions) -> None:
    probe = data_text("probe.py").encode()
    box.put_file(PROBE_PATH, probe)
    for source, target in options.copies:
        files = (
            [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
        )
        for path in files:
            dest = (
                target if source.is_file() else f"{target.rstrip('/')}/{path.relative_to(source)}"
            )
            box.put_file(dest, path.read_bytes(), mode=0o755)


def _wait_for_sshd(launcher, workers, top, report, port, attempts: int = 20) -> list[str]:
    """Bounded retry from the launcher, with the image's own ssh client settings."""
    pending = dict(zip(top.fqdns, workers, strict=True))
    last: dict[str, str] = {}
    port_args = ["-p", str(port)] if port else []
    for _ in range(attempts):
        for fqdn in list(pending):
            code, out = launcher.exec(
                ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", *port_args, fqdn, "true"]
            )
            if code == 0:
                report(Message(f"sshd answers on {fqdn}"))
                del pending[fqdn]
            else:
                last[fqdn] = out.strip()
        if not pending:
            return []
        if any(box.exited() for box in pending.values()) and len(last) == len(pending):
            break  # a dead sshd will not come back: fail fast
        time.sleep(0.5)
    problems = []
    for fqdn, box in pending.items():
        logs = box.logs()
        state = "exited" if box.exited() else "running"
        reasons = diagnose(logs, last.get(fqdn, "")) or [f"ssh said: {last.get(fqdn, '')[:200]}"]
        problems.append(f"{fqdn}: sshd did not answer (worker {state}); " + "; ".join(reasons))
    return problems


def _run(launcher: Container, command, options, result: SmokeResult, report: Reporter) -> None:
    shell = f"timeout --kill-after=10 {options.timeout} {shlex.join(command)}"
    if options.workdir:
        shell = f"cd {shlex.quote(options.workdir)} && {shell}"
    report(Message(f"launcher: {shlex.join(command)}"))

    def on_line(line: str) -> None:
        result.output.append(line)
        report(Log(line))

    result.exit_code = launcher.exec_stream(["/bin/sh", "-c", shell], on_line)


def _worker_logs(workers: list[Container]) -> str:
    return "\n".join(box.logs() for box in workers)


def parse_probe(lines: list[str]) -> list[RankRecord]:
    records = []
    for line in lines:
        _, marker, payload = line.partition("IMAGEKIT_PROBE ")
        if marker:
            record = _rank_record(payload)
            if record is not None:
                records.append(record)
    return sorted(records, key=lambda r: r.rank)


def _rank_record(payload: str) -> RankRecord | None:
    """One probe line; None for one that is not the probe's (a job's output is untrusted:
    any program may print the marker)."""
    try:
        data = json.loads(payload)
        record = RankRecord(
            int(data["rank"]),
            int(data["size"]),
            int(data["local_rank"]),
            str(data["host"]),
            data.get("allreduce"),
            data.get("uid"),
        )
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return record


# sshd -e logs each login to the worker's container log; mpirun's ssh into a worker to start
# its daemon is one. Counted before and after the command, so any command can be judged.
LOGIN = re.compile(r"Accepted (?:publickey|password|keyboard-interactive\S*) for \S+ from")


def ssh_logins(log: str) -> int:
    return len(LOGIN.findall(log))


NO_WORKER_REACHED = (
    "K3: the command exited 0 without reaching any worker (no ssh login on any of them during "
    "the run): every rank ran on the launcher. Open MPI 5 ignores the operators' "
    "OMPI_MCA_orte_default_hostfile; pass --hostfile /etc/mpi/hostfile, or set "
    "PRTE_MCA_prte_default_hostfile=/etc/mpi/hostfile in the image (Open MPI 4: check -H/--host "
    "and --hostfile in the command)"
)


def _verify(result: SmokeResult, logs: str, reached: list[str], uid: int | None = None) -> None:
    top = result.topology
    output = "\n".join(result.output)
    if result.exit_code == 124 or "time limit for job execution has been reached" in output:
        result.problems.append("mpirun timed out (no output usually means a host-key prompt, R9)")
    elif result.exit_code != 0:
        result.problems.append(f"the command exited {result.exit_code}")
    elif not reached:
        result.problems.append(NO_WORKER_REACHED)
    result.ranks = parse_probe(result.output)
    if result.ranks or PROBE_PATH in result.command:
        # The probe ran (the default command, or a user's line running it): check placement.
        result.problems.extend(rank_problems(result.ranks, top))
        wrong = [r.rank for r in result.ranks if uid is not None and r.uid not in (None, uid)]
        if wrong:
            result.problems.append(f"ranks {wrong} ran as another uid than {uid}")
    if "pml_base_verbose" in result.command:  # the rdma line: which PML carried the job
        result.pml = pml_selected(output)
        result.problems.extend(pml_problems(result.pml, len(top.workers) * top.slots))
    if result.problems:
        result.problems.extend(diagnose(output, logs))
    result.passed = not result.problems


def rank_problems(ranks: list[RankRecord], top: Topology) -> list[str]:
    """Every rank must run on the host the hostfile assigns it: catches the silent
    'everything ran on the launcher / one node' failure."""
    expected = len(top.workers) * top.slots
    problems = []
    if sorted(r.rank for r in ranks) != list(range(expected)):
        problems.append(f"expected ranks 0..{expected - 1}, saw {[r.rank for r in ranks]}")
    for r in ranks:
        want = top.expected_host(r.rank)
        if r.host != want:
            where = "the launcher" if r.host == top.launcher else r.host
            problems.append(f"rank {r.rank} ran on {where}, the hostfile assigns {want}")
        if r.size != expected:
            problems.append(f"rank {r.rank} sees world size {r.size}, expected {expected}")
        if r.local_rank != r.rank % top.slots:
            problems.append(
                f"rank {r.rank} has local rank {r.local_rank}, expected {r.rank % top.slots}"
            )
        if r.allreduce is not None and r.allreduce != expected:
            problems.append(f"rank {r.rank}: allreduce gave {r.allreduce}, expected {expected}")
    return problems
