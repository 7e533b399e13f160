#!/bin/sh
# Rendered by `imagekit adapt` (profile seed): the fixes example/train:1.0 needed.
# Runs once, as root, in the one layer adapt adds.
set -eu
here=/usr/local/share/imagekit-adapt
# R4: workers run sshd; R9: the launcher's mpirun starts ranks over ssh
DEBIAN_FRONTEND=noninteractive sh "$here/apt-install.sh" openssh-server openssh-client

# R3, R5, R10: sshd keeps the first value it reads for a keyword, so imagekit's go first.
cat "$here/sshd_config.head" /etc/ssh/sshd_config > /etc/ssh/sshd_config.imagekit
mv /etc/ssh/sshd_config.imagekit /etc/ssh/sshd_config

# R9, R10: the same for the ssh client mpirun starts workers with.
touch /etc/ssh/ssh_config
cat "$here/ssh_config.head" /etc/ssh/ssh_config > /etc/ssh/ssh_config.imagekit
mv /etc/ssh/ssh_config.imagekit /etc/ssh/ssh_config

# R3: pam_loginuid cannot write the login UID in a container; required, it ends every login.
sed -i 's/^session\s\+required\s\+pam_loginuid.so/session optional pam_loginuid.so/' /etc/pam.d/sshd

# R6: sshd dies without its privilege separation directory.
mkdir -p /run/sshd
chown root:root /run/sshd
chmod 0755 /run/sshd

# R4: `sshd -De`, as operators start it, needs host keys in the image (declared by label).
ssh-keygen -A

