#!/bin/sh
# Rendered by `imagekit adapt` (profile kubeflow-mpi-operator-v2-nonroot): the fixes example/train:1.0 needed.
# Runs once, as root, in the one layer adapt adds.
set -eu
here=/usr/local/share/imagekit-adapt
# R4: workers run sshd; R9: the launcher's mpirun starts ranks over ssh
DEBIAN_FRONTEND=noninteractive sh "$here/apt-install.sh" openssh-server openssh-client

# R9, R10: the same for the ssh client mpirun starts workers with.
touch /etc/ssh/ssh_config
cat "$here/ssh_config.head" /etc/ssh/ssh_config > /etc/ssh/ssh_config.imagekit
mv /etc/ssh/ssh_config.imagekit /etc/ssh/ssh_config

# K1: mpiuser (uid 1000), as the operator runs workers and the launcher. Its own sshd
# is started as `/usr/sbin/sshd -De -f /home/mpiuser/.sshd_config`, with the key the operator
# mounts at /home/mpiuser/.ssh as host key, on port 2222.
if id -u mpiuser > /dev/null 2>&1; then
    if [ "$(id -u mpiuser)" != 1000 ]; then
        echo "imagekit adapt: user mpiuser has uid $(id -u mpiuser), the profile says 1000" >&2
        exit 1
    fi
elif getent passwd 1000 > /dev/null; then
    echo "imagekit adapt: uid 1000 belongs to $(getent passwd 1000 | cut -d: -f1), not mpiuser" >&2
    exit 1
else
    useradd --create-home --uid 1000 --shell /bin/bash mpiuser
fi
mkdir -p /home/mpiuser/.ssh
cp "$here/user-sshd_config" /home/mpiuser/.sshd_config
# K4: a non-root sshd runs no PAM; SetEnv carries the image's environment into its sessions.
printenv | grep -E '^(PATH)=' | sed 's/.*/"&"/' | tr '\n' ' ' \
    | sed 's/^/SetEnv /; s/ $/\n/' >> /home/mpiuser/.sshd_config
chown -R "1000:$(id -g mpiuser)" /home/mpiuser
# torch takes a lock file in a prebuilt op's directory before loading it: the user must be
# able to create one there.
if [ -n "${TORCH_EXTENSIONS_DIR:-}" ] && [ -d "$TORCH_EXTENSIONS_DIR" ]; then
    find "$TORCH_EXTENSIONS_DIR" -type d -exec chmod 1777 {} +
fi
