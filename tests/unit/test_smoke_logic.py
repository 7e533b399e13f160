"""Pure parts of `imagekit smoke`: the operator's topology and hostfile, the default launch
line, rank placement verification and the FAQ diagnoses."""

from __future__ import annotations

from imagekit.smoke import RankRecord, default_command, diagnose, rank_problems, topology


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


def test_default_command_is_the_seeds_recommended_line():
    top = topology("j", 2, 2)
    line = " ".join(default_command(top, env={}))
    assert line.startswith(
        "mpirun -np 4 -npernode 2 --hostfile /etc/mpi/hostfile --allow-run-as-root"
    )
    assert "-bind-to none -map-by slot -mca pml ob1 -mca btl ^openib -x PATH" in line
    assert "LD_LIBRARY_PATH" not in line  # unset in the image: -x would only warn
    assert "-x LD_LIBRARY_PATH" in " ".join(default_command(top, env={"LD_LIBRARY_PATH": "/x"}))


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
