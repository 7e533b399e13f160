#!/bin/sh
# imagekit-apt-mirror [URL]: point apt's sources at URL instead of deb.debian.org /
# archive.ubuntu.com; without URL, change nothing. The one copy of this rewrite: the
# Dockerfile runs it with `--apt-mirror`, and `imagekit lock` runs it before resolving, so
# a lock is resolved against the mirror the build will use.
#
# imagekit-apt-mirror --public URL: the reverse, for `--final-apt-sources public`: sources
# that name URL go back to the distribution's public archive.
set -e
# The URL is data, not sed: imagekit checks its grammar, but `--build-arg APT_MIRROR=...` or a
# direct `docker build` reaches this script unchecked. No whitespace or control characters
# (a newline would end the sed script), and sed's specials in a replacement escaped (`#` would
# end the s command and let GNU sed's `e` run a command; `&` and `\` have meanings too).
for url in "$@"; do
    case "$url" in
        *[[:space:]]* | *[[:cntrl:]]*)
            echo "imagekit-apt-mirror: the URL holds a space or control character" >&2
            exit 2 ;;
    esac
done
sed_literal() { printf '%s' "$1" | sed 's/[#&\\]/\\&/g'; }
if [ "$1" = --public ]; then
    [ -n "$2" ] || exit 0
    . "${IMAGEKIT_OS_RELEASE:-/etc/os-release}"
    case "$ID" in
        ubuntu) public=http://archive.ubuntu.com/ubuntu/ ;;
        *) public=http://deb.debian.org/debian/ ;;
    esac
    find "${IMAGEKIT_APT_DIR:-/etc/apt}" \( -name '*.list' -o -name '*.sources' \) -exec sed -i \
        "s#$(printf '%s' "${2%/}" | sed 's/[].[*^$#\\]/\\&/g')/#${public}#g" {} +
    exit 0
fi
[ -n "$1" ] || exit 0
find "${IMAGEKIT_APT_DIR:-/etc/apt}" \( -name '*.list' -o -name '*.sources' \) -exec sed -i -E \
    "s#https?://(deb\.debian\.org/debian|archive\.ubuntu\.com/ubuntu)/?#$(sed_literal "${1%/}")/#g" {} +
