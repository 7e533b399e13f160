"""The fabric (F): an image whose ENV turns RDMA off, judged by `imagekit check` under a
profile that says the cluster is RDMA (and under the seed's TCP profile), then fixed by
`imagekit adapt` from the unit's remedy and checked again, in real containers."""

from __future__ import annotations

from pathlib import Path

from .conftest import imagekit
from .images import build
from .test_check import check_json, failing

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
