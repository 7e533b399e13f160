"""The HCA-host script's verdict (tests/rdma_host/verdict.py), on the shapes each tool prints:
ibv_devinfo, ucx_info -d, ucx_perftest, NCCL_DEBUG=INFO. The script itself needs an HCA."""

from __future__ import annotations

import importlib.util

from ..conftest import ROOT

spec = importlib.util.spec_from_file_location("verdict", ROOT / "tests/rdma_host/verdict.py")
verdict = importlib.util.module_from_spec(spec)
spec.loader.exec_module(verdict)

DEVINFO = """hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t28.39.1002
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_DOWN (1)
hca_id:\tmlx5_1
\ttransport:\t\t\tInfiniBand (0)
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tlink_layer:\t\tInfiniBand
"""
UCX = """#      Transport: self
#         Device: memory0
#      Transport: tcp
#         Device: eth0
#      Transport: rc_mlx5
#         Device: mlx5_1:1
#      Transport: dc_mlx5
#         Device: mlx5_1:1
"""
PERFTEST = """+--------------+--------------+----------+---------+---------+----------+----------+
|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |
Final:                  2000     0.000    85.353    85.353    11716.13   11716.13       11716       11716
"""
NCCL_IB = (
    "w0:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_1:1/IB ; OOB eth0:10.0.0.2<0>\n"
    "w0:1:1 [0] NCCL INFO Using network IB\nIMAGEKIT_NCCL rank=0 ok=True\n"
    "IMAGEKIT_NCCL rank=1 ok=True\n"
)
NCCL_SOCKET = NCCL_IB.replace("Using network IB", "Using network Socket").replace(
    "NET/IB", "NET/Socket"
)


def test_a_host_with_an_active_hca_passes():
    outputs = {
        "devinfo.txt": DEVINFO,
        "ucx.txt": UCX,
        "perftest.txt": PERFTEST,
        "nccl.txt": NCCL_IB,
    }
    failures, facts = verdict.failures_of(outputs, 1000.0)
    assert failures == []
    assert facts["active_ports"] == ["mlx5_1:1"]
    assert facts["ucx_verbs_transports"] == ["dc_mlx5", "rc_mlx5"]
    assert facts["bandwidth_mb_s"] == 11716.13 and facts["nccl_network"] == "IB"


def test_each_missing_piece_is_one_named_failure():
    outputs = {
        "devinfo.txt": DEVINFO.replace("PORT_ACTIVE (4)", "PORT_DOWN (1)"),
        "ucx.txt": UCX.split("#      Transport: rc_mlx5")[0],
        "perftest.txt": PERFTEST.replace("11716.13", "310.50"),
        "nccl.txt": NCCL_SOCKET.replace("rank=1 ok=True", "rank=1 ok=False"),
    }
    failures, _ = verdict.failures_of(outputs, 1000.0)
    assert failures == [
        "ibv_devinfo shows no ACTIVE port",
        "UCX sees no verbs transport (rc, ud, dc)",
        "UCX RC bandwidth 310.5 MB/s < 1000.0",
        "NCCL used Socket, not IB",
        "the NCCL all-reduce gave a wrong sum or did not finish",
    ]


def test_no_output_at_all_fails_without_a_traceback():
    failures, _ = verdict.failures_of({}, 1000.0)
    assert "no ucx_perftest result" in failures and len(failures) == 3  # no GPU step: skipped


def test_the_first_active_port_is_what_run_sh_pins(tmp_path, capsys):
    (tmp_path / "devinfo.txt").write_text(DEVINFO)
    assert verdict.main(["--first-active", str(tmp_path / "devinfo.txt")]) == 0
    assert capsys.readouterr().out.strip() == "mlx5_1:1"
