"""Smoke's orchestration against a fake engine with the real engine's interface (Container
handles with exec/exec_stream/logs/put_file; networks; labelled cleanup): which containers
it starts and how, what it writes where, how it fails, and that it always cleans up.
The same paths run for real in tests/integration/test_smoke.py."""

from __future__ import annotations

import json
import re

import pytest

from imagekit.errors import EngineUnavailableError, UsageError
from imagekit.ompi import OPERATOR_HOSTFILE
from imagekit.operators import WORKER_COMMAND
from imagekit.run.smoke import PROBE_PATH, SMOKE_LABEL, SmokeOptions, smoke

KEYGEN_OUTPUT = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n"
    "ssh-rsa AAAA imagekit-run-key\n"
)


class FakeContainer:
    def __init__(self, engine, name, kwargs):
        self.engine, self.name, self.id, self.kwargs = engine, name, f"id-{name}", kwargs
        self.files: dict[str, bytes] = {}
        self.execs: list[list[str]] = []
        self.state = "running"

    def exec(self, argv, *, user=None):
        self.execs.append(argv)
        if argv[0] == "ssh":
            target = argv[-2]
            worker = self.engine.by_fqdn(target)
            if worker is None or worker.state != "running":
                return 255, f"ssh: connect to host {target} port 22: Connection refused"
            return 0, ""
        return 0, ""

    def read(self, argv, *, user=None):
        if argv == ["mpirun", "--version"]:
            self.execs.append(argv)
            return 0, self.engine.mpirun_version
        return self.exec(argv, user=user)

    def exec_stream(self, argv, on_line):
        self.execs.append(argv)
        return self.engine.run_command(self, argv, on_line)

    def logs(self):
        return self.engine.worker_logs.get(self.name, "")

    def exited(self):
        return self.state != "running"

    def put_file(self, path, data, mode=0o644):
        self.files[path] = data


class FakeEngine:
    """Just enough engine: records what smoke asks for; `run_command` plays mpirun."""

    def __init__(
        self, labels=None, dead_workers=(), mpirun_ranks=None, fail_run=None, mpirun_version=""
    ):
        self.labels = labels or {}
        self.mpirun_version = mpirun_version  # what `mpirun --version` prints in the launcher
        self.containers: list[FakeContainer] = []
        self.started: list[FakeContainer] = []
        self.networks: list[tuple[str, dict]] = []
        self.dead_workers = set(dead_workers)
        self.mpirun_ranks = mpirun_ranks
        self.fail_run = fail_run
        self.removed: list[str] = []
        self.worker_logs: dict[str, str] = {}

    def inspect_image(self, ref):
        return {"Id": "sha256:fake", "Config": {"Env": ["PATH=/usr/bin"], "Labels": self.labels}}

    def create_network(self, name, labels):
        self.networks.append((name, labels))

    def run_once(self, image, command, **kwargs):
        return KEYGEN_OUTPUT

    def start_container(self, image, **kwargs):
        box = FakeContainer(self, kwargs["name"], kwargs)
        if any(kwargs["name"].endswith(f"worker-{i}") for i in self.dead_workers):
            box.state = "exited"
            self.worker_logs[box.name] = "Missing privilege separation directory: /run/sshd"
        self.containers.append(box)
        self.started.append(box)  # kept after cleanup, for the assertions
        return box

    def by_fqdn(self, fqdn):
        return next((c for c in self.containers if fqdn in (c.kwargs.get("aliases") or [])), None)

    def run_command(self, launcher, argv, on_line):
        if self.fail_run:
            raise self.fail_run
        workers = [c for c in self.containers if "worker" in c.name]
        per_node = re.search(r"-npernode (\d+)|ppr:(\d+):node", argv[-1])  # Open MPI 4 or 5
        slots = int(per_node.group(1) or per_node.group(2)) if per_node else 1
        hosts = self.mpirun_ranks or [w.name for w in workers for _ in range(slots)]
        for name in sorted(set(hosts) & {w.name for w in workers}):
            self.ssh_login(name)  # mpirun starts its daemon there over ssh
        for rank, host in enumerate(hosts):
            record = {"rank": rank, "size": len(hosts), "local_rank": rank % slots, "host": host}
            on_line(f"[1,{rank}]<stdout>:IMAGEKIT_PROBE {json.dumps(record)}")
        return 0

    def ssh_login(self, worker: str) -> None:
        line = "Accepted publickey for root from 172.18.0.4 port 40022 ssh2: RSA SHA256:x\n"
        self.worker_logs[worker] = self.worker_logs.get(worker, "") + line

    def clean_up_labelled(self, label, report):
        key, value = label.split("=")
        self.removed.append(label)
        self.containers = [c for c in self.containers if c.kwargs["labels"].get(key) != value]
        self.networks = [n for n in self.networks if n[1].get(key) != value]
        return True


def run(engine, **options):
    return smoke("img:1", SmokeOptions(**options), lambda event: None, engine=engine)


def test_workers_launcher_and_hostfile_as_the_operator_makes_them():
    engine = FakeEngine()
    seen = {}
    original = engine.run_command

    def spy(launcher, argv, on_line):
        seen["containers"] = list(engine.containers)
        seen["networks"] = list(engine.networks)
        return original(launcher, argv, on_line)

    engine.run_command = spy
    result = run(engine, workers=2, slots=2)
    assert result.passed, result.problems
    workers = [c for c in seen["containers"] if "worker" in c.name]
    (launcher,) = [c for c in seen["containers"] if c.name.endswith("-launcher")]
    job = result.topology.job
    assert seen["networks"] == [(job, {SMOKE_LABEL: job})]
    for i, box in enumerate(workers):
        assert [box.kwargs["entrypoint"][0], *box.kwargs["command"]] == list(WORKER_COMMAND)
        assert box.kwargs["aliases"] == [box.name, result.topology.fqdns[i]]
        assert list(box.kwargs["volumes"].values()) == ["/root/.ssh"]  # the mounted Secret
        assert box.kwargs["labels"] == {SMOKE_LABEL: job}
    assert launcher.files[OPERATOR_HOSTFILE].decode() == result.topology.hostfile()
    assert PROBE_PATH in launcher.files
    assert launcher.kwargs["environment"]["OMPI_MCA_orte_default_hostfile"] == OPERATOR_HOSTFILE
    assert engine.containers == [] and engine.networks == []  # cleaned up
    assert [r.host for r in result.ranks] == [workers[0].name] * 2 + [workers[1].name] * 2


def test_ranks_on_the_launcher_fail_the_run_and_still_clean_up():
    engine = FakeEngine()
    engine.mpirun_ranks = None

    def on_launcher(launcher, argv, on_line):
        for rank in range(2):
            record = {"rank": rank, "size": 2, "local_rank": rank, "host": launcher.name}
            on_line(f"IMAGEKIT_PROBE {json.dumps(record)}")
        return 0

    engine.run_command = on_launcher
    result = run(engine, workers=1, slots=2)
    assert not result.passed
    assert any("ran on the launcher" in p for p in result.problems)
    assert engine.containers == [] and engine.networks == []


def test_a_dead_worker_is_diagnosed_without_running_mpirun():
    engine = FakeEngine(dead_workers={1})
    result = run(engine, workers=2, slots=1)
    assert not result.passed and result.exit_code is None  # mpirun never ran
    (problem,) = result.problems
    assert "worker-1" in problem and "worker exited" in problem and "R6" in problem
    assert engine.containers == []


def test_the_images_declared_port_reaches_ssh_and_mpirun():
    engine = FakeEngine(labels={"io.imagekit.ssh.port": "2222"})
    result = run(engine, workers=1, slots=1)
    assert "-mca plm_rsh_args -p 2222" in " ".join(result.command)
    (launcher,) = [c for c in engine.started if c.name.endswith("-launcher")]
    waits = [argv for argv in launcher.execs if argv[0] == "ssh"]
    assert waits and all(argv[argv.index("-p") + 1] == "2222" for argv in waits)
    assert launcher.kwargs["environment"]["OMPI_MCA_plm_rsh_args"] == "-p 2222"


def test_an_open_mpi_5_image_gets_prrte_launch_line():
    engine = FakeEngine(labels={"io.imagekit.version.openmpi": "5.0.7"})
    command = " ".join(run(engine, workers=2, slots=2).command)
    assert "--map-by ppr:2:node" in command and "-quiet" not in command
    four = " ".join(run(FakeEngine(), workers=2, slots=2).command)
    assert "-npernode 2" in four and "-quiet" in four


def test_an_image_that_declares_no_open_mpi_gets_the_line_its_mpirun_takes():
    """An image imagekit did not build (or adapted) has no version label: smoke asks the
    launcher's mpirun, as Open MPI 5's rejects Open MPI 4's line (-quiet)."""
    engine = FakeEngine(mpirun_version="mpirun (Open MPI) 5.0.7\n\nReport bugs to ...\n")
    result = run(engine, workers=2, slots=2)
    assert result.passed, result.problems
    command = " ".join(result.command)
    assert "--map-by ppr:2:node" in command and "-quiet" not in command
    (launcher,) = [c for c in engine.started if c.name.endswith("-launcher")]
    assert ["mpirun", "--version"] in launcher.execs
    four = FakeEngine(mpirun_version="mpirun (Open MPI) 4.1.4\n")
    assert "-quiet" in run(four, workers=2, slots=2).command
    labelled = FakeEngine(labels={"io.imagekit.version.openmpi": "4.1.6"}, mpirun_version="x")
    run(labelled, workers=1, slots=1)
    (launcher,) = [c for c in labelled.started if c.name.endswith("-launcher")]
    assert ["mpirun", "--version"] not in launcher.execs  # the label is believed


def test_no_port_label_means_port_22_and_no_override():
    engine = FakeEngine()
    result = run(engine, workers=1, slots=1)
    assert "plm_rsh_args" not in " ".join(result.command)
    (launcher,) = [c for c in engine.started if c.name.endswith("-launcher")]
    assert all("-p" not in argv for argv in launcher.execs if argv[0] == "ssh")


def test_engine_lost_mid_run_propagates_after_cleanup():
    engine = FakeEngine(fail_run=EngineUnavailableError("exec in launcher failed: went away"))
    with pytest.raises(EngineUnavailableError):
        run(engine, workers=1, slots=1)
    assert engine.removed and engine.containers == []


def test_a_command_that_never_reaches_a_worker_fails_with_the_open_mpi_5_diagnosis():
    """K3: Open MPI 5 ignores OMPI_MCA_orte_default_hostfile, so `mpirun -n 2 app` runs both
    ranks on the launcher and exits 0. A user's command prints nothing about hosts: the
    workers' sshd logs (no login during the run) are the evidence."""
    engine = FakeEngine()
    engine.run_command = lambda launcher, argv, on_line: (on_line("hello from rank 0"), 0)[1]
    result = run(engine, workers=2, slots=1, command=("mpirun", "-n", "2", "./app"))
    assert not result.passed and result.exit_code == 0
    (problem,) = [p for p in result.problems if p.startswith("K3:")]
    assert "PRTE_MCA_prte_default_hostfile" in problem and "--hostfile" in problem


def test_a_users_command_that_reaches_a_worker_passes():
    engine = FakeEngine()

    def reaches_one(launcher, argv, on_line):
        engine.ssh_login(engine.containers[0].name)
        return 0

    engine.run_command = reaches_one
    result = run(engine, workers=2, slots=1, command=("mpirun", "./app"))
    assert result.passed, result.problems


def test_env_reaches_every_container_and_the_ranks_and_gpus_the_workers():
    engine = FakeEngine()
    result = run(engine, env=(("DS_ACCELERATOR", "cpu"),), gpus="all")
    assert result.passed, result.problems
    workers = [c for c in engine.started if "worker" in c.name]
    (launcher,) = [c for c in engine.started if c.name.endswith("-launcher")]
    for box in (*workers, launcher):
        assert box.kwargs["environment"]["DS_ACCELERATOR"] == "cpu"
    # the ranks on the workers get it from mpirun, as sshd passes no container environment
    assert "-x DS_ACCELERATOR" in " ".join(result.command)
    assert all(box.kwargs["gpus"] == "all" for box in workers)
    assert "gpus" not in launcher.kwargs  # mpi-operator's launcher requests no GPU


@pytest.mark.parametrize("size", ["lots", "1Gx", "1m512k", "0", "1..5g", "-1g"])
def test_a_shm_size_the_engine_client_cannot_read_is_refused_before_anything_starts(size):
    """docker-py would refuse it only when the first container is made (exit 4, after the key
    pair and the network): now a usage error naming the flag, and nothing made."""
    engine = FakeEngine()
    with pytest.raises(UsageError, match=f"--shm-size {size}: not a size like 1g"):
        run(engine, shm_size=size)
    assert engine.containers == [] and engine.networks == []


@pytest.mark.parametrize(
    "size, expected",
    [
        ("1g", 1 << 30),
        ("512m", 512 << 20),
        ("2G", 2 << 30),
        ("1.5g", 3 << 29),
        ("1gb", 1 << 30),
        ("1 GB", 1 << 30),  # `docker run --shm-size` takes a space before the unit
        ("1Gi", 1 << 30),  # and Kubernetes' spelling, as mpijob's --shm-size takes it
        ("1073741824", 1 << 30),
    ],
)
def test_shm_sizes_docker_run_takes_reach_every_container_in_bytes(size, expected):
    engine = FakeEngine()
    started, start = [], engine.start_container
    engine.start_container = lambda image, **kwargs: (
        started.append(kwargs) or start(image, **kwargs)
    )
    assert run(engine, workers=1, slots=1, shm_size=size).passed
    assert len(started) == 2 and {kwargs["shm_size"] for kwargs in started} == {expected}
