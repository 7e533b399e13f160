# Run by `imagekit check` in the image (sh -c <this file> sh), once, for A1: the ELF machine of
# every native file a training job loads or runs (Python's packages: torch, mpi4py, DeepSpeed's
# ops; Open MPI; the binaries mpirun starts). `KEY<TAB>VALUE` lines; always prints `end`.
# Paths are printed ASCII-escaped: a file name in an image is untrusted and may hold a tab.
if command -v python3 >/dev/null 2>&1; then
    python3 - <<'PY' 2>/dev/null
import os, shutil, site, sys, sysconfig
os.nice(10)  # below the torch probe, which the checks wait for longest

LIMIT = 200000  # files looked at: a bound on a hostile or huge image
roots = {"/opt/imagekit", "/opt/openmpi", "/usr/lib/python3/dist-packages"}
roots.update(p for p in sysconfig.get_paths().values() if "site-packages" in p or "dist-packages" in p)
roots.update(getattr(site, "getsitepackages", lambda: [])())
multiarch = sysconfig.get_config_var("MULTIARCH")
if multiarch:
    roots.add(f"/usr/lib/{multiarch}/openmpi")
programs = {os.path.realpath(sys.executable)}
for name in ("sh", "bash", "sshd", "ssh", "mpirun", "orted", "prted", "ompi_info"):
    found = shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/bin:/opt/openmpi/bin")
    if found:
        programs.add(os.path.realpath(found))
def native_candidate(entry):
    """Shared libraries (extension modules are *.so too) and executables: the files a job
    loads or runs. Judged by name and the directory entry's type first, so only those are
    stat'ed and opened (torch alone has tens of thousands of other files)."""
    if not entry.is_file(follow_symlinks=False):
        return False
    if ".so" in entry.name:
        return True
    try:
        return "." not in entry.name and entry.stat(follow_symlinks=False).st_mode & 0o111
    except OSError:
        return False
def walk(roots, limit):
    """The native candidates under `roots`, of at most `limit` entries looked at (and
    whether there were more). Links are not followed: the file they name is walked itself."""
    found, seen, stack = [], 0, sorted(roots, reverse=True)
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        below = []
        for entry in entries:
            if seen == limit:
                return found, True
            seen += 1
            if entry.is_dir(follow_symlinks=False):
                below.append(entry.path)
            elif native_candidate(entry):
                found.append(entry.path)
        stack.extend(reversed(below))
    return found, False
listed, truncated = walk(roots, LIMIT)
files = set(programs) | set(listed)
machines = {}
for path in sorted(files):
    try:
        with open(path, "rb") as handle:
            head = handle.read(20)
    except OSError:
        continue
    if len(head) < 20 or head[:4] != b"\x7fELF":
        continue
    order = "little" if head[5] == 1 else "big"
    machine = int.from_bytes(head[18:20], order)
    machines.setdefault(machine, []).append(path)
print(f"elf_files\t{sum(len(v) for v in machines.values())}")
print(f"truncated\t{int(truncated)}")
for machine, paths in sorted(machines.items()):
    print(f"machine.{machine}\t{len(paths)}")
    for index, path in enumerate(paths[:10]):
        print(f"machine.{machine}.{index}\t{ascii(path)[1:-1]}")
PY
else
    printf 'python3\tnone\n'
fi
printf 'end\t1\n'
