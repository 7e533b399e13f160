#!/usr/bin/env python3
"""imagekit-ninja-normalize DIR EPOCH: make the ninja state that torch's JIT leaves next to
prebuilt ops (.ninja_log, .ninja_deps) independent of when the build ran.

Ninja records build times and output mtimes there. imagekit's normalization clamps every
file time in the image to EPOCH, so recording EPOCH (in ns) keeps ninja's view consistent:
outputs are not older than inputs, recorded mtimes are not older than outputs, and a
container's first `load()` finds "no work to do" instead of recompiling the op.
"""

import struct
import sys
from pathlib import Path

DEPS_MAGIC = b"# ninjadeps\n"
DEPS_RECORD = 0x80000000


def normalize_log(path: Path, mtime_ns: int) -> None:
    header, *lines = path.read_text().splitlines()
    entries = []
    for line in lines:
        _start, _end, _mtime, output, command_hash = line.split("\t")
        entries.append(f"0\t0\t{mtime_ns}\t{output}\t{command_hash}")
    path.write_text("\n".join([header, *sorted(entries)]) + "\n")


def normalize_deps(path: Path, mtime_ns: int) -> None:
    data = bytearray(path.read_bytes())
    if not data.startswith(DEPS_MAGIC):
        raise SystemExit(f"{path}: not a ninja deps log")
    version = struct.unpack_from("<i", data, len(DEPS_MAGIC))[0]
    if version != 4:
        raise SystemExit(f"{path}: ninja deps log version {version}, expected 4")
    pos = len(DEPS_MAGIC) + 4
    while pos < len(data):
        size = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if size & DEPS_RECORD:
            size &= ~DEPS_RECORD
            struct.pack_into("<Q", data, pos + 4, mtime_ns)  # after the output's node id
        pos += size
    path.write_bytes(bytes(data))


def main(directory: str, epoch: str) -> None:
    mtime_ns = int(epoch) * 10**9
    for log in Path(directory).rglob(".ninja_log"):
        normalize_log(log, mtime_ns)
    for deps in Path(directory).rglob(".ninja_deps"):
        normalize_deps(deps, mtime_ns)


if __name__ == "__main__":
    main(*sys.argv[1:])
