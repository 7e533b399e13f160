"""`imagekit smoke`: run an MPIJob the way the operator does (W1-W6), in real containers on
one machine: a private network, N workers started with `/usr/sbin/sshd -De` (the operator's
worker command, bypassing the entrypoint), a launcher with the operator's hostfile at
/etc/mpi/hostfile, real ssh and a real mpirun. Everything it creates carries one label and
is removed on success, failure, timeout and Ctrl-C."""

from __future__ import annotations

import json
import re
import shlex
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from imagekit.engine import KEEPALIVE, Engine, Log, Message, Reporter
from imagekit.errors import ImagekitError, UsageError
from imagekit.plan import LABEL_PREFIX
from imagekit.secrets import make_secret

SMOKE_LABEL = f"{LABEL_PREFIX}.smoke"
HOSTFILE = "/etc/mpi/hostfile"
PROBE_PATH = "/opt/imagekit-smoke/probe.py"


class SmokeFailedError(ImagekitError):
    """The MPIJob did not run as the hostfile says (exit code 9)."""

    exit_code = 9
    debug_tip = False


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


@dataclass(frozen=True)
class Topology:
    job: str
    workers: tuple[str, ...]  # hostnames, as the pods' hostnames
    fqdns: tuple[str, ...]  # what the operator writes into the hostfile
    slots: int

    @property
    def launcher(self) -> str:
        return f"{self.job}-launcher"

    def hostfile(self) -> str:
        return "".join(f"{fqdn} slots={self.slots}\n" for fqdn in self.fqdns)

    def expected_host(self, rank: int) -> str:
        """-map-by slot fills each worker's slots in hostfile order."""
        return self.workers[rank // self.slots]


def topology(job: str, workers: int, slots: int) -> Topology:
    names = tuple(f"{job}-worker-{i}" for i in range(workers))
    fqdns = tuple(f"{name}.{job}-worker.default.svc" for name in names)
    return Topology(job, names, fqdns, slots)


def default_command(top: Topology, env: dict[str, str]) -> list[str]:
    """The seed's recommended launch line (L1-L8, L14) running the built-in probe."""
    ranks = len(top.workers) * top.slots
    line = [
        "mpirun",
        "-np",
        str(ranks),
        "-npernode",
        str(top.slots),
        "--hostfile",
        HOSTFILE,
        "--allow-run-as-root",
        "-bind-to",
        "none",
        "-map-by",
        "slot",
        "-mca",
        "pml",
        "ob1",
        "-mca",
        "btl",
        "^openib",
        "-x",
        "PATH",
    ]
    if "LD_LIBRARY_PATH" in env:  # -x of an unset variable only prints a warning
        line += ["-x", "LD_LIBRARY_PATH"]
    return line + ["--tag-output", "python3", PROBE_PATH]


@dataclass
class RankRecord:
    rank: int
    size: int
    local_rank: int
    host: str
    allreduce: int | None


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
    (
        re.compile(r"Host key verification failed|Are you sure you want to continue connecting"),
        "R9: ssh stops at a host-key prompt (StrictHostKeyChecking no, UserKnownHostsFile "
        "/dev/null in /etc/ssh/ssh_config)",
    ),
    (
        re.compile(r"Authentication refused: bad ownership or modes"),
        "R5: sshd refuses the mounted keys: StrictModes is on (set StrictModes no)",
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


def check_options(options: SmokeOptions) -> None:
    if not 1 <= options.workers <= 16:
        raise UsageError(f"--workers {options.workers}: must be 1..16")
    if not 1 <= options.slots <= 64:
        raise UsageError(f"--slots {options.slots}: must be 1..64")
    if options.keys not in ("mounted", "image"):
        raise UsageError(f"--keys {options.keys}: must be mounted or image")
    for source, _ in options.copies:
        if not source.exists():
            raise UsageError(f"--copy {source}: no such file or directory")


def smoke(image: str, options: SmokeOptions, report: Reporter) -> SmokeResult:
    check_options(options)
    engine = Engine.connect()
    info = engine.inspect_image(image)
    env = dict(item.split("=", 1) for item in info["Config"].get("Env") or [] if "=" in item)
    job = f"imagekit-smoke-{uuid.uuid4().hex[:8]}"
    top = topology(job, options.workers, options.slots)
    command = list(options.command) or default_command(top, env)
    result = SmokeResult(False, top, command)
    label = {SMOKE_LABEL: job}
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix=f"{job}-"))
    try:
        engine.network(job, **label)
        volumes = {}
        if options.keys == "mounted":
            secret = make_secret(engine, image, workdir / "ssh", world_writable=True)
            volumes = {str(secret): {"bind": "/root/.ssh", "mode": "ro"}}
            report(Message(f"{job}: fresh key pair mounted at /root/.ssh like a Secret"))
        workers = [
            _start_worker(engine, image, top, i, volumes, options, label)
            for i in range(options.workers)
        ]
        launcher = _start_launcher(engine, image, top, volumes, options, label)
        for box in [*workers, launcher]:
            if not _exited(box):  # a worker whose sshd died is diagnosed below
                _copy_in(engine, box, options)
        result.timings["containers up"] = time.monotonic() - started
        report(
            Message(
                f"{job}: {len(workers)} workers and a launcher up "
                f"({result.timings['containers up']:.1f}s)"
            )
        )
        unready = _wait_for_sshd(engine, launcher, workers, top, report, options.port)
        result.timings["sshd ready"] = time.monotonic() - started
        if unready:
            result.problems = unready
            return result
        _run(engine, launcher, command, options, result, report)
        result.timings["mpirun"] = time.monotonic() - started - result.timings["sshd ready"]
        _verify(result, logs=_worker_logs(workers))
        return result
    finally:
        engine.remove_labelled(f"{SMOKE_LABEL}={job}")
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
        result.timings["total (with cleanup)"] = time.monotonic() - started


def _start_worker(engine, image, top, index, volumes, options, label) -> Any:
    name = top.workers[index]
    box = engine.client.containers.create(
        image,
        entrypoint=[
            "/usr/sbin/sshd"
        ],  # what mpi-operator runs: the pod command bypasses ENTRYPOINT
        command=["-De"],
        name=name,
        hostname=name,
        volumes=volumes,
        shm_size=options.shm_size,
        labels=label,
        network=top.job,
    )
    # The operator's headless service gives each worker this FQDN (the hostfile uses it).
    network = engine.client.networks.get(top.job)
    network.disconnect(box)
    network.connect(box, aliases=[name, top.fqdns[index]])
    box.start()
    return box


def _start_launcher(engine, image, top, volumes, options, label) -> Any:
    box = engine.client.containers.create(
        image,
        entrypoint=KEEPALIVE,
        command=[],
        name=top.launcher,
        hostname=top.launcher,
        volumes=volumes,
        shm_size=options.shm_size,
        labels=label,
        network=top.job,
        environment=launcher_env(options),
    )
    box.start()
    engine.put_file(box, HOSTFILE, top.hostfile().encode())
    return box


def launcher_env(options: SmokeOptions) -> dict[str, str]:
    """What mpi-operator sets on a launcher (v2: the default hostfile, FQDN hostnames)."""
    env = {"OMPI_MCA_orte_default_hostfile": HOSTFILE, "OMPI_MCA_orte_keep_fqdn_hostnames": "true"}
    if options.port is not None:
        env["OMPI_MCA_plm_rsh_args"] = f"-p {options.port}"
    return env


def _copy_in(engine: Engine, box: Any, options: SmokeOptions) -> None:
    probe = resources.files("imagekit").joinpath("data/probe.py").read_bytes()
    engine.put_file(box, PROBE_PATH, probe)
    for source, target in options.copies:
        files = (
            [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
        )
        for path in files:
            dest = (
                target if source.is_file() else f"{target.rstrip('/')}/{path.relative_to(source)}"
            )
            engine.put_file(box, dest, path.read_bytes(), mode=0o755)


def _wait_for_sshd(engine, launcher, workers, top, report, port, attempts: int = 20) -> list[str]:
    """Bounded retry from the launcher, with the image's own ssh client settings."""
    pending = dict(zip(top.fqdns, workers, strict=True))
    last: dict[str, str] = {}
    port_args = ["-p", str(port)] if port else []
    for _ in range(attempts):
        for fqdn in list(pending):
            code, out = launcher.exec_run(
                ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", *port_args, fqdn, "true"]
            )
            if code == 0:
                report(Message(f"sshd answers on {fqdn}"))
                del pending[fqdn]
            else:
                last[fqdn] = out.decode(errors="replace").strip()
        if not pending:
            return []
        if any(_exited(box) for box in pending.values()) and len(last) == len(pending):
            break  # a dead sshd will not come back: fail fast
        time.sleep(0.5)
    problems = []
    for fqdn, box in pending.items():
        logs = box.logs().decode(errors="replace")
        state = "exited" if _exited(box) else "running"
        reasons = diagnose(logs, last.get(fqdn, "")) or [f"ssh said: {last.get(fqdn, '')[:200]}"]
        problems.append(f"{fqdn}: sshd did not answer (worker {state}); " + "; ".join(reasons))
    return problems


def _exited(box: Any) -> bool:
    box.reload()
    return box.status in ("exited", "dead")


def _run(engine, launcher, command, options, result: SmokeResult, report: Reporter) -> None:
    shell = f"timeout --kill-after=10 {options.timeout} {shlex.join(command)}"
    if options.workdir:
        shell = f"cd {shlex.quote(options.workdir)} && {shell}"
    report(Message(f"launcher: {shlex.join(command)}"))
    exec_id = engine.api.exec_create(launcher.id, ["/bin/sh", "-c", shell])["Id"]
    buffer = ""
    for chunk in engine.api.exec_start(exec_id, stream=True):
        buffer += chunk.decode(errors="replace")
        *lines, buffer = buffer.split("\n")
        for line in lines:
            result.output.append(line)
            report(Log(line))
    if buffer:
        result.output.append(buffer)
        report(Log(buffer))
    result.exit_code = engine.api.exec_inspect(exec_id)["ExitCode"]


def _worker_logs(workers: list[Any]) -> str:
    return "\n".join(box.logs().decode(errors="replace") for box in workers)


def parse_probe(lines: list[str]) -> list[RankRecord]:
    records = []
    for line in lines:
        _, marker, payload = line.partition("IMAGEKIT_PROBE ")
        if marker:
            data = json.loads(payload)
            records.append(
                RankRecord(
                    data["rank"],
                    data["size"],
                    data["local_rank"],
                    data["host"],
                    data.get("allreduce"),
                )
            )
    return sorted(records, key=lambda r: r.rank)


def _verify(result: SmokeResult, logs: str) -> None:
    top = result.topology
    output = "\n".join(result.output)
    if result.exit_code == 124:
        result.problems.append("mpirun timed out (no output usually means a host-key prompt, R9)")
    elif result.exit_code != 0:
        result.problems.append(f"the command exited {result.exit_code}")
    result.ranks = parse_probe(result.output)
    if result.ranks or PROBE_PATH in result.command:
        # The probe ran (the default command, or a user's line running it): check placement.
        result.problems.extend(rank_problems(result.ranks, top))
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
