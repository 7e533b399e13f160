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

# L4-L10: Open MPI's launch defaults where the image sets none (mpirun flags still win).
echo >> /etc/openmpi/openmpi-mca-params.conf  # Debian's own file ends without a newline
cat >> /etc/openmpi/openmpi-mca-params.conf <<'IMAGEKIT'
# Added by `imagekit adapt`: Open MPI defaults for MPIJobs on Kubernetes.
btl_tcp_if_exclude = lo,docker0
IMAGEKIT

# K3 L4-L10: PRRTE's launch defaults where the image sets none (mpirun flags still win).
echo >> /etc/openmpi/prte-mca-params.conf  # Debian's own file ends without a newline
cat >> /etc/openmpi/prte-mca-params.conf <<'IMAGEKIT'
# Added by `imagekit adapt`: PRRTE defaults for MPIJobs on Kubernetes.
prte_default_hostfile = /etc/mpi/hostfile
prte_keep_fqdn_hostnames = 1
oob_tcp_if_exclude = lo,docker0
plm_ssh_no_tree_spawn = 1
IMAGEKIT

# K3: PRRTE now reads the operators' hostfile by default and fails when it is missing; the
# operator mounts the real one over this placeholder, which lists no hosts.
if [ ! -e /etc/mpi/hostfile ]; then
    mkdir -p "$(dirname /etc/mpi/hostfile)"
    cp /usr/local/share/imagekit-adapt/hostfile-placeholder /etc/mpi/hostfile
    chmod 0644 /etc/mpi/hostfile
fi

