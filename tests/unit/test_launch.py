"""Launch tooling: the recommended mpirun line, the linter over real command lines (the
platform guide's own good and bad examples among them), and MPIJob manifests."""

from __future__ import annotations

import io
import json

import pytest
import yaml

from imagekit.cli.main import main
from imagekit.errors import UsageError
from imagekit.run.lint import LintContext, lint, parse
from imagekit.run.manifests import mpijob, trainjob
from imagekit.run.recommend import LaunchRequest, recommend

from ..conftest import ROOT

# The guide's "basic mpirun structure", comments after the continuation backslashes included.
SEED_BASIC = """mpirun \\
 --hostfile /etc/mpi/hostfile \\ # MPI Operator generates the worker list
 -np 4 \\ # 2 workers x 2 ranks
 -bind-to none \\ # do not fight K8s scheduling
 -map-by slot \\ # spread ranks over GPU nodes
 -x NCCL_DEBUG=INFO \\ # NCCL debugging (WARN in production)
 -x NCCL_IB_DISABLE=1 \\ # no InfiniBand
 python /app/train.py # your script"""

SEED_E1 = """mpirun -np 4 \\
 -bind-to none -map-by slot \\
 -mca pml ob1 -mca btl ^openib \\
 -x NCCL_DEBUG=INFO \\
 python /root/code/training/cifar10_deepspeed.py \\
 --deepspeed \\
 --epochs 128 \\
 --stage 2 \\
 --dtype fp16 \\
 --log-interval 100"""

SEED_BASIC_MPI = """mpirun -np 4 \\
 --hostfile /etc/mpi/hostfile \\
 --allow-run-as-root \\
 -bind-to none -map-by slot \\
 -mca pml ob1 -mca btl ^openib \\
 python /root/code/training/cifar10_deepspeed.py"""

GOOD = [
    SEED_BASIC,
    SEED_E1,
    SEED_BASIC_MPI,
    "mpirun -np 8 python train.py",  # the guide's right way (L12)
    "mpirun -np 8 bash run.sh",  # the guide's right way (L13)
    "mpirun --np 4 --hostfile /etc/mpi/hostfile --allow-run-as-root python3 t.py",
    "mpirun -n 4 --allow-run-as-root -x PATH -x LD_LIBRARY_PATH python3 t.py",
    "mpiexec -np 2 --allow-run-as-root python3 -m mypkg.train --lr 0.1",
    "/usr/bin/mpirun -np 2 --allow-run-as-root --mca pml ob1 --mca btl tcp,self python3 t.py",
    "OMPI_MCA_foo=1 mpirun -np 2 --allow-run-as-root --tag-output -quiet python3 t.py",
    "timeout 600 mpirun -np 2 --allow-run-as-root -wdir /app python3 t.py",
    "mpirun -np 4 --allow-run-as-root -x NCCL_SOCKET_IFNAME=eth0 -x 'EXTRA=a b' python t.py",
    "mpirun -np 4 --allow-run-as-root --env-file /etc/job.env python t.py",
    "mpirun -np 4 --allow-run-as-root -mca btl_tcp_if_include eth0 -- python t.py --x 1",
    "mpirun -np 4 --allow-run-as-root --bind-to=none --map-by=slot python t.py",
    "mpirun -np 2 --allow-run-as-root -timeout 3600 -mca orte_abort_on_non_zero_status 1 "
    "-mca plm_rsh_no_tree_spawn 1 python t.py",
]

# (command, L-ID that must be flagged as an error)
BAD = [
    ("mpirun -np 8 deepspeed train.py", "L12"),  # the guide's wrong way
    ("mpirun -np 8 run.sh", "L13"),  # the guide's wrong way
    ("mpirun -np 8 ./scripts/run.sh --fast", "L13"),
    ("mpirun -np 4 torchrun --nproc_per_node 2 train.py", "L12"),
    ("mpirun -np 4 python -m torch.distributed.run train.py", "L12"),
    ("mpirun -np 4 --hostfile /etc/mpi/hostfile --host a:2,b:2 python t.py", "L2"),
    ("mpirun -np 4 -H w0,w1 python t.py", "L2"),
    ("mpirun -np 4 --oversubscribe python t.py", "L3"),
    ("mpirun -np 4 -mca pml ucx python t.py", "L4"),
    ("mpirun -np 4 --mca btl openib,self python t.py", "L5"),
    ("mpirun -np 4 -mca btl tcp,openib,self python t.py", "L5"),
    ("mpirun python t.py", None),  # no -np: a warning only
]

# (command, L-ID that must be flagged as a warning)
WARN = [
    ("mpirun -np 4 -bind-to core python t.py", "L7"),
    ("mpirun -np 4 -bind-to socket python t.py", "L7"),
    ("mpirun -np 4 -map-by node python t.py", "L7"),
    ("mpirun -np 4 --map-by core python t.py", "L7"),
    ("mpirun -np 4 --allow-run-as-root python t.py", "L8"),
    ("mpirun -np 4 -v python t.py", "L9"),
    ("mpirun -np 4 --leave-sessions-attached python t.py", "L10"),
    ("mpirun -np 4 python t.py", "L14"),
    ("mpirun python t.py", "L1"),
]


def errors(text: str, **ctx) -> set[str]:
    return {f.lid for f in lint(text, LintContext(**ctx)) if f.severity == "error"}


def warnings(text: str, **ctx) -> set[str]:
    return {f.lid for f in lint(text, LintContext(**ctx)) if f.severity == "warning"}


@pytest.mark.parametrize("text", GOOD)
def test_good_commands_have_no_errors(text):
    assert errors(text) == set()


@pytest.mark.parametrize("text,lid", BAD)
def test_bad_commands_are_flagged(text, lid):
    if lid is None:
        assert errors(text) == set()
    else:
        assert lid in errors(text)


@pytest.mark.parametrize("text,lid", WARN)
def test_risky_commands_warn(text, lid):
    assert lid in warnings(text)


def test_there_are_at_least_thirty_command_lines():
    assert len(GOOD) + len(BAD) + len(WARN) >= 30


def test_np_must_match_topology():
    assert "L1" in errors("mpirun -np 8 --allow-run-as-root python t.py", workers=2, slots=2)
    assert "L1" not in errors("mpirun -np 4 --allow-run-as-root python t.py", workers=2, slots=2)


def test_root_rule_depends_on_the_image():
    text = "mpirun -np 2 -x PATH -x LD_LIBRARY_PATH python t.py"
    assert "L14" in errors(text, root_env="no")
    assert "L14" not in warnings(text, root_env="yes") | errors(text, root_env="yes")


def test_debugging_runs_may_oversubscribe():
    assert "L3" not in errors("mpirun -np 4 --oversubscribe python t.py", production=False)


def test_parser_understands_real_syntax():
    call = parse(SEED_BASIC)
    assert call.values("np") == [["4"]] and call.program == ["python", "/app/train.py"]
    call = parse("mpirun --mca pml ob1 -x 'A=b c' --bind-to=none -- python t.py -x 1")
    assert call.mca() == {"pml": "ob1"} and call.exported() == {"A"}
    assert call.values("bind-to") == [["none"]] and call.program == ["python", "t.py", "-x", "1"]
    with pytest.raises(UsageError, match="no mpirun"):
        parse("python train.py")
    with pytest.raises(UsageError, match="cannot parse"):
        parse("mpirun -np 2 'unterminated")


def test_recommended_line_lints_clean_and_follows_the_guide():
    line = recommend(LaunchRequest(workers=2, slots=4, command=("python3", "train.py"), gpu=True))
    text = line.shell()
    assert text.startswith(
        "mpirun -np 8 -npernode 4 --hostfile /etc/mpi/hostfile --allow-run-as-root"
    )
    for part in (
        "-bind-to none -map-by slot",
        "-mca pml ob1",
        "-mca btl '^openib'",
        "-x PATH -x LD_LIBRARY_PATH",
        "-x NCCL_SOCKET_IFNAME=eth0",
        "-x NCCL_IB_DISABLE=1",
        "-mca plm_rsh_no_tree_spawn 1",
        "--tag-output",
        "-timeout 3600",
        "-quiet",
    ):
        assert part in text, part
    assert lint(text, LintContext(workers=2, slots=4)) == []


def test_debug_set_and_baked_parameters():
    line = recommend(
        LaunchRequest(
            2,
            2,
            ("python3", "t.py"),
            gpu=True,
            debug=True,
            baked_mca={"pml": "ob1", "btl": "^openib"},
        )
    )
    text = line.shell()
    assert "-v --display-map --report-bindings" in text and "NCCL_DEBUG=INFO" in text
    assert "-quiet" not in text and "orte_base_help_aggregate 0" in text
    assert "-mca pml" not in text and "pml ob1" in line.notes[0]


def test_openmpi5_line_uses_prrte_names_and_lints_clean_for_5():
    """K3: each choice here was run against Open MPI 5.0.7 (Debian 13): it rejects -quiet and
    -npernode next to -map-by, and ends the job on a non-zero rank without orte_*."""
    line = recommend(LaunchRequest(2, 4, ("python3", "train.py"), openmpi_major=5))
    text = line.shell()
    assert text.startswith("mpirun -np 8 --map-by ppr:4:node --hostfile /etc/mpi/hostfile")
    assert "-mca plm_ssh_no_tree_spawn 1" in text and "--timeout 3600" in text
    for gone in ("-npernode", "-map-by slot", "-quiet", "orte_", "plm_rsh_"):
        assert gone not in text, gone
    assert any("orte_abort_on_non_zero_status" in note for note in line.notes)
    assert lint(text, LintContext(workers=2, slots=4, openmpi_major=5)) == []
    port = recommend(LaunchRequest(1, 1, ("true",), ssh_port=2222, openmpi_major=5)).shell()
    assert "-mca plm_ssh_args '-p 2222'" in port


def test_lint_knows_what_openmpi5_ignores_or_refuses():
    four_line = recommend(LaunchRequest(2, 4, ("python3", "train.py"))).shell()
    assert lint(four_line, LintContext(workers=2, slots=4, openmpi_major=4)) == []
    found = lint(four_line, LintContext(workers=2, slots=4, openmpi_major=5))
    messages = [f.message for f in found if f.lid == "K3" and f.severity == "error"]
    assert any("plm_rsh_no_tree_spawn is ignored" in m for m in messages), messages
    assert any("rejects -quiet" in m for m in messages)
    assert any("-npernode together with -map-by" in m for m in messages)
    assert not [f for f in lint(four_line, LintContext(workers=2, slots=4)) if f.lid == "K3"]


def test_cli_mpirun_takes_the_openmpi_major_from_the_recipe(capsys, monkeypatch):
    _, out, err = cli(
        capsys,
        monkeypatch,
        "mpirun",
        "--workers",
        "2",
        "--slots",
        "2",
        "--recipe",
        "recipes/deepspeed-cpu-ompi5.yaml",
        "--",
        "python3",
        "t.py",
    )
    assert "--map-by ppr:2:node" in out and "-quiet" not in out
    # the image's prte-mca-params.conf already sets the tree-spawn parameter
    assert "plm_ssh_no_tree_spawn" not in out and "plm_ssh_no_tree_spawn 1" in err


def test_scripts_get_bash():
    assert recommend(LaunchRequest(1, 2, ("run.sh",))).argv[-2:] == ["bash", "run.sh"]


def test_mpijob_follows_v2beta1_structure():
    launcher = recommend(LaunchRequest(2, 2, ("python3", "t.py"))).argv
    job = mpijob("e1", "img:1", 2, 2, launcher, gpus_per_worker=2)
    check_structure(job, MPIJOB_V2BETA1)
    spec = job["spec"]
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]
    assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert worker["volumes"][0]["emptyDir"]["medium"] == "Memory"
    assert spec["slotsPerWorker"] == 2 and spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    with pytest.raises(UsageError, match="not a Kubernetes name"):
        mpijob("Bad_Name", "img", 1, 1, launcher)


@pytest.mark.parametrize("render", ["mpijob", "trainjob"])
@pytest.mark.parametrize(
    "options,message",
    [
        ({"gpus_per_worker": -1}, "--gpus-per-worker -1: must be 0 or more"),
        ({"shm_size": "1GB"}, "--shm-size 1GB: not a Kubernetes quantity (e.g. 1Gi, 512Mi)"),
        ({"shm_size": "lots"}, "--shm-size lots: not a Kubernetes quantity"),
    ],
)
def test_job_options_the_api_server_would_refuse(render, options, message):
    launcher = recommend(LaunchRequest(2, 2, ("python3", "t.py"))).argv
    with pytest.raises(UsageError) as info:
        {"mpijob": mpijob, "trainjob": trainjob}[render]("e1", "img", 1, 1, launcher, **options)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("size", ["1Gi", "512Mi", "2G", "1.5Gi", "1073741824"])
def test_shm_size_takes_kubernetes_quantities(size):
    launcher = recommend(LaunchRequest(2, 2, ("python3", "t.py"))).argv
    job = mpijob("e1", "img", 1, 1, launcher, shm_size=size)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["volumes"][0]["emptyDir"]["sizeLimit"] == size


def test_non_root_mpijob_is_k1s_example_form():
    from imagekit.profiles import builtin_profiles

    nonroot = builtin_profiles()["kubeflow-mpi-operator-v2-nonroot"]
    launcher = recommend(LaunchRequest(2, 1, ("python3", "t.py"), ssh_port=2222)).argv
    job = mpijob("nr", "img:1", 2, 1, launcher, profile=nonroot)
    check_structure(job, MPIJOB_V2BETA1)
    spec = job["spec"]
    assert spec["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    pods = [spec["mpiReplicaSpecs"][kind]["template"]["spec"] for kind in ("Launcher", "Worker")]
    for pod in pods:
        assert pod["containers"][0]["securityContext"] == {"runAsUser": 1000}
    worker = pods[1]["containers"][0]
    assert worker["command"] == ["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]
    # The root form is unchanged by the option.
    root = mpijob("nr", "img:1", 2, 1, launcher, profile=builtin_profiles()["seed"])
    assert root == mpijob("nr", "img:1", 2, 1, launcher)
    with pytest.raises(UsageError, match="uid"):
        mpijob("nr", "img:1", 2, 1, launcher, profile=nonroot.model_copy(update={"uid": None}))


# The MPIJob v2beta1 field structure (mpi-operator's CRD, the parts imagekit writes); any
# field not listed here makes the test fail.
CONTAINER = {
    "name": str,
    "image": str,
    "command": [str],
    "args": [str],
    "resources": {"limits": dict, "requests": dict},
    "volumeMounts": [{"name": str, "mountPath": str}],
    "env": [dict],
    "securityContext": dict,
}
POD_TEMPLATE = {
    "metadata": dict,
    "spec": {
        "containers": [CONTAINER],
        "volumes": [{"name": str, "emptyDir": {"medium": str, "sizeLimit": str}}],
    },
}
REPLICA = {"replicas": int, "restartPolicy": str, "template": POD_TEMPLATE}
MPIJOB_V2BETA1 = {
    "apiVersion": str,
    "kind": str,
    "metadata": {"name": str, "namespace": str, "labels": dict},
    "spec": {
        "slotsPerWorker": int,
        "sshAuthMountPath": str,
        "mpiImplementation": str,
        "launcherCreationPolicy": str,
        "runLauncherAsWorker": bool,
        "runPolicy": {
            "cleanPodPolicy": str,
            "ttlSecondsAfterFinished": int,
            "activeDeadlineSeconds": int,
            "backoffLimit": int,
            "suspend": bool,
            "schedulingPolicy": dict,
            "managedBy": str,
        },
        "mpiReplicaSpecs": {"Launcher": REPLICA, "Worker": REPLICA},
    },
}


def check_structure(value, schema, path="") -> None:
    if isinstance(schema, dict):
        assert isinstance(value, dict), path
        for key, item in value.items():
            assert key in schema, f"{path}.{key}: not a field of this kind here"
            check_structure(item, schema[key], f"{path}.{key}")
    elif isinstance(schema, list):
        assert isinstance(value, list), path
        for i, item in enumerate(value):
            check_structure(item, schema[0], f"{path}[{i}]")
    elif schema is dict:
        assert isinstance(value, dict), path
    else:
        assert isinstance(value, schema), f"{path}: {value!r} is not {schema.__name__}"


# Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1): the TrainingRuntime and TrainJob fields
# imagekit writes, from the project's Go types and its deepspeed-distributed runtime.
TRAINER_CONTAINER = {
    "name": str,
    "image": str,
    "command": [str],
    "args": [str],
    "readinessProbe": {"tcpSocket": {"port": int}, "initialDelaySeconds": int},
    "resources": {"limits": dict, "requests": dict},
    "volumeMounts": [{"name": str, "mountPath": str}],
    "securityContext": dict,
}
TRAINING_RUNTIME = {
    "apiVersion": str,
    "kind": str,
    "metadata": {"name": str, "namespace": str, "labels": dict},
    "spec": {
        "mlPolicy": {
            "numNodes": int,
            "mpi": {
                "numProcPerNode": int,
                "mpiImplementation": str,
                "sshAuthMountPath": str,
                "runLauncherAsNode": bool,
            },
        },
        "template": {
            "spec": {
                "network": {"publishNotReadyAddresses": bool},
                "successPolicy": {"operator": str, "targetReplicatedJobs": [str]},
                "replicatedJobs": [
                    {
                        "name": str,
                        "dependsOn": [{"name": str, "status": str}],
                        "template": {
                            "metadata": {"labels": dict},
                            "spec": {
                                "template": {
                                    "spec": {
                                        "securityContext": dict,
                                        "containers": [TRAINER_CONTAINER],
                                        "volumes": [
                                            {
                                                "name": str,
                                                "emptyDir": {"medium": str, "sizeLimit": str},
                                            }
                                        ],
                                    }
                                }
                            },
                        },
                    }
                ],
            }
        },
    },
}
TRAINJOB = {
    "apiVersion": str,
    "kind": str,
    "metadata": {"name": str, "namespace": str, "labels": dict},
    "spec": {
        "runtimeRef": {"name": str, "apiGroup": str, "kind": str},
        "trainer": {
            "image": str,
            "command": [str],
            "args": [str],
            "env": [dict],
            "numNodes": int,
            "resourcesPerNode": {"limits": dict, "requests": dict},
            "numProcPerNode": int,
        },
    },
}


def test_trainer_v2_documents_follow_their_kinds_and_set_the_image_everywhere():
    launcher = recommend(LaunchRequest(2, 2, ("python3", "t.py"), openmpi_major=5)).argv
    runtime, job = trainjob("e1", "img:1", 2, 2, launcher, gpus_per_worker=1, ssh_port=22)
    check_structure(runtime, TRAINING_RUNTIME)
    check_structure(job, TRAINJOB)
    assert (runtime["kind"], job["kind"]) == ("TrainingRuntime", "TrainJob")
    assert job["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    jobs = {j["name"]: j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]}
    # trainer#4030: the image on both the launcher and the nodes; nodes run sshd, not training
    for replicated in jobs.values():
        (container,) = replicated["template"]["spec"]["template"]["spec"]["containers"]
        assert container["image"] == "img:1"
    node = jobs["node"]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert node["command"] == ["/usr/sbin/sshd", "-De"]
    assert node["readinessProbe"]["tcpSocket"]["port"] == 22
    assert jobs["launcher"]["dependsOn"] == [{"name": "node", "status": "Ready"}]
    assert job["spec"]["trainer"]["command"] == launcher
    assert job["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == 1
    with pytest.raises(UsageError, match="not a Kubernetes name"):
        trainjob("Bad_Name", "img", 1, 1, launcher)


def test_trainer_v2_non_root_runtime_is_k2s_own_form():
    from imagekit.profiles import builtin_profiles

    trainer = builtin_profiles()["kubeflow-trainer-v2"]
    launcher = recommend(LaunchRequest(2, 1, ("python3", "t.py"), ssh_port=2222)).argv
    runtime, job = trainjob("t1", "img:1", 2, 1, launcher, ssh_port=2222, profile=trainer)
    check_structure(runtime, TRAINING_RUNTIME)
    check_structure(job, TRAINJOB)
    assert runtime["spec"]["mlPolicy"]["mpi"]["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    pods = [
        r["template"]["spec"]["template"]["spec"]
        for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
    ]
    for pod in pods:  # the Secret's root-owned 0640 files are read through fsGroup
        assert pod["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
    node = pods[0]["containers"][0]
    assert node["command"][-2:] == ["-f", "/home/mpiuser/.sshd_config"]
    assert node["readinessProbe"]["tcpSocket"]["port"] == 2222


def test_cli_mpijob_for_trainer_v2_writes_both_documents(capsys, monkeypatch):
    _, out, _ = cli(
        capsys,
        monkeypatch,
        "mpijob",
        "recipes/deepspeed-cpu-ompi5.yaml",
        "--operator",
        "trainer-v2",
        "--name",
        "e1",
        "--workers",
        "2",
        "--slots",
        "2",
        "--",
        "python3",
        "t.py",
    )
    runtime, job = yaml.safe_load_all(out)
    check_structure(runtime, TRAINING_RUNTIME)
    check_structure(job, TRAINJOB)
    assert job["spec"]["trainer"]["image"] == "deepspeed-training:23.08-cpu-py313-debian13"
    assert "ppr:2:node" in job["spec"]["trainer"]["command"]  # the recipe's Open MPI 5


def test_structure_check_rejects_misplaced_fields():
    job = mpijob("e1", "img:1", 1, 1, ["mpirun", "x"])
    job["spec"]["slotsPerWorkers"] = 1
    with pytest.raises(AssertionError, match="slotsPerWorkers"):
        check_structure(job, MPIJOB_V2BETA1)


def cli(capsys, monkeypatch, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """The CLI in-process (a subprocess per call would cost a second of imports each)."""
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as info:
        main(list(args))
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def test_cli_lint_exit_codes_and_json(capsys, monkeypatch, tmp_path):
    code, out, _ = cli(
        capsys, monkeypatch, "lint-cmd", "mpirun -np 8 deepspeed train.py", "--format", "json"
    )
    assert code == 10
    body = json.loads(out)
    assert body["ok"] is False and body["findings"][0]["lid"] == "L12"
    script = tmp_path / "launch.sh"
    script.write_text(SEED_BASIC_MPI)
    assert cli(capsys, monkeypatch, "lint-cmd", "--file", str(script))[0] == 0
    assert cli(capsys, monkeypatch, "lint-cmd", "--file", "-", stdin="mpirun -np 8 run.sh")[0] == 10


def test_cli_mpirun_formats_and_mpijob(capsys, monkeypatch):
    code, out, _ = cli(
        capsys,
        monkeypatch,
        "mpirun",
        "--workers",
        "2",
        "--slots",
        "2",
        "--cpu",
        "--",
        "python3",
        "probe.py",
    )
    assert code == 0 and out.startswith("mpirun -np 4 -npernode 2")
    _, out, _ = cli(
        capsys,
        monkeypatch,
        "mpirun",
        "--workers",
        "2",
        "--slots",
        "2",
        "--format",
        "json",
        "--",
        "python3",
        "t.py",
    )
    assert json.loads(out)[-2:] == ["python3", "t.py"]
    _, out, err = cli(
        capsys,
        monkeypatch,
        "mpirun",
        "--workers",
        "1",
        "--slots",
        "2",
        "--recipe",
        "recipes/deepspeed-cpu.yaml",
        "--",
        "python3",
        "t.py",
    )
    assert "-mca pml" not in out and "already in the image" in err
    _, out, _ = cli(
        capsys,
        monkeypatch,
        "mpijob",
        "recipes/deepspeed-cpu.yaml",
        "--name",
        "e1",
        "--workers",
        "2",
        "--slots",
        "2",
        "--",
        "python3",
        "t.py",
    )
    job = yaml.safe_load(out)
    check_structure(job, MPIJOB_V2BETA1)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["image"] == "deepspeed-training:23.08-cpu-py311-debian12"


def test_profile_port_matches_the_validated_profiles(tmp_path):
    from imagekit.profiles import builtin_profiles
    from imagekit.run.launch import profile_port

    for name, profile in builtin_profiles().items():
        assert profile_port(name) == profile.port, name
    custom = tmp_path / "p.yaml"
    custom.write_text("port: 2022\n")
    assert profile_port(str(custom)) == 2022
    with pytest.raises(UsageError, match="did you mean"):
        profile_port("sede")
