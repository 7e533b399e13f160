"""F4 as a unit (imagekit/requirements/fabric.py): the first requirement added after the move,
in one class. Its judgement, and every consumer taking it from the registry: the check suite
(a generated check), adapt (its remedy as ENV), the reference (`imagekit requirements`)."""

from __future__ import annotations

import pytest
from dockerfile_parse import DockerfileParser
from hypothesis import given, settings
from hypothesis import strategies as st

from imagekit.checks.catalog import catalog
from imagekit.checks.suite import checks_units
from imagekit.profiles import Profile, builtin_profiles
from imagekit.requirements import REGISTRY, env_units
from imagekit.requirements.fabric import FabricKeptOn
from imagekit.run.adapt import failing_env_units, render_adapt

from .test_adapt import COMPLETE, DECLARED, facts, plan

RDMA = Profile(name="rdma-cluster", fabric="rdma")
TCP = builtin_profiles()["seed"]


@pytest.mark.parametrize(
    "env, offending",
    [
        ({}, []),
        ({"NCCL_IB_DISABLE": "1"}, ["NCCL_IB_DISABLE"]),
        ({"NCCL_IB_DISABLE": "0"}, []),
        ({"NCCL_IB_DISABLE": "yes"}, []),  # NCCL reads a non-number as unset
        ({"NCCL_NET": "Socket"}, ["NCCL_NET"]),
        ({"NCCL_NET": "IB"}, []),
        ({"OMPI_MCA_pml": "ob1"}, ["OMPI_MCA_pml"]),
        ({"OMPI_MCA_pml": "^ucx"}, ["OMPI_MCA_pml"]),
        ({"OMPI_MCA_pml": "ucx"}, []),
        ({"OMPI_MCA_pml": "cm"}, []),
        ({"OMPI_MCA_pml": "^ob1"}, []),
        ({"UCX_TLS": "tcp,self"}, ["UCX_TLS"]),
        ({"UCX_TLS": "rc_x,sm,self"}, []),
        ({"UCX_TLS": "dc,self"}, []),
        ({"UCX_TLS": "ib"}, []),
        ({"UCX_TLS": "all"}, []),
        ({"UCX_TLS": "^tcp"}, []),
        ({"UCX_TLS": "^ib"}, ["UCX_TLS"]),
        ({"UCX_TLS": "^rc,ud,dc"}, ["UCX_TLS"]),
        (
            {"NCCL_IB_DISABLE": "1", "OMPI_MCA_pml": "ob1", "PATH": "/bin"},
            ["NCCL_IB_DISABLE", "OMPI_MCA_pml"],
        ),
    ],
)
def test_each_setting_that_turns_the_fabric_off_fails_and_is_named(env, offending):
    judgement = FabricKeptOn.judge(env, RDMA)
    assert judgement.failed == bool(offending)
    for name in offending:
        assert f"ENV {name}={env[name]}" in judgement.evidence


def test_a_tcp_profile_skips_it_and_an_rdma_profile_judges_it():
    assert "fabric tcp" in FabricKeptOn.skip_reason(TCP)
    assert FabricKeptOn.skip_reason(RDMA) is None


ENV_VALUES = {
    "NCCL_IB_DISABLE": st.sampled_from(["0", "1", "2", " 1", "x"]),
    "NCCL_NET": st.sampled_from(["IB", "Socket", "socket", "AWS Libfabric"]),
    "OMPI_MCA_pml": st.sampled_from(["ucx", "ob1", "^ucx", "cm", "ob1,ucx", "^ob1"]),
    "UCX_TLS": st.sampled_from(["all", "tcp", "rc,tcp", "^ib", "^tcp", "ud_x", "sm,self"]),
}


@settings(max_examples=150, derandomize=True, deadline=None)
@given(env=st.fixed_dictionaries({}, optional=ENV_VALUES))
def test_the_remedy_adapt_writes_makes_the_check_pass(env):
    """Adapt's ENV lines, laid over the image's ENV, pass the check's judgement; adapt
    writes nothing where the check passes."""
    failed = FabricKeptOn.judge(env, RDMA).failed
    remedy = FabricKeptOn.remedy(env)
    assert bool(remedy) == failed
    assert not FabricKeptOn.judge({**env, **remedy}, RDMA).failed
    assert failing_env_units(facts(COMPLETE, Env=[f"{k}={v}" for k, v in env.items()]), RDMA) == (
        [FabricKeptOn] if failed else []
    )


def test_adapt_writes_the_remedy_as_env_under_an_rdma_profile_only(tmp_path):
    env = ["NCCL_IB_DISABLE=1", "OMPI_MCA_pml=ob1", "PATH=/usr/bin:/bin"]
    assert not plan(COMPLETE, Env=env, Labels=DECLARED).needed  # tcp (seed): right as it is
    p = plan(COMPLETE, RDMA, Env=env, Labels=DECLARED)
    assert [f.requirement for f in p.fixes] == ["F4"]
    parser = DockerfileParser(path=str(tmp_path / "Dockerfile"))  # it writes what it parses
    parser.content = render_adapt(p).files["Dockerfile"]
    envs = [i["value"] for i in parser.structure if i["instruction"] == "ENV"]
    assert envs == ['NCCL_IB_DISABLE="0" OMPI_MCA_pml="ucx"']


def test_every_consumer_takes_the_unit_from_the_registry():
    """The unit is in the registry; the suite made a check of it; the reference lists it."""
    assert FabricKeptOn in REGISTRY and FabricKeptOn in env_units()
    made = checks_units.check_fabric_not_turned_off
    (mark,) = [m for m in made.pytestmark if m.name == "imagekit"]
    assert (mark.kwargs["id"], mark.kwargs["req"]) == ("fabric-not-turned-off", "F4")
    listed = {e.id: e for e in catalog()}
    assert listed["fabric-not-turned-off"].varies == FabricKeptOn.profiles
    for unit in REGISTRY:
        assert unit.check_id in listed, unit
        assert listed[unit.check_id].title == unit.title


def test_the_generated_check_judges_the_image_config():
    from types import SimpleNamespace

    notes = []
    ctx = SimpleNamespace(profile=RDMA, labels={}, config={"Env": ["NCCL_NET=Socket"]})
    with pytest.raises(pytest.fail.Exception, match="ENV NCCL_NET=Socket"):
        checks_units.check_fabric_not_turned_off(ctx, lambda *a: notes.append(a))
    ctx = SimpleNamespace(profile=TCP, labels={}, config={"Env": ["NCCL_NET=Socket"]})
    with pytest.raises(pytest.skip.Exception, match="fabric tcp"):
        checks_units.check_fabric_not_turned_off(ctx, lambda *a: notes.append(a))
