# Run by `imagekit check` in the image (sh -c <this file>), once, in the background while the
# first checks run: every fact the version checks (R12) compare, one `KEY<TAB>VALUE` line each,
# so they cost one exec instead of one or two each. A fact whose source is missing is absent.
for command in python3 mpirun; do  # the commands a version check needs
    command -v "$command" >/dev/null 2>&1 && printf 'has\t%s\n' "$command"
done
if command -v python3 >/dev/null 2>&1; then
    python3 - <<'PYTHON' 2>/dev/null
import importlib.metadata as metadata
import json
import sys

print("python\t%d.%d" % sys.version_info[:2])
for name in ("torch", "deepspeed", "nvidia-cuda-runtime-cu12",
             "nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl-cu13"):
    try:
        print(f"dist:{name}\t{metadata.version(name)}")
    except Exception:
        pass
try:
    with open("/usr/local/cuda/version.json") as toolkit:
        print("cuda-json\t" + json.load(toolkit)["cuda"]["version"])
except Exception:
    pass
PYTHON
fi
banner=$(mpirun --version 2>/dev/null)
first=$(printf '%s\n' "$banner" | sed -n '/./{p;q;}')
[ -n "$first" ] && printf 'mpirun-banner\t%s\n' "$first"
version=$(printf '%s\n' "$banner" \
    | sed -n 's/.*Open MPI)\{0,1\} \([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' | head -n 1)
[ -n "$version" ] && printf 'openmpi\t%s\n' "$version"
# K3: the hostfile Open MPI 5's runtime (PRRTE) reads when a launch names none, and where that
# value comes from, as prte_info reports it (wrapped over lines): SOURCE:VALUE.
case $version in
    [5-9].*)
        prte_info --all 2>/dev/null | tr -s ' \n' '  ' | sed -n \
            's/.*"prte_default_hostfile" (current value: "\([^"]*\)", data source: \([^,]*\),.*/prte-default-hostfile\t\2:\1/p'
        ;;
esac
version=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p' | head -n 1)
[ -n "$version" ] && printf 'nvcc\t%s\n' "$version"
# A system NCCL (libnccl.so.X.Y.Z): found_nccl's last resort. The unit tests name other dirs.
lib_dirs=${IMAGEKIT_PROBE_LIB_DIRS:-/usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/lib64}
for dir in $lib_dirs; do
    for lib in "$dir"/libnccl.so.*; do
        version=${lib##*/libnccl.so.}
        case $version in
            *[!0-9.]* | *..* | .* | *.) ;;
            *.*.*) printf 'libnccl\t%s\n' "$version" && break 2 ;;
        esac
    done
done
exit 0
