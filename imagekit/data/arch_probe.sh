# Run by `imagekit check` in the image (sh -c <this file> sh), once, for A1: the ELF machine of
# every native file a training job loads or runs (Python's packages: torch, mpi4py, DeepSpeed's
# ops; Open MPI; the binaries mpirun starts). `KEY<TAB>VALUE` lines; always prints `end`.
# Paths are printed ASCII-escaped: a file name in an image is untrusted and may hold a tab.
if command -v python3 >/dev/null 2>&1; then
    python3 - <<'PY' 2>/dev/null
import os, shutil, site, sys, sysconfig

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
files = set(programs)
def walk(roots, limit):
    """Every file under `roots`, at most `limit` of them (and whether there were more)."""
    found = []
    for root in sorted(roots):
        for top, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                if len(found) == limit:
                    return found, True
                found.append(os.path.join(top, name))
    return found, False
listed, truncated = walk(roots, LIMIT)
files.update(listed)
def native_candidate(path):
    """Shared libraries (extension modules are *.so too) and executables: the files a job
    loads or runs. Other files are not opened (torch alone has tens of thousands)."""
    name = os.path.basename(path)
    if ".so" in name:
        return True
    try:
        return "." not in name and os.stat(path).st_mode & 0o111
    except OSError:
        return False
machines = {}
for path in sorted(files):
    try:
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        if path not in programs and not native_candidate(path):
            continue
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
