"""The fabric (F1-F4) from recipe to launch line: the recipe's network section and its
grammar, the plan's packages, MCA defaults and labels, the fabric section's probed units,
`imagekit mpirun --fabric rdma`, and smoke's proof of the PML each rank selected."""

from __future__ import annotations

import pytest
from dockerfile_parse import DockerfileParser

from imagekit.build.plan import (
    FABRIC_PACKAGES,
    OPENMPI_BUILD_PACKAGES,
    UCX_PACKAGES,
    make_plan,
)
from imagekit.build.render import render_context
from imagekit.errors import RecipeError
from imagekit.profiles import builtin_profiles
from imagekit.recipe.loader import load_recipe
from imagekit.requirements.fabric import ProvidersRegistered, UcxPml, VerbsLoads
from imagekit.run.lint import LintContext, lint
from imagekit.run.manifests import mpijob, trainjob
from imagekit.run.recommend import LaunchRequest, recommend
from imagekit.run.smoke import PML_VERBOSE, pml_problems, pml_selected

from ..conftest import RECIPES
from .test_launch import MPIJOB_V2BETA1, TRAINING_RUNTIME, TRAINJOB, check_structure

RDMA_RECIPE = RECIPES / "deepspeed-cpu-rdma.yaml"
SEED = builtin_profiles()["seed"]
SEED_RDMA = builtin_profiles()["seed-rdma"]
RDMA_LABELS = {
    "io.imagekit.fabric": "rdma",
    "io.imagekit.fabric.providers": "mlx5,rxe",
    "io.imagekit.fabric.ucx": "true",
}
GOOD = {
    "registered": "efa,mlx4,mlx5,rxe",
    "provider.mlx5": "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so",
    "provider.mlx5.missing": "-",
    "provider.rxe": "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so",
    "provider.rxe.missing": "-",
    "verbs": "loaded libibverbs.so.1: no device list: Function not implemented",
    "pml_ucx": "yes",
    "ucx_info": "/usr/bin/ucx_info",
    "ucx_transports": "posix self sysv tcp",
    "uct_ib": "/usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so.0",
}


def _recipe(tmp_path, network: str, mca: str = ""):
    path = tmp_path / "r.yaml"
    path.write_text(
        f"extends: {RDMA_RECIPE}\nnetwork: {network}\n" + (f"mpi: {{mca: {mca}}}\n" if mca else "")
    )
    return path


def test_the_rdma_recipe_plans_its_packages_labels_and_no_ob1_default():
    plan = make_plan(load_recipe(RDMA_RECIPE))
    tcp = make_plan(load_recipe(RECIPES / "deepspeed-cpu.yaml"))
    fabric = next(s for s in plan.apt_stages if s.name == "fabric")
    assert fabric.packages == FABRIC_PACKAGES + UCX_PACKAGES and fabric.after == "python"
    # One layer over the TCP image's: every stage below is the same as deepspeed-cpu's.
    assert plan.apt_stages[:-1] == tcp.apt_stages and plan.mca == tcp.mca
    assert plan.labels["io.imagekit.fabric"] == "rdma"
    assert plan.labels["io.imagekit.fabric.providers"] == "mlx5,rxe"
    assert plan.labels["io.imagekit.fabric.ucx"] == "true"
    assert "pml" not in {name for name, _, _ in plan.fabric_mca}  # Open MPI picks ucx where RDMA is
    assert {n for n, _, _ in plan.fabric_mca} == {n for n, _, _ in tcp.mca} - {"pml"}
    assert plan.fabric == "rdma"


def test_a_tcp_recipe_is_as_before_digest_included():
    loaded = load_recipe(RECIPES / "deepspeed-cpu.yaml")
    plan = make_plan(loaded)
    assert plan.fabric == "tcp" and "io.imagekit.fabric" not in plan.labels
    assert ("pml", "ob1") in {(name, value) for name, value, _ in plan.mca}
    assert plan.fabric_packages == () and plan.fabric_mca == ()
    # The network section at its default leaves the digest (in locks and labels) alone.
    committed = (RECIPES.parent / "dockerfiles" / "deepspeed-cpu" / "Dockerfile").read_text()
    assert f'io.imagekit.recipe-sha256="{loaded.sha256}"' in committed


@pytest.mark.parametrize(
    "network, mca, message",
    [
        ("{fabric: tcp, providers: [mlx5]}", "", "providers and ucx need fabric: rdma"),
        ("{fabric: rdma, providers: []}", "", "fabric: rdma needs providers"),
        ("{fabric: rdma, providers: [mlx9]}", "", "providers.0"),
        ("{fabric: infiniband, providers: [mlx5]}", "", "network.fabric"),
        ("{fabric: rdma, providers: [mlx5]}", "{pml: ob1}", "keeps Open MPI off the RDMA fabric"),
        ("{fabric: rdma, providers: [mlx5]}", "{pml: ^ucx}", "keeps Open MPI off the RDMA fabric"),
    ],
)
def test_a_wrong_network_section_is_one_line(tmp_path, network, mca, message):
    with pytest.raises(RecipeError) as info:
        load_recipe(_recipe(tmp_path, network, mca))
    assert len(info.value.problems) == 1 and message in info.value.problems[0]


TARBALL_RDMA = RECIPES.parent / "tests" / "unit" / "recipes" / "variant-tarball-rdma.yaml"


def _stages(dockerfile: str, scratch) -> dict[str, list[str]]:
    """Each stage's instructions (name -> 'INSTRUCTION value' lines), parsed."""
    parser = DockerfileParser(path=str(scratch / "Dockerfile"))  # it writes what it parses
    parser.content = dockerfile
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for item in parser.structure:
        if item["instruction"] == "FROM":
            current = stages.setdefault(item["value"].split()[-1], [])
        current.append(f"{item['instruction']} {item['value']}")
    return stages


def test_open_mpi_from_source_is_configured_with_ucx_and_gets_its_runtime_below_python(tmp_path):
    plan = make_plan(load_recipe(TARBALL_RDMA))
    build = next(s for s in plan.apt_stages if s.name == "openmpi-build")
    assert set(build.packages) - set(OPENMPI_BUILD_PACKAGES) == {
        "libibverbs-dev",
        "librdmacm-dev",
        "libucx-dev",
    }
    assert "--with-ucx=/usr" in plan.openmpi_tarball["configure_flags"].split()
    # The runtime sits in the stage every later one builds on: mpi4py links libmpi (which
    # now needs libucp) in a pip stage, so a last "fabric" layer would come too late.
    runtime = next(s for s in plan.apt_stages if s.name == "openmpi")
    assert runtime.packages == FABRIC_PACKAGES + UCX_PACKAGES and plan.fabric_stage == "openmpi"
    assert "fabric" not in {s.name for s in plan.apt_stages}
    stages = _stages(render_context(plan).files["Dockerfile"], tmp_path)
    assert any("libucx0" in line for line in stages["openmpi"] if line.startswith("RUN"))
    assert not any("libucx0" in line for line in stages["image"] if line.startswith("RUN"))
    assert any("openmpi-mca-params.fabric.conf" in line for line in stages["image"])


def test_open_mpi_from_source_without_rdma_is_configured_as_before():
    plan = make_plan(load_recipe(TARBALL_RDMA.with_name("variant-tarball.yaml")))
    assert "--with-ucx" not in plan.openmpi_tarball["configure_flags"]
    assert next(s for s in plan.apt_stages if s.name == "openmpi-build").packages == (
        OPENMPI_BUILD_PACKAGES
    )
    assert plan.fabric_stage is None


def test_an_explicit_ucx_pml_is_kept(tmp_path):
    plan = make_plan(
        load_recipe(_recipe(tmp_path, "{fabric: rdma, providers: [mlx5]}", "{pml: ucx}"))
    )
    assert ("pml", "ucx") in {(name, value) for name, value, _ in plan.mca}
    why = next(why for name, _, why in plan.mca if name == "pml")
    assert why.startswith("F1:") and "ob1" not in why  # not L4's reason, which is for ob1


# -- the check's fabric section (probed units) --------------------------------------------------


def test_a_good_rdma_image_passes_every_fabric_unit():
    for unit in (VerbsLoads, ProvidersRegistered, UcxPml):
        assert unit.judge(GOOD, RDMA_LABELS, SEED_RDMA).passed, unit
        assert unit.judge(GOOD, RDMA_LABELS, SEED).passed, unit  # declared: judged anyway


def test_today_s_images_under_today_s_profiles_skip_the_section():
    for unit in (VerbsLoads, ProvidersRegistered, UcxPml):
        assert unit.judge({}, {}, SEED).status == "skip"


@pytest.mark.parametrize("labels", [{}, RDMA_LABELS])
@pytest.mark.parametrize("profile", [SEED, SEED_RDMA])
def test_the_section_skips_before_its_probe_runs_exactly_where_the_judgement_skips(labels, profile):
    """Issue 39: the check does not run the fabric probe where the units would skip whatever
    it printed (a TCP image under a TCP profile); where they judge, the probe runs."""
    for unit in (VerbsLoads, ProvidersRegistered, UcxPml):
        before = unit.skip_reason(profile, labels)
        judged = unit.judge({}, labels, profile)
        assert (before is not None) == (judged.status == "skip"), unit
        if before:
            assert judged.evidence == before
    assert (VerbsLoads.skip_reason(profile, labels) is None) == bool(labels or profile is SEED_RDMA)


@pytest.mark.parametrize(
    "unit, broken, evidence",
    [
        (
            VerbsLoads,
            {"verbs": "missing: libibverbs.so.1: cannot open shared object file"},
            "missing",
        ),
        (ProvidersRegistered, {"registered": "efa,rxe"}, "mlx5: not registered"),
        (ProvidersRegistered, {"provider.rxe": "-"}, "rxe: no librxe-rdmav*.so"),
        (ProvidersRegistered, {"provider.mlx5.missing": "libnl-3.so.200 "}, "needs libnl-3.so.200"),
        (UcxPml, {"pml_ucx": "no"}, "no UCX PML"),
        (UcxPml, {"uct_ib": "-"}, "no verbs transports"),
        (UcxPml, {"ucx_info": ""}, "no ucx_info"),
    ],
)
def test_each_broken_fact_fails_its_unit_and_names_it(unit, broken, evidence):
    judgement = unit.judge({**GOOD, **broken}, RDMA_LABELS, SEED_RDMA)
    assert judgement.failed and evidence in judgement.evidence


def test_a_missing_libibverbs_is_verbs_library_s_finding_alone():
    facts = {**GOOD, "provider.mlx5.missing": "libibverbs.so.1 ", "verbs": "missing: x"}
    assert ProvidersRegistered.judge(facts, RDMA_LABELS, SEED_RDMA).passed
    assert VerbsLoads.judge(facts, RDMA_LABELS, SEED_RDMA).failed


def test_an_rdma_profile_judges_an_image_that_declares_nothing():
    assert ProvidersRegistered.judge({"registered": ""}, {}, SEED_RDMA).failed
    assert ProvidersRegistered.judge({"registered": "mlx5"}, {}, SEED_RDMA).passed
    assert UcxPml.judge({**GOOD, "ucx_info": ""}, {}, SEED_RDMA).passed  # UCX not declared
    assert UcxPml.judge({**GOOD, "pml_ucx": "no"}, {}, SEED_RDMA).failed


def test_hostile_provider_labels_never_reach_the_probe():
    labels = {**RDMA_LABELS, "io.imagekit.fabric.providers": "mlx5,$(reboot),../x,rxe"}
    assert ProvidersRegistered.probe_args(labels) == ("mlx5", "rxe")


# -- launch lines --------------------------------------------------------------------------------


def test_the_rdma_line_runs_ucx_and_never_turns_the_fabric_off():
    line = recommend(
        LaunchRequest(2, 8, ("python", "t.py"), gpu=True, fabric="rdma", net_devices="mlx5_0:1")
    ).shell()
    assert "-mca pml ucx" in line and "-mca osc ucx" in line and "pml ob1" not in line
    assert "NCCL_IB_DISABLE" not in line
    for setting in ("UCX_NET_DEVICES=mlx5_0:1", "NCCL_IB_HCA=mlx5_0:1", "NCCL_SOCKET_IFNAME=eth0"):
        assert f"-x {setting}" in line


def test_the_tcp_line_is_the_seed_s():
    line = recommend(LaunchRequest(2, 8, ("python", "t.py"), gpu=True)).shell()
    assert "-mca pml ob1" in line and "-x NCCL_IB_DISABLE=1" in line and "ucx" not in line


def test_ucx_over_tcp_for_a_host_without_an_hca():
    line = recommend(LaunchRequest(2, 2, ("python3", "p.py"), fabric="rdma", over_tcp=True))
    text = line.shell()
    assert "-mca pml_ucx_tls any -mca pml_ucx_devices any" in text
    assert "-x UCX_TLS=tcp,self" in text and any("UCX over TCP" in n for n in line.notes)


# -- smoke's proof -------------------------------------------------------------------------------

SELECTION = (
    "[1,0]<stderr>:[w0:00013] select: component ucx selected\n"
    "[1,1]<stderr>:[w0:00014] select: component ucx selected\n"
    "[1,2]<stderr>:[w1:00013] select: component ob1 selected\n"
    "[1,1]<stdout>:IMAGEKIT_PROBE {}\n"
)


def test_smoke_reads_each_rank_s_pml_and_fails_a_rank_on_ob1():
    selected = pml_selected(SELECTION)
    assert selected == {0: "ucx", 1: "ucx", 2: "ob1"}
    problems = pml_problems(selected, 4)
    assert problems[0].startswith("rank 2 selected the ob1 PML, not ucx")
    assert problems[1].startswith("no PML selection seen for ranks [3] (pml_base_verbose output")
    assert pml_problems({0: "ucx", 1: "ucx"}, 2) == []
    assert PML_VERBOSE == ("pml_base_verbose", "10")


# -- lint and manifests ----------------------------------------------------------------------------

TCP_LINE = (
    "mpirun -np 4 -npernode 2 --hostfile /etc/mpi/hostfile --allow-run-as-root -bind-to none "
    "-map-by slot -mca pml ob1 -mca btl ^openib -x PATH -x LD_LIBRARY_PATH "
    "-x NCCL_IB_DISABLE=1 -x NCCL_NET=Socket -timeout 3600 -quiet python t.py"
)


def test_lint_on_rdma_names_each_setting_that_turns_the_fabric_off():
    found = lint(TCP_LINE, LintContext(fabric="rdma"))
    f4 = [f for f in found if f.lid == "F4"]
    assert {f.severity for f in f4} == {"error", "warning"}
    text = " ".join(f.message for f in f4)
    for setting in ("-x NCCL_IB_DISABLE=1", "-x NCCL_NET=Socket", "-mca pml ob1", "btl ^openib"):
        assert setting in text
    assert not [f for f in found if f.lid in ("L4", "L5")]  # TCP clusters' rules


def test_lint_of_the_seed_s_tcp_line_is_unchanged_and_the_rdma_line_is_clean():
    assert not [f for f in lint(TCP_LINE) if f.lid == "F4"]
    rdma_line = recommend(
        LaunchRequest(2, 2, ("python", "t.py"), gpu=True, fabric="rdma", net_devices="mlx5_0:1")
    ).shell()
    errors = [f for f in lint(rdma_line, LintContext(2, 2, fabric="rdma")) if f.severity == "error"]
    assert errors == []
    assert [f.lid for f in lint(rdma_line) if f.severity == "error"] == ["L4"]  # tcp: ucx is L4


RDMA = {"rdma/hca_shared_devices_a": 1}


def _containers(pod_spec: dict) -> list[dict]:
    return pod_spec["containers"]


def test_mpijob_on_rdma_asks_for_the_device_ipc_lock_and_shm_everywhere():
    job = mpijob("j", "img:1", 2, 2, ["mpirun", "x"], gpus_per_worker=1, rdma=RDMA)
    check_structure(job, MPIJOB_V2BETA1)
    for role in ("Launcher", "Worker"):
        pod = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]
        (container,) = _containers(pod)
        assert container["resources"]["requests"]["rdma/hca_shared_devices_a"] == 1
        assert container["resources"]["limits"]["rdma/hca_shared_devices_a"] == 1
        assert container["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"]}
        assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
        assert pod["volumes"][0]["emptyDir"]["medium"] == "Memory"
    worker = _containers(job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"])[0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    plain = mpijob("j", "img:1", 2, 2, ["mpirun", "x"])
    assert "IPC_LOCK" not in str(plain) and "volumes" not in str(
        plain["spec"]["mpiReplicaSpecs"]["Launcher"]
    )


def test_trainjob_on_rdma_asks_for_the_device_on_nodes_and_launcher():
    runtime, job = trainjob("j", "img:1", 2, 2, ["mpirun", "x"], rdma=RDMA)
    check_structure(runtime, TRAINING_RUNTIME)
    check_structure(job, TRAINJOB)
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = replicated["template"]["spec"]["template"]["spec"]
        (container,) = _containers(pod)
        assert container["resources"]["limits"]["rdma/hca_shared_devices_a"] == 1
        assert container["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"]}
        assert pod["volumes"][0]["name"] == "dshm"


def test_locked_memory_is_judged_on_rdma_and_named_in_smoke_diagnoses():
    from imagekit.requirements.fabric import LockedMemory
    from imagekit.run.smoke import diagnose

    assert LockedMemory.judge("unlimited", "unlimited").passed
    judgement = LockedMemory.judge("64", "unlimited")
    assert judgement.failed and "64 KiB" in judgement.evidence and "lowers it" in judgement.evidence
    assert LockedMemory.judge("64", "8192").failed
    assert LockedMemory.judge("", "8192").failed  # no answer is no limit to trust
    here = LockedMemory.judge("8192", "8192")  # a runtime that limits it: the node's, a warning
    assert here.status == "warn" and "IPC_LOCK" in here.evidence
    assert LockedMemory.skip_reason(SEED) and LockedMemory.skip_reason(SEED_RDMA) is None
    line = "[1,0]<stderr>:mlx5: w0: couldn't allocate MR: Cannot allocate memory"
    (found,) = diagnose(f"noise\n{line}\n")
    assert found.startswith("F3: ranks cannot pin memory")


def test_lint_cmd_takes_the_fabric_and_the_open_mpi_major_from_one_recipe(capsys):
    from imagekit.cli.main import main

    line = TCP_LINE.replace(" -x NCCL_NET=Socket", "")
    with pytest.raises(SystemExit) as info:
        main(["lint-cmd", line, "--recipe", str(RDMA_RECIPE)])
    out = capsys.readouterr().out
    assert info.value.code == 10 and "F4" in out and "NCCL_IB_DISABLE=1" in out
    main(["lint-cmd", line, "--recipe", str(RDMA_RECIPE), "--fabric", "tcp"])  # exits 0
    assert "F4" not in capsys.readouterr().out  # the flag wins over the recipe
