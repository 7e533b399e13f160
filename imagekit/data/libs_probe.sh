# Run by `imagekit check` in the image (sh -c <this file> sh), once, for A1's second half: does
# each native library of torch, its nvidia-* wheels, mpi4py and DeepSpeed's compiled ops find
# the libraries it needs?
# The image's own dynamic loader answers (in trace mode, as ldd runs it, without ldd's bash:
# under qemu each bash costs more than the loader). `KEY<TAB>VALUE` lines; always prints `end`.
# Paths are printed ASCII-escaped: a file name in an image is untrusted and may hold a tab.
if command -v python3 >/dev/null 2>&1; then
    python3 - <<'PY' 2>/dev/null
import importlib.util, os, re, subprocess, sys, time
os.nice(10)  # below the torch probe, which the checks wait for longest

LIMIT = 2000  # libraries looked at: a bound on a hostile or huge image
BUDGET = 240.0  # seconds for every loader run together (a hang in one costs at most 30)
FOUND = re.compile(r"^\s*(\S+) => (/\S*)")
MISSING = re.compile(r"^\s*(\S+) => not found")

def interpreter(path):
    """The dynamic loader an ELF executable names (PT_INTERP): the one the job's python3
    runs under, whatever the architecture. None when the file is not a dynamic ELF."""
    with open(path, "rb") as handle:
        head = handle.read(64)
        if head[:4] != b"\x7fELF":
            return None
        wide, order = head[4] == 2, "little" if head[5] == 1 else "big"
        num = lambda lo, hi: int.from_bytes(head[lo:hi], order)
        phoff = num(32, 40) if wide else num(28, 32)
        phentsize = num(54, 56) if wide else num(42, 44)
        phnum = num(56, 58) if wide else num(44, 46)
        for index in range(min(phnum, 64)):
            handle.seek(phoff + index * phentsize)
            entry = handle.read(phentsize)
            if int.from_bytes(entry[0:4], order) != 3:  # PT_INTERP
                continue
            offset = int.from_bytes(entry[8:16] if wide else entry[4:8], order)
            size = int.from_bytes(entry[32:40] if wide else entry[16:20], order)
            handle.seek(offset)
            return handle.read(min(size, 4096)).split(b"\0")[0].decode("ascii", "replace")
    return None

def package_dir(name):
    """Where a top-level package lives, found without importing it (its code does not run)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    return locations[0] if locations else None

def libraries(roots, limit):
    found = []
    for root in roots:
        for top, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(top, name)
                if ".so" in name and os.path.isfile(path) and not os.path.islink(path):
                    if len(found) == limit:
                        return found, True
                    found.append(path)
    return found, False

deadline = time.monotonic() + BUDGET

def listed(loader, path, env):
    """(resolved paths, missing sonames, error) for one library: the loader in trace mode
    (what ldd sets) lists every library it would load, `not found` for the missing ones."""
    trace = {**env, "LD_TRACE_LOADED_OBJECTS": "1"}
    if time.monotonic() > deadline:
        return [], [], "not read: the probe's time ran out"
    try:
        run = subprocess.run([loader, path], capture_output=True, env=trace,
                             timeout=30, text=True, errors="replace")
    except (OSError, subprocess.SubprocessError) as error:
        return [], [], type(error).__name__
    lines = run.stdout.splitlines()
    missing = sorted({m.group(1) for m in map(MISSING.match, lines) if m})
    resolved = [m.group(2) for m in map(FOUND.match, lines) if m]
    error = "" if run.returncode == 0 or missing else (run.stderr.strip().splitlines() or ["?"])[-1]
    for noise in (f"{path}: ", "error while loading shared libraries: "):  # said once, by us
        error = error.replace(noise, "")
    return resolved, missing, error[:200]

loader = interpreter(os.path.realpath(sys.executable))
if not loader or not os.path.exists(loader):
    print("loader\tnone")
else:
    print(f"loader\t{ascii(loader)[1:-1]}")
    torch = package_dir("torch")
    others = [package_dir("mpi4py"), package_dir("deepspeed"), os.environ.get("TORCH_EXTENSIONS_DIR")]
    # torch's own libraries and the nvidia-* wheels' beside it (CUDA, cuDNN, NCCL), which
    # torch's RUNPATH names: read as they are, with nothing preloaded.
    nvidia = os.path.join(os.path.dirname(torch), "nvidia") if torch else None
    first, truncated = libraries([d for d in (torch, nvidia) if d and os.path.isdir(d)], LIMIT)
    rest, more = libraries([d for d in others if d and os.path.isdir(d)], LIMIT - len(first))
    env = dict(os.environ)
    results = {path: listed(loader, path, env) for path in first}
    # A rank imports torch before mpi4py or an op, so what torch's libraries loaded is there
    # by soname when they load: an op links libc10.so with no RUNPATH, and finds it so.
    preloaded = {os.path.dirname(p) for resolved, _, _ in results.values() for p in resolved}
    preloaded.update(os.path.dirname(p) for p in first)
    inherited = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    env["LD_LIBRARY_PATH"] = ":".join(sorted(preloaded) + inherited)
    results.update((path, listed(loader, path, env)) for path in rest)
    print(f"libs\t{len(results)}")
    print(f"truncated\t{int(truncated or more)}")
    for index, (path, (_, missing, error)) in enumerate(results.items()):
        print(f"lib.{index}\t{ascii(path)[1:-1]}")
        print(f"lib.{index}.missing\t{ascii(' '.join(missing))[1:-1]}")
        print(f"lib.{index}.error\t{ascii(error)[1:-1]}")
PY
else
    printf 'python3\tnone\n'
fi
printf 'end\t1\n'
