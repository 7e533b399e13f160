#!/usr/bin/env bash
# imagekit-apt-install PACKAGE[=VERSION]...: install without recommends, then remove what
# varies from build to build (package lists, caches, logs), in the same layer.
# A lock file pins exact versions; when the mirror no longer has one, apt's error wall is
# replaced by one marker line naming the pins, which `imagekit build` turns into its error.
set -euo pipefail
[ "$#" -gt 0 ] || exit 0
apt-get update
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
rm -rf /tmp/imagekit-apt.err /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
    /var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log /var/cache/ldconfig/aux-cache
