"""Judge run.sh's outputs on a host with an HCA; results.json and exit 1 on any failure.
python verdict.py OUTDIR [--min-bandwidth MB/s]
python verdict.py --first-active devinfo.txt      (the first ACTIVE port, e.g. mlx5_0:1)"""

from __future__ import annotations

import json
import pathlib
import re
import sys

RDMA_TRANSPORTS = ("rc", "ud", "dc")
MIN_BANDWIDTH = 1000.0  # MB/s: far below any HCA, far above TCP loopback fallbacks


def active_ports(devinfo: str) -> list[str]:
    """`hca:port` for each port ibv_devinfo shows as PORT_ACTIVE."""
    ports, hca, port = [], None, None
    for line in devinfo.splitlines():
        if m := re.match(r"hca_id:\s*(\S+)", line):
            hca = m[1]
        elif m := re.match(r"\s+port:\s*(\d+)", line):
            port = m[1]
        elif "PORT_ACTIVE" in line and hca and port:
            ports.append(f"{hca}:{port}")
    return ports


def verbs_transports(ucx_info: str) -> list[str]:
    names = set(re.findall(r"#\s*Transport:\s*(\S+)", ucx_info))
    return sorted(n for n in names if n.split("_", 1)[0] in RDMA_TRANSPORTS)


def final_bandwidth(perftest: str) -> float | None:
    """ucx_perftest's `Final:` row: iterations, latency (50%, average, overall), bandwidth
    (average, overall) in MB/s, message rate: the overall bandwidth."""
    for line in reversed(perftest.splitlines()):
        if line.strip().startswith("Final:"):
            numbers = re.findall(r"[0-9]+(?:\.[0-9]+)?", line)
            return float(numbers[5]) if len(numbers) >= 6 else None
    return None


def nccl_network(nccl: str) -> str | None:
    """The network NCCL says it uses: IB, Socket, or a plugin's name."""
    m = re.findall(r"NCCL INFO Using network (\S+)", nccl)
    if m:
        return m[-1]
    if "NCCL INFO NET/IB" in nccl:
        return "IB"
    if "NCCL INFO NET/Socket" in nccl:
        return "Socket"
    return None


def failures_of(outputs: dict[str, str], min_bandwidth: float) -> tuple[list[str], dict]:
    facts: dict = {"active_ports": active_ports(outputs.get("devinfo.txt", ""))}
    failures = []
    if not facts["active_ports"]:
        failures.append("ibv_devinfo shows no ACTIVE port")
    facts["ucx_verbs_transports"] = verbs_transports(outputs.get("ucx.txt", ""))
    if not facts["ucx_verbs_transports"]:
        failures.append("UCX sees no verbs transport (rc, ud, dc)")
    facts["bandwidth_mb_s"] = final_bandwidth(outputs.get("perftest.txt", ""))
    if facts["bandwidth_mb_s"] is None:
        failures.append("no ucx_perftest result")
    elif facts["bandwidth_mb_s"] < min_bandwidth:
        failures.append(f"UCX RC bandwidth {facts['bandwidth_mb_s']} MB/s < {min_bandwidth}")
    if "nccl.txt" in outputs:
        nccl = outputs["nccl.txt"]
        facts["nccl_network"] = nccl_network(nccl)
        if facts["nccl_network"] != "IB":
            failures.append(f"NCCL used {facts['nccl_network'] or 'no network it named'}, not IB")
        if nccl.count("ok=True") < 2:
            failures.append("the NCCL all-reduce gave a wrong sum or did not finish")
    return failures, facts


def main(argv: list[str]) -> int:
    if argv[:1] == ["--first-active"]:
        ports = active_ports(pathlib.Path(argv[1]).read_text())
        print(ports[0] if ports else "")
        return 0
    out = pathlib.Path(argv[0])
    min_bandwidth = float(argv[2]) if argv[1:2] == ["--min-bandwidth"] else MIN_BANDWIDTH
    outputs = {p.name: p.read_text(errors="replace") for p in out.glob("*.txt")}
    failures, facts = failures_of(outputs, min_bandwidth)
    summary = {"facts": facts, "failures": failures}
    (out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
