"""The fabric (F1-F4) in real containers: the RDMA recipe's image passes the fabric section
under an RDMA profile and smoke-runs 2x2 through UCX, with every rank's PML proven; a line
on ob1 fails the smoke; broken variants each fail exactly their check; an image whose ENV
turns RDMA off fails under an RDMA profile (not under the seed's TCP one) and `imagekit
adapt` fixes it from the unit's remedy."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagekit.run.recommend import LaunchRequest, recommend
from imagekit.run.smoke import PML_VERBOSE, PROBE_PATH

from .conftest import check_json, imagekit
from .images import build
from .test_check import failing

RDMA_PROFILE = "fabric: rdma\nuser_keys: [image, mounted]\n"
# The seed's TCP lines, baked into an image: right on TCP clusters, wrong on RDMA ones (F4).
TCP_ONLY = "FROM {mini}\nENV NCCL_IB_DISABLE=1 OMPI_MCA_pml=ob1 UCX_TLS=tcp,self\n"


def test_an_image_that_turns_rdma_off_fails_under_rdma_and_adapt_fixes_it(
    engine, mini, tmp_path: Path
):
    source = build(
        engine, tmp_path / "src", "imagekit-test/fabric-tcp-only:1", TCP_ONLY.format(mini=mini), {}
    )
    profile = tmp_path / "rdma.yaml"
    profile.write_text(RDMA_PROFILE)
    for run in ("tcp", "rdma", "after"):
        (tmp_path / run).mkdir()

    code, report, output = check_json(source, tmp_path / "tcp", "--profile", "seed")
    rows = {r["id"]: r for r in report["results"]}
    assert code == 0 and rows["fabric-not-turned-off"]["status"] == "skip", output

    code, report, output = check_json(source, tmp_path / "rdma", "--profile", str(profile))
    rows = {r["id"]: r for r in report["results"]}
    assert code == 7 and failing(report) == {"fabric-not-turned-off"}, output
    evidence = rows["fabric-not-turned-off"]["evidence"]
    for setting in ("NCCL_IB_DISABLE=1", "OMPI_MCA_pml=ob1", "UCX_TLS=tcp,self"):
        assert f"ENV {setting}" in evidence
    assert rows["fabric-not-turned-off"]["requirement"] == "F4"

    tag = "imagekit-test/fabric-adapted:1"
    adapted_report = tmp_path / "adapted.json"
    result = imagekit(
        "adapt", source, "--plain", "--profile", str(profile), "--tag", tag,
        "--report", str(adapted_report), timeout=900,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "F4" in output and "ENV NCCL_IB_DISABLE=0 OMPI_MCA_pml=ucx UCX_TLS=all" in output
    env = dict(e.split("=", 1) for e in engine.inspect_image(tag)["Config"]["Env"])
    assert (env["NCCL_IB_DISABLE"], env["OMPI_MCA_pml"], env["UCX_TLS"]) == ("0", "ucx", "all")
    code, report, output = check_json(tag, tmp_path / "after", "--profile", str(profile))
    assert code == 0 and not failing(report), output


FABRIC_CHECKS = {
    "verbs-library",
    "verbs-providers",
    "ucx-pml",
    "locked-memory",
    "fabric-not-turned-off",
}


def test_the_rdma_recipe_passes_the_fabric_section_and_smoke_runs_through_ucx(
    rdma_image, tmp_path: Path
):
    code, report, output = check_json(rdma_image.ref, tmp_path, "--profile", "seed-rdma")
    rows = {r["id"]: r for r in report["results"]}
    assert code == 0 and not failing(report), output
    # locked-memory warns where the runtime itself limits it (this engine: 8 MiB).
    # Each reports what it judged (info); locked-memory warns where the runtime itself limits
    # it (this engine: 8 MiB).
    assert {rows[c]["status"] for c in FABRIC_CHECKS - {"locked-memory"}} == {"info"}, output
    assert rows["locked-memory"]["status"] in ("pass", "warn"), output
    assert "libuct_ib" in rows["ucx-pml"]["evidence"]
    assert "mlx5, rxe: registered" in rows["verbs-providers"]["evidence"]
    # The image declares its fabric: smoke takes rdma from its label.
    smoke = imagekit("smoke", rdma_image.ref, "--workers", "2", "--slots", "2", timeout=600)
    output = smoke.stdout + smoke.stderr
    assert smoke.returncode == 0, output[-4000:]
    assert "PML selected by 4 ranks: ucx" in output


def test_smoke_fails_when_the_ranks_fall_back_to_ob1(rdma_image):
    """A line that keeps ob1 (the seed's TCP line, with Open MPI's selection shown) under
    --fabric rdma: the job runs, and smoke fails it, naming each rank's PML."""
    line = recommend(
        LaunchRequest(2, 1, ("python3", PROBE_PATH), timeout=300, extra_mca=(PML_VERBOSE,))
    ).argv
    result = imagekit(
        "smoke", rdma_image.ref, "--fabric", "rdma", "--workers", "2", "--slots", "1", "--", *line,
        timeout=600,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 9, output[-4000:]
    assert "rank 0 selected the ob1 PML, not ucx" in output
    assert "rank 1 selected the ob1 PML, not ucx" in output


# mini (Debian's openmpi-bin: verbs, providers, UCX and its PML by dependency) declared as an
# RDMA image, then broken one piece at a time.
RDMA_MINI = (
    "FROM {mini}\nLABEL io.imagekit.fabric=rdma io.imagekit.fabric.providers=mlx5 "
    "io.imagekit.fabric.ucx=false\n"
)
LIB = "/usr/lib/x86_64-linux-gnu"
BROKEN_FABRIC = {
    "good": ("", set()),
    "provider-unregistered": ("RUN rm /etc/libibverbs.d/mlx5.driver", {"verbs-providers"}),
    "no-libibverbs": (f"RUN rm -f {LIB}/libibverbs.so.1*", {"verbs-library"}),
    "ib-disabled-in-env": ("ENV NCCL_IB_DISABLE=1", {"fabric-not-turned-off"}),
    "no-ucx-pml": (f"RUN rm {LIB}/openmpi/lib/openmpi3/mca_pml_ucx.so", {"ucx-pml"}),
    # pam_limits lowers what root's ssh sessions may lock (`*` never matches root).
    "memlock-lowered": (
        "RUN printf 'root soft memlock 64\\nroot hard memlock 64\\n' >> /etc/security/limits.conf",
        {"locked-memory"},
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN_FABRIC))
def test_each_broken_fabric_piece_fails_exactly_its_check(engine, mini, tmp_path: Path, name):
    extra, expected = BROKEN_FABRIC[name]
    dockerfile = RDMA_MINI.format(mini=mini) + extra + "\n"
    ref = build(engine, tmp_path / "ctx", f"imagekit-test/fabric-{name}:1", dockerfile, {})
    code, report, output = check_json(ref, tmp_path, "--profile", "seed-rdma")
    assert failing(report) == expected, output
    assert code == (7 if expected else 0), output
