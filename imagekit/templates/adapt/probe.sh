#!/bin/sh
# Run by `imagekit adapt` in a throwaway container of the image, as root, with the image's
# own environment: what the image already has, as key=value lines. Changes nothing it keeps.
# Tested first: dash (Debian's sh) exits at a `.` of a missing file, `|| true` or not.
os_release=${IMAGEKIT_OS_RELEASE:-/etc/os-release}
if [ -r "$os_release" ]; then . "$os_release"; else echo "os.release=missing"; fi
echo "os.id=${ID:-}"
echo "os.like=${ID_LIKE:-}"
echo "os.pretty=${PRETTY_NAME:-}"
for c in mpirun orted prted python3 ssh ssh-keygen apt-get; do
    echo "which.$c=$(command -v "$c" 2>/dev/null || true)"
done
for f in /usr/sbin/sshd /bin/bash; do
    [ -x "$f" ] && echo "file.$f=yes"
done
# K3: where the operators mount the hostfile (Open MPI 5 is made to read it by default).
[ -e /etc/mpi/hostfile ] && echo "file./etc/mpi/hostfile=yes"
# K1: a non-root user's own sshd configuration, where mpi-operator's examples keep it.
for f in /home/*/.sshd_config; do
    [ -f "$f" ] && echo "file.$f=yes"
done
# R6: the state the image ships, read before sshd -T below needs the directory.
if [ -d /run/sshd ]; then
    echo "run_sshd=$(stat -c '%U %a' /run/sshd 2>/dev/null)"
fi
echo "host_keys=$(ls /etc/ssh/ssh_host_*_key 2>/dev/null | wc -l)"
if grep -Eq '^session[[:space:]]+required[[:space:]]+pam_loginuid.so' /etc/pam.d/sshd 2>/dev/null; then
    echo "pam_loginuid=required"
fi
# K4: what sshd's sessions get through pam_env.
sed -n 's/^\(PATH\|LD_LIBRARY_PATH\)="\{0,1\}\([^"]*\)"\{0,1\}$/environment.\1=\2/p' /etc/environment 2>/dev/null
if [ -x /usr/sbin/sshd ]; then
    mkdir -p /run/sshd
    key=/tmp/imagekit-adapt-hostkey
    ssh-keygen -q -t ed25519 -N '' -f "$key" >/dev/null 2>&1 || true
    /usr/sbin/sshd -T -h "$key" -C user=root,host=localhost,addr=127.0.0.1 2>/dev/null \
        | sed -n 's/^\([a-z0-9]*\) \(.*\)$/sshd.\1=\2/p'
fi
if command -v ssh >/dev/null 2>&1; then
    ssh -G worker-0 2>/dev/null | sed -n 's/^\([a-z0-9]*\) \(.*\)$/ssh.\1=\2/p'
fi
# L4-L10: Open MPI's version, where it reads its default MCA parameters, and which it has.
if command -v mpirun >/dev/null 2>&1; then
    echo "mpi.version=$(mpirun --version 2>/dev/null | sed -n 's/.*(Open MPI) \([0-9.]*\).*/\1/p' | head -n 1)"
    etc=$(ompi_info --parsable --path sysconfdir 2>/dev/null | sed -n 's/^path:sysconfdir://p')
    echo "mpi.sysconfdir=$etc"
    if [ -n "$etc" ] && [ -f "$etc/openmpi-mca-params.conf" ]; then
        sed -n 's/^[[:space:]]*\([a-z0-9_]*\)[[:space:]]*=.*/mca.\1=set/p' "$etc/openmpi-mca-params.conf"
        echo  # Debian's file ends without a newline
    fi
    # K3: Open MPI 5's runtime (PRRTE) reads its own file there; the values matter.
    if [ -n "$etc" ] && [ -f "$etc/prte-mca-params.conf" ]; then
        sed -n 's/^[[:space:]]*\([a-z0-9_]*\)[[:space:]]*=[[:space:]]*\(.*\)$/prte.\1=\2/p' "$etc/prte-mca-params.conf"
    fi
fi
echo  # the file above may end without a newline
echo "probe=done"
