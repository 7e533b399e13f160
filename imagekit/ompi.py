"""Open MPI facts shared by plans, launch lines and compatibility rules. No heavy imports:
`imagekit mpirun` reads these at start-up."""

from __future__ import annotations

# Where the operators mount the hostfile (mpi-operator and Trainer v2 alike): launch lines name
# it (L2), and Open MPI 5 images read it by default (K3).
OPERATOR_HOSTFILE = "/etc/mpi/hostfile"


def openmpi_major(version: str) -> int | None:
    """5 for "5.0.7"; None for a version that names no major ("", "unknown")."""
    major = version.split(".", 1)[0]
    return int(major) if major.isdigit() else None


# Open MPI 5 (PRRTE) names for ORTE's (prte_info of Open MPI 5.0.7; K3).
OMPI5_MCA_RENAMES = {
    "plm_rsh_no_tree_spawn": "plm_ssh_no_tree_spawn",
    "plm_rsh_agent": "plm_ssh_agent",
    "plm_rsh_args": "plm_ssh_args",
    "orte_default_hostfile": "prte_default_hostfile",
    "orte_keep_fqdn_hostnames": "prte_keep_fqdn_hostnames",
    "orte_set_default_slots": "prte_set_default_slots",
}

# What Open MPI 5 (PRRTE) no longer has of ORTE's parameters (K3). Each was run against
# Debian 13's Open MPI 5.0.7: it rejects -quiet, and -npernode with -map-by is an error.
OMPI5_GONE = {
    "orte_abort_on_non_zero_status": "Open MPI 5 ends the job when a rank exits non-zero",
    "orte_base_help_aggregate": "Open MPI 5 has no orte_* parameters",
}
