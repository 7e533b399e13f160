"""Open MPI 5 (PRRTE) for real: Debian 13's Open MPI 5.0.7 image is built, checked and
smoke-run across a launcher and two workers, the way the operators launch it (K3)."""

from __future__ import annotations

import json

from .conftest import OMPI5_RECIPE, imagekit, run_in
from .images import build
from .test_smoke import nothing_left


def test_ompi5_image_has_the_declared_stack(engine, ompi5_image):
    code, out = run_in(
        engine,
        ompi5_image.ref,
        "mpirun --version | head -1; python3 -c 'import sys, torch, deepspeed, mpi4py;"
        " print(sys.version.split()[0], torch.__version__, deepspeed.__version__, mpi4py.__version__)'",
    )
    assert code == 0, out
    assert "5.0.7" in out and "3.13" in out and "2.6.0" in out and "0.19.8" in out, out
    # Debian's torch stays the one in the image: pip installed beside it, never over it.
    code, where = run_in(
        engine, ompi5_image.ref, "python3 -c 'import torch; print(torch.__file__)'"
    )
    assert code == 0 and where.strip().startswith("/usr/lib/python3/dist-packages/torch"), where


def test_ompi5_image_passes_every_check(ompi5_image, tmp_path):
    report_path = tmp_path / "check.json"
    result = imagekit("check", str(OMPI5_RECIPE), "--report", str(report_path), timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    report = json.loads(report_path.read_text())
    statuses = {r["id"]: r["status"] for r in report["results"]}
    for required in ("mpirun-two-ranks", "remote-environment", "version-openmpi", "version-torch"):
        assert statuses[required] in ("pass", "info"), (required, statuses[required])
    assert statuses["prrte-default-hostfile"] == "info"  # passed, the path and its source shown


def test_ompi5_smoke_places_ranks_on_the_workers(engine, ompi5_image):
    """The operator's launcher sets only OMPI_MCA_orte_* variables, which Open MPI 5
    ignores; the image's PRRTE default hostfile still puts every rank on a worker."""
    result = imagekit("smoke", ompi5_image.ref, "--workers", "2", "--slots", "2", timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert output.count("IMAGEKIT_PROBE ") == 4 and "PASSED" in result.stdout
    nothing_left(engine)


def test_ompi5_launch_without_the_image_default_is_the_k3_trap(engine, ompi5_image):
    """Debian's own default hostfile in place of the image's: mpirun runs both ranks on the
    launcher and exits 0 (kubeflow/trainer#4028); smoke fails it and names Open MPI 5."""
    command = ["env", "PRTE_MCA_prte_default_hostfile=/etc/openmpi/prte-default-hostfile"]
    command += ["mpirun", "-n", "2", "true"]
    result = imagekit("smoke", ompi5_image.ref, "--", *command, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 9, output[-3000:]
    assert "K3: the command exited 0 without reaching any worker" in output
    assert "Open MPI 5" in output
    nothing_left(engine)


def test_check_fails_an_open_mpi_5_image_whose_prrte_default_is_not_the_operators_hostfile(
    engine, ompi5_image, tmp_path
):
    """K3 found by the check, not only by a smoke run: the image with its PRRTE default taken
    out (Debian's own hostfile again) fails prrte-default-hostfile alone, naming where the
    value came from; every other check still passes (a local mpirun never needed it)."""
    ref = build(
        engine,
        tmp_path / "ctx",
        "imagekit-test/ompi5-debian-default:1",
        f"FROM {ompi5_image.ref}\n"
        "RUN sed -i '/^prte_default_hostfile/d' /etc/openmpi/prte-mca-params.conf\n",
        {},
    )
    try:
        report_path = tmp_path / "check.json"
        result = imagekit("check", ref, "--report", str(report_path), timeout=900)
        output = result.stdout + result.stderr
        assert result.returncode == 7, output[-4000:]
        report = json.loads(report_path.read_text())
        failed = {r["id"]: r for r in report["results"] if r["status"] == "fail"}
        assert set(failed) == {"prrte-default-hostfile"}, output[-4000:]
        evidence = failed["prrte-default-hostfile"]["evidence"]
        assert "'/etc/openmpi/prte-default-hostfile' (default)" in evidence, evidence
    finally:
        engine.remove_image(ref)


def test_ompi5_sbom_is_valid_cyclonedx(ompi5_image):
    from .test_inventory import valid_cyclonedx

    result = imagekit("sbom", str(OMPI5_RECIPE), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    body = valid_cyclonedx(result.stdout)
    purls = [c.get("purl", "") for c in body["components"]]
    assert any(p.startswith("pkg:deb/debian/openmpi-bin@5.0.7") for p in purls)
    assert any("distro=debian-13" in p for p in purls)
    assert any(p.startswith("pkg:pypi/deepspeed@0.19.8") for p in purls)
