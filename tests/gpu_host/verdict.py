"""Gather run.sh's outputs into results.json and exit 1 if any step failed (run.sh's last
step).    python verdict.py OUTDIR BUILD_SECONDS"""

import json
import pathlib
import sys


def train_line(path: pathlib.Path):
    lines = [line for line in path.read_text().splitlines() if line.startswith("IMAGEKIT_TRAIN ")]
    return json.loads(lines[-1].split(" ", 1)[1]) if lines else None


def unresolved_libraries(text: str) -> dict:
    """libs_probe.sh's lines -> {library: what it lacks}, for every library that does not
    resolve (no mpi4py on these hosts; imagekit check's own judgement handles its ABI builds)."""
    facts = dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)
    found = {}
    for key, path in facts.items():
        if key.startswith("lib.") and key.count(".") == 1:
            missing = facts.get(f"{key}.missing", "").split()
            error = facts.get(f"{key}.error", "").strip()
            if missing or error:
                found[path] = missing or [error]
    return found


def failures_of(probe: dict, optimizer: dict, e1: dict) -> list[str]:
    failures = []
    if probe.get("unresolved"):
        failures.append(f"unresolved libraries: {probe['unresolved']}")
    if not probe.get("nccl") or not probe.get("torch_cuda"):
        failures.append("the probe found no CUDA or no NCCL")
    ops = probe.get("ops") or {}
    failures += [f"op {name}: {state}" for name, state in ops.items() if state != "ok"]
    if not ops:
        failures.append("the probe checked no op")
    failures += [f"optimizer {name}: {r}" for name, r in optimizer.items() if not r.get("ok")]
    for dtype, result in e1.items():
        if result is None:
            failures.append(f"E1 {dtype}: no IMAGEKIT_TRAIN line")
        elif not result["last_loss"] < result["first_loss"]:
            failures.append(f"E1 {dtype}: the loss did not go down ({result})")
        elif not result["device"].startswith("cuda") or result["backend"] != "nccl":
            failures.append(f"E1 {dtype}: ran on {result['device']} over {result['backend']}")
    return failures


def main(out: pathlib.Path, build_seconds: int) -> int:
    probe = json.loads((out / "probe.json").read_text())
    probe["unresolved"] = unresolved_libraries((out / "libs.txt").read_text())
    optimizer = json.loads((out / "optimizer.json").read_text())
    e1 = {dtype: train_line(out / f"e1-{dtype}.txt") for dtype in ("fp32", "bf16")}
    failures = failures_of(probe, optimizer, e1)
    summary = {
        "build_seconds": build_seconds,
        "probe": probe,
        "optimizer": optimizer,
        "e1": e1,
        "failures": failures,
    }
    (out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({"failures": failures, "e1": e1}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]), int(sys.argv[2])))
