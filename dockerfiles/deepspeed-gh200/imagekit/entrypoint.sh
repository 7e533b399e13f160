#!/usr/bin/env bash
# imagekit entrypoint: repairs what a runtime may have reset, then runs the command.
# Nothing sshd needs depends on this script: an operator that starts `/usr/sbin/sshd -De`
# directly (bypassing the entrypoint) still gets a working sshd from the image alone.
set -euo pipefail

# A non-root user (K1) has its own sshd, which needs neither of the repairs below.
if [ "$(id -u)" != 0 ]; then
    exec "$@"
fi

# R6: /run may be a fresh tmpfs at run time.
mkdir -p /run/sshd
chmod 0755 /run/sshd

# Recipes with ssh.host_keys: start generate host keys here, per container.
if ! compgen -G "/etc/ssh/ssh_host_*_key" > /dev/null; then
    ssh-keygen -A > /dev/null
fi

exec "$@"
