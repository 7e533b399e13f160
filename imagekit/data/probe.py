"""imagekit smoke probe: run under mpirun, one line per rank with where and what it is (W6).
With mpi4py present it also does a real allreduce, proving ranks talk across containers."""

import json
import os
import platform
import socket

env = os.environ
record = {
    "rank": int(env.get("OMPI_COMM_WORLD_RANK", env.get("PMI_RANK", "-1"))),
    "size": int(env.get("OMPI_COMM_WORLD_SIZE", env.get("PMI_SIZE", "-1"))),
    "local_rank": int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", "-1")),
    "node_rank": int(env.get("OMPI_COMM_WORLD_NODE_RANK", "-1")),
    "host": socket.gethostname(),
    "uid": os.getuid(),  # root, or a non-root profile's user (K1)
    "machine": platform.machine(),  # A1: what the rank ran as (aarch64 under emulation too)
}
try:
    from mpi4py import MPI

    record["allreduce"] = MPI.COMM_WORLD.allreduce(1)
except ImportError:
    record["allreduce"] = None
print("IMAGEKIT_PROBE " + json.dumps(record, sort_keys=True), flush=True)
