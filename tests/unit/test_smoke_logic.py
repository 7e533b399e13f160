"""Pure parts of `imagekit smoke`: the operator's topology and hostfile, the default launch
line, rank placement verification and the FAQ diagnoses."""

from __future__ import annotations

from imagekit.run.recommend import LaunchRequest, recommend
from imagekit.run.smoke import (
    PROBE_PATH,
    RankRecord,
    SmokeOptions,
    default_command,
    diagnose,
    launcher_env,
    parse_probe,
    rank_problems,
    topology,
)


def test_topology_uses_the_operators_names_and_hostfile_format():
    top = topology("job-x", workers=2, slots=3)
    assert top.workers == ("job-x-worker-0", "job-x-worker-1")
    assert top.hostfile() == (
        "job-x-worker-0.job-x-worker.default.svc slots=3\n"
        "job-x-worker-1.job-x-worker.default.svc slots=3\n"
    )
    assert [top.expected_host(r) for r in range(6)] == ["job-x-worker-0"] * 3 + [
        "job-x-worker-1"
    ] * 3


def test_trainer_v2_topology_and_launcher_environment():
    """K2: JobSet pod names, the launcher's own name, and the environment Trainer injects."""
    top = topology("tj", workers=2, slots=4, operator="trainer-v2")
    assert top.workers == ("tj-node-0-0", "tj-node-0-1")
    assert top.launcher == "tj-launcher-0-0"
    assert top.hostfile() == "tj-node-0-0.tj slots=4\ntj-node-0-1.tj slots=4\n"
    env = launcher_env(SmokeOptions(operator="trainer-v2", slots=4), top)
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_keep_fqdn_hostnames"] == "true"
    assert env["OMPI_MCA_orte_set_default_slots"] == "4"
    assert env["OMPI_MCA_plm_rsh_args"] == "-o ConnectionAttempts=10"
    with_port = launcher_env(SmokeOptions(operator="trainer-v2", port=2222), top)
    assert with_port["OMPI_MCA_plm_rsh_args"] == "-o ConnectionAttempts=10 -p 2222"
    plain = launcher_env(SmokeOptions(), topology("j", 1, 1))
    assert "OMPI_MCA_orte_set_default_slots" not in plain and "OMPI_MCA_plm_rsh_args" not in plain


def test_default_command_is_the_recommended_line():
    top = topology("j", 2, 2)
    options = SmokeOptions(timeout=60)
    line = default_command(top, {}, options)
    recommended = recommend(
        LaunchRequest(2, 2, ("python3", PROBE_PATH), timeout=75, ld_library_path=False)
    )
    assert line == recommended.argv  # one source of the launch line: imagekit.run.launch
    text = " ".join(line)
    assert text.startswith("mpirun -np 4 -npernode 2 --hostfile /etc/mpi/hostfile")
    assert "-bind-to none -map-by slot -mca pml ob1 -mca btl ^openib" in text
    assert "LD_LIBRARY_PATH" not in text  # unset in the image: -x would only warn
    assert "-x LD_LIBRARY_PATH" in " ".join(
        default_command(top, {"LD_LIBRARY_PATH": "/x"}, options)
    )


def test_default_command_points_ssh_at_the_port():
    line = " ".join(default_command(topology("j", 1, 1), {}, SmokeOptions(port=2222)))
    assert "-mca plm_rsh_args -p 2222" in line


def _ranks(hosts: list[str], size: int = 4) -> list[RankRecord]:
    return [RankRecord(i, size, i % 2, h, size) for i, h in enumerate(hosts)]


def test_rank_placement_passes_when_the_hostfile_is_followed():
    top = topology("j", 2, 2)
    assert (
        rank_problems(_ranks(["j-worker-0", "j-worker-0", "j-worker-1", "j-worker-1"]), top) == []
    )


def test_everything_on_the_launcher_is_caught():
    top = topology("j", 2, 2)
    problems = rank_problems(_ranks(["j-launcher"] * 4), top)
    assert "rank 0 ran on the launcher, the hostfile assigns j-worker-0" in problems
    assert len([p for p in problems if "ran on" in p]) == 4


def test_missing_ranks_and_wrong_world_size_are_caught():
    top = topology("j", 2, 2)
    problems = rank_problems(_ranks(["j-worker-0", "j-worker-0"], size=2), top)
    assert any("expected ranks 0..3" in p for p in problems)
    assert any("world size 2, expected 4" in p for p in problems)


def test_diagnoses_name_the_faq_cause_with_evidence():
    text = "ssh: connect\nroot@w: Permission denied (publickey).\n"
    assert diagnose(text)[0].startswith("R3/R7: publickey denied")
    assert "evidence: root@w: Permission denied (publickey)." in diagnose(text)[0]
    assert diagnose("Missing privilege separation directory: /run/sshd")[0].startswith("R6")
    assert diagnose("mpirun has detected an attempt to run as root.")[0].startswith("R8")
    assert diagnose("ssh: Could not resolve hostname w0: Name or service not known")[0].startswith(
        "W3"
    )
    assert diagnose("all good") == []


def test_probe_lines_a_job_printed_itself_are_not_ranks():
    """A job's output is untrusted: a line with the marker that is not the probe's record is
    passed over, never a traceback."""
    good = 'IMAGEKIT_PROBE {"rank": 0, "size": 1, "local_rank": 0, "host": "w0", "machine": "x"}'
    lines = [
        good,
        "IMAGEKIT_PROBE {",
        "IMAGEKIT_PROBE []",
        'IMAGEKIT_PROBE {"rank": "zero", "size": 1, "local_rank": 0, "host": "w0"}',
        'IMAGEKIT_PROBE {"size": 1}',
        "IMAGEKIT_PROBE " + "[" * 100000,
    ]
    assert [(r.rank, r.host) for r in parse_probe(lines)] == [(0, "w0")]
