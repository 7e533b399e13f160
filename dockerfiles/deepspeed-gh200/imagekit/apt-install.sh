#!/bin/sh
# imagekit-apt-install PACKAGE[=VERSION]...: install without recommends, then remove what
# varies from build to build (package lists, caches, logs), in the same layer.
# A lock file pins exact versions; when the mirror no longer has one, apt's error wall is
# replaced by one marker line naming the pins, which `imagekit build` turns into its error.
# A mirror with credentials (`imagekit build --apt-mirror http://user:TOKEN@...`): the
# credentials come from the URL in APT_AUTH_URL, served by imagekit only while the build
# runs, and are deleted when this script ends, so they never reach a layer. An https mirror
# with a private CA (`--ca-bundle FILE`): the bundle comes from APT_CA_URL the same way.
# apt-get update only warns about an https source it cannot verify, and the install then
# fails with "Unable to locate package"; this script stops at the update instead, with a
# marker line naming the source. `--update-only` stops after the update (lock's resolution).
# POSIX sh, not bash: `imagekit adapt` runs it in images that may lack bash.
set -eu
update_only=false
if [ "${1:-}" = "--update-only" ]; then
    update_only=true
    shift
fi
[ "$#" -gt 0 ] || $update_only || exit 0
auth=/etc/apt/auth.conf.d/imagekit-build.conf
ca=/etc/apt/imagekit-build-ca.pem
ca_conf=/etc/apt/apt.conf.d/00imagekit-build-ca
trap 'rm -f "$auth" "$ca" "$ca_conf"' EXIT
# apt-helper downloads as _apt, who cannot write under /etc/apt: it would warn and fall back
# to root on every RUN. These come from imagekit's own server on the bridge: fetch as root.
fetch="/usr/lib/apt/apt-helper -o APT::Sandbox::User=root download-file"
if [ -n "${APT_CA_URL:-}" ]; then
    $fetch "$APT_CA_URL" "$ca" > /dev/null
    chmod 644 "$ca"
    echo "Acquire::https::CAInfo \"$ca\";" > "$ca_conf"
fi
if [ -n "${APT_AUTH_URL:-}" ]; then
    mkdir -p /etc/apt/auth.conf.d
    (umask 077 && $fetch "$APT_AUTH_URL" "$auth" > /dev/null)
    # apt downloads as _apt: it must read the file, or apt warns and downloads as root.
    chown _apt "$auth" 2> /dev/null || true
fi
log=/tmp/imagekit-apt-update.log
if ! apt-get update > "$log" 2>&1; then
    cat "$log"
    exit 100
fi
cat "$log"
untrusted=$(sed -n 's|^W: Failed to fetch \(https://[^ ]*\)/dists/.*Certificate verification failed.*|\1|p' \
    "$log" | head -n 1)
rm -f "$log"
if [ -n "$untrusted" ]; then
    echo "imagekit-apt-untrusted: $untrusted" >&2
    exit 100
fi
if $update_only; then exit 0; fi
if ! apt-get install -s --no-install-recommends "$@" > /dev/null 2> /tmp/imagekit-apt.err; then
    missing=$(sed -n "s/^E: Version '\([^']*\)' for '\([^']*\)' was not found$/\2=\1/p" /tmp/imagekit-apt.err)
    if [ -n "$missing" ]; then
        echo "imagekit-apt-missing:" $missing
        exit 100
    fi
    cat /tmp/imagekit-apt.err >&2
    exit 100
fi
apt-get install -y --no-install-recommends "$@"
# systemd's postinst (openssh-server depends on it from Debian 13) writes a random machine ID:
# an ID belongs to a machine, not an image. Empty is systemd's "not set yet" (see
# machine-id(5)), and keeps the layer the same on every build.
if [ -s /etc/machine-id ]; then : > /etc/machine-id; fi
rm -rf /tmp/imagekit-apt.err /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
    /var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log /var/cache/ldconfig/aux-cache
