# Run by `imagekit check` in the image (sh -c <this file> sh PROVIDER...), once, for the fabric
# section (F2): what NCCL's IB transport and Open MPI's UCX PML would find. `KEY<TAB>VALUE`
# lines; always prints `end`.
registered=
for driver in /etc/libibverbs.d/*.driver; do
    [ -f "$driver" ] || continue
    name=$(sed -n 's/^driver[[:space:]]\{1,\}\([A-Za-z0-9_]\{1,\}\).*/\1/p' "$driver" | head -n 1)
    [ -n "$name" ] && registered="$registered,$name"
done
printf 'registered\t%s\n' "${registered#,}"
for provider in "$@"; do
    lib=$(ls /usr/lib/*/libibverbs/lib"$provider"-rdmav*.so /usr/lib/libibverbs/lib"$provider"-rdmav*.so 2>/dev/null | head -n 1)
    printf 'provider.%s\t%s\n' "$provider" "${lib:--}"
    if [ -n "$lib" ] && command -v ldd >/dev/null 2>&1; then
        missing=$(ldd "$lib" 2>/dev/null | sed -n 's/^[[:space:]]*\([^ ]*\) => not found.*/\1/p' | tr '\n' ' ')
        printf 'provider.%s.missing\t%s\n' "$provider" "${missing:--}"
    fi
done
# NCCL dlopens libibverbs.so, then libibverbs.so.1, and asks it for its devices.
if command -v python3 >/dev/null 2>&1; then
    python3 - <<'PY' 2>/dev/null
import ctypes, os
for name in ("libibverbs.so", "libibverbs.so.1"):
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        last = str(exc)
        continue
    count = ctypes.c_int(-1)
    lib.ibv_get_device_list.restype = ctypes.c_void_p
    devices = lib.ibv_get_device_list(ctypes.byref(count))
    errno = ctypes.get_errno()
    state = f"{count.value} devices" if devices else f"no device list: {os.strerror(errno)}"
    if devices:
        lib.ibv_free_device_list(ctypes.c_void_p(devices))
    print(f"verbs\tloaded {name}: {state}")
    break
else:
    print(f"verbs\tmissing: {last}")
PY
else
    printf 'verbs\tno python3\n'
fi
if command -v ompi_info >/dev/null 2>&1; then
    if ompi_info --parsable 2>/dev/null | grep -q '^mca:pml:ucx:'; then
        printf 'pml_ucx\tyes\n'
    else
        printf 'pml_ucx\tno\n'
    fi
fi
if command -v ucx_info >/dev/null 2>&1; then
    printf 'ucx_info\t%s\n' "$(command -v ucx_info)"
    printf 'ucx_transports\t%s\n' "$(ucx_info -d 2>/dev/null | sed -n 's/^#[[:space:]]*Transport: //p' | sort -u | tr '\n' ' ')"
fi
# UCX's verbs transports (rc, ud, dc) live in its IB module.
uct_ib=$(ls /usr/lib/*/ucx/libuct_ib.so* /usr/lib/ucx/libuct_ib.so* 2>/dev/null | head -n 1)
printf 'uct_ib\t%s\n' "${uct_ib:--}"
printf 'end\t1\n'
