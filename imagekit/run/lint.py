"""A linter for real mpirun command lines (L1-L14, K3): parse them the way a shell and mpirun
would, then judge each against the seed's rules. Pure: text in, findings out."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from imagekit.errors import UsageError
from imagekit.ompi import OMPI5_GONE, OMPI5_MCA_RENAMES, OPERATOR_HOSTFILE
from imagekit.requirements.fabric import fabric_off

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
    fabric: str = "tcp"  # tcp | rdma (F1): on rdma, what turns the fabric off is an error


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
            f"remove --host; the operator writes {OPERATOR_HOSTFILE}",
        )
    for values in call.values("hostfile", "machinefile", "default-hostfile"):
        if values and values[0] != OPERATOR_HOSTFILE:
            yield Finding(
                "L2",
                "warning",
                f"hostfile {values[0]} is not the operator's",
                f"--hostfile {OPERATOR_HOSTFILE}",
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
    if ctx.fabric == "rdma":  # L4/L5 are the TCP clusters' rules; rule_fabric judges these
        return
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


def rule_fabric(call, ctx):
    """F4: on an RDMA cluster, a line that turns the fabric off still runs, several times
    slower, with no error: each such setting is one, named with its cost."""
    if ctx.fabric != "rdma":
        return
    settings = dict(v[0].split("=", 1) for v in call.values("x") if v and "=" in v[0])
    mca = call.mca()
    if "pml" in mca:
        settings["OMPI_MCA_pml"] = mca["pml"]
    for name, value, why in fabric_off(settings):
        shown = f"-mca pml {value}" if name == "OMPI_MCA_pml" else f"-x {name}={value}"
        yield Finding(
            "F4",
            "error",
            f"{shown}: {why}; on RDMA the job runs over TCP, several times slower, no error",
            "-mca pml ucx, and no NCCL_IB_DISABLE, NCCL_NET=Socket or TCP-only UCX_TLS",
        )
    btl = mca.get("btl", "")
    if mca.get("pml") != "ucx" and btl.startswith("^") and "openib" in btl[1:].split(","):
        yield Finding(
            "F4",
            "warning",
            "-mca btl ^openib without -mca pml ucx: Open MPI 4 is left with TCP unless it picks "
            "UCX itself",
            "-mca pml ucx (and UCX_NET_DEVICES for the HCA port)",
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
    rule_fabric,
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
