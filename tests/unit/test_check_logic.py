"""Pure parts of `imagekit check`: profiles, layer shadowing, report formats."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree as ET

import pytest

from imagekit.checks.report import (
    CheckReport,
    CheckResult,
    to_json,
    to_junit,
    to_markdown,
    write_report,
)
from imagekit.errors import UsageError
from imagekit.image.layers import walk
from imagekit.profiles import builtin_profiles, load_profile


def test_builtin_profiles():
    profiles = builtin_profiles()
    assert profiles["seed"].port == 22 and set(profiles["seed"].user_keys) == {"image", "mounted"}
    kubeflow = profiles["kubeflow-mpi-operator-v2"]
    assert kubeflow.port == 2222 and kubeflow.user_keys == ("mounted",)
    assert not kubeflow.non_root and kubeflow.key_dir == "/root/.ssh"
    nonroot = profiles["kubeflow-mpi-operator-v2-nonroot"]  # K1's examples
    assert nonroot.non_root and nonroot.user == "mpiuser" and nonroot.port == 2222
    assert nonroot.key_dir == "/home/mpiuser/.ssh"
    assert nonroot.sshd_config == "/home/mpiuser/.sshd_config"
    trainer = profiles["kubeflow-trainer-v2"]  # K2
    assert trainer.secret_files == "group-readable" and trainer.key_type == "ecdsa"
    assert trainer.key_dir == "/home/mpiuser/.ssh" and trainer.port == 2222


def test_a_non_root_profile_defaults_its_key_dir_to_the_users_home(tmp_path):
    custom = tmp_path / "train.yaml"
    custom.write_text("user: trainer\nport: 2222\n")
    assert load_profile(str(custom)).key_dir == "/home/trainer/.ssh"
    custom.write_text("user: 'Bad User'\n")
    with pytest.raises(UsageError, match="user"):
        load_profile(str(custom))


def test_unknown_profile_suggests(tmp_path):
    with pytest.raises(UsageError, match="did you mean 'seed'"):
        load_profile("sede")
    custom = tmp_path / "mine.yaml"
    custom.write_text("port: 2022\nuser_keys: [mounted]\n")
    assert load_profile(str(custom)).port == 2022 and load_profile(str(custom)).name == "mine"
    custom.write_text("port: 0\n")
    with pytest.raises(UsageError, match="port"):
        load_profile(str(custom))
    with pytest.raises(UsageError, match="no such file"):
        load_profile(str(tmp_path / "nope.yaml"))


@pytest.mark.parametrize(
    "body, message",
    [
        ("prot: 2222\n", "prot: unknown key (did you mean 'port'?)"),
        (
            "probes:\n- {id: a, title: t, exex: 'true'}\n",
            "probes.0.exex: unknown key (did you mean",
        ),
        ("port: twenty\n", "port: Input should be a valid integer"),
        (
            "port: 2222\nuser: mpiuser\nport: 22\n",
            "line 3: key 'port' given twice (first on line 1); YAML would silently keep only",
        ),
    ],
)
def test_a_profile_files_problem_reads_like_a_recipes(tmp_path, body, message):
    """Profiles, recipes and locks share one wording: unknown keys get "did you mean" (the
    profile said "Extra inputs are not permitted" and named no field to use instead)."""
    custom = tmp_path / "mine.yaml"
    custom.write_text(body)
    with pytest.raises(UsageError) as info:
        load_profile(str(custom))
    assert str(info.value).startswith(f"--profile {custom}: {message}"), info.value


def test_every_problem_of_a_profile_is_named_on_its_one_line(tmp_path):
    custom = tmp_path / "mine.yaml"
    custom.write_text("prot: 2222\nuser_keys: [baked]\nrun_as_root: always\nuid: -1\nx: 1\n")
    with pytest.raises(UsageError) as info:
        load_profile(str(custom))
    line = str(info.value)
    assert "\n" not in line and line.startswith(f"--profile {custom}: ")
    # the misspelt keys first (pydantic lists them last), then the others in the file's order
    first = "prot: unknown key (did you mean 'port'?); x: unknown key; user_keys.0: "
    assert line.startswith(f"--profile {custom}: {first}"), line
    assert line.endswith("(and 2 more)"), line


@pytest.mark.parametrize(
    "probes, message",
    [
        ("- {id: a, title: t}", "exactly one of exec or tcp"),
        ("- {id: a, title: t, exec: 'true', tcp: 22}", "exactly one of exec or tcp"),
        ("- {id: a, title: t, exec: 'true', output: '('}", "not a regular expression"),
        ("- {id: a, title: t, tcp: 22}\n- {id: a, title: u, tcp: 23}", "unique: a"),
        ("- {id: Bad Id, title: t, tcp: 22}", "probes.0.id"),
    ],
)
def test_profile_probes_are_validated(tmp_path, probes, message):
    custom = tmp_path / "mine.yaml"
    custom.write_text(f"probes:\n{probes}\n")
    with pytest.raises(UsageError, match=message):
        load_profile(str(custom))


def test_a_valid_probe_loads(tmp_path):
    custom = tmp_path / "mine.yaml"
    custom.write_text("probes:\n- {id: ok, title: t, exec: 'test -d /run/sshd', output: ''}\n")
    (probe,) = load_profile(str(custom)).probes
    assert probe.exec == "test -d /run/sshd" and probe.exit_code == 0
    assert probe.requirement == "profile"


def _layer(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _archive(path: Path, layers: list[dict[str, bytes]]) -> Path:
    names = [f"l{i}/layer.tar" for i in range(len(layers))]
    blobs = {n: _layer(files) for n, files in zip(names, layers, strict=True)}
    blobs["manifest.json"] = json.dumps([{"Layers": names}]).encode()
    path.write_bytes(_layer(blobs))
    return path


def test_walk_marks_deleted_and_overwritten_files(tmp_path):
    archive = _archive(
        tmp_path / "img.tar",
        [
            {"etc/a": b"1", "tmp/ca.pem": b"-----BEGIN CERTIFICATE-----", "etc/keep": b"k"},
            {"tmp/.wh.ca.pem": b"", "etc/a": b"2"},
        ],
    )
    files = {(f.layer, f.path): f for f in walk(archive, inspect=lambda p, s: p.endswith(".pem"))}
    assert files[(0, "tmp/ca.pem")].shadowed and files[(0, "tmp/ca.pem")].head.startswith(b"-----")
    assert files[(0, "etc/a")].shadowed and not files[(1, "etc/a")].shadowed
    assert not files[(0, "etc/keep")].shadowed
    assert not any(".wh." in path for _, path in files)
    with open(archive, "rb") as stream:  # the same from a non-seekable stream
        assert len(walk(stream)) == len(files)


def _report(status: str) -> CheckReport:
    return CheckReport(
        image="img:1",
        image_id="sha256:x",
        profile="seed",
        expected_source="labels",
        results=[CheckResult("run-sshd", "R6", "t", status, "evidence | x", "mkdir")],
    )


def test_report_formats_and_verdict(tmp_path):
    assert _report("pass").passed and _report("warn").passed and not _report("fail").passed
    assert not CheckReport("i", "x", "seed", "").passed  # no results is no pass
    body = json.loads(to_json(_report("fail")))
    assert body["schema"] == "imagekit.check-report/v1" and body["passed"] is False
    assert "order" not in body["results"][0]
    suite = ET.fromstring(to_junit(_report("fail")))
    assert suite.get("failures") == "1" and suite.find("testcase/failure") is not None
    assert "evidence \\| x" in to_markdown(_report("fail"))
    target = write_report(_report("pass"), tmp_path / "r" / "out.json", "json")
    assert json.loads(target.read_text())["passed"] is True
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]


def test_chunk_stream_reads_like_a_file(tmp_path):
    from imagekit.engine.client import ChunkStream

    archive = _archive(tmp_path / "img.tar", [{"a": b"x" * 5000, "b": b"y"}])
    data = archive.read_bytes()
    chunks = (data[i : i + 777] for i in range(0, len(data), 777))
    files = walk(io.BufferedReader(ChunkStream(chunks)))
    assert {f.path: f.size for f in files} == {"a": 5000, "b": 1}


def test_report_format_from_suffix_or_flag():
    from pathlib import Path

    from imagekit.checks.report import report_format

    assert report_format(Path("a/check.json"), None) == "json"
    assert report_format(Path("check.MD"), None) == "markdown"
    assert report_format(Path("junit.xml"), None) == "junit"
    assert report_format(Path("out.txt"), "json") == "json"
    with pytest.raises(UsageError, match=r"--report out.txt: cannot tell the format"):
        report_format(Path("out.txt"), None)


def _run_probe(tmp_path: Path, torch_init: str, ops: str = "") -> dict:
    """data/cuda_probe.py as `check` runs it (python3 -c SCRIPT OPS), against a stand-in
    torch package: the JSON contract the CUDA checks read."""
    (tmp_path / "torch" / "lib").mkdir(parents=True)
    (tmp_path / "torch" / "__init__.py").write_text(torch_init)
    script = resources.files("imagekit").joinpath("data/cuda_probe.py").read_text("utf-8")
    out = subprocess.run(
        [sys.executable, "-c", script, ops],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


CUDA_TORCH = """
class version:
    cuda = "12.4"
class _Nccl:
    @staticmethod
    def version():
        return (2, 21, 5)
class cuda:
    nccl = _Nccl
"""


def test_one_probe_reports_torchs_cuda_and_nccl(tmp_path):
    found = _run_probe(tmp_path, CUDA_TORCH)
    assert found["torch_cuda"] == "12.4" and found["nccl"] == "2.21.5"
    assert found["ops"] == {} and set(found) == {"torch", "torch_cuda", "nccl", "ops"}


def test_probe_on_cpu_torch_has_no_cuda_or_nccl(tmp_path):
    cpu = "class version:\n    cuda = None\nclass cuda:\n    nccl = None\n"
    found = _run_probe(tmp_path, cpu)
    assert found["torch_cuda"] is None and found["nccl"] is None


def _marking_torch(tmp_path: Path, version_py: str, installed_ops: str | None = None) -> Path:
    """A stand-in torch whose import leaves a mark, with its generated version.py (and a
    DeepSpeed with its generated installed-ops file)."""
    mark = tmp_path / "imported"
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(version_py)
    if installed_ops is not None:
        (tmp_path / "deepspeed").mkdir()
        (tmp_path / "deepspeed" / "__init__.py").write_text("")
        (tmp_path / "deepspeed" / "git_version_info_installed.py").write_text(
            f"version='0.19.8'\ninstalled_ops={installed_ops}\n"
        )
    return mark


MARKING_INIT = "open({mark!r}, 'w').close()\nclass version:\n    cuda = None\n"


@pytest.mark.parametrize(
    "version_py, installed_ops, imported",
    [
        ("cuda: Optional[str] = None\n", "{'cpu_adam': False}", False),
        ("cuda = None\n", None, False),  # torch without DeepSpeed
        ("cuda: Optional[str] = '12.4'\n", "{'cpu_adam': False}", True),  # NCCL to ask
        ("cuda = None\n", "{'cpu_adam': True}", True),  # an installed op to import
        ("cuda = None\n", "not a dict", True),
        ("", "{}", True),  # no version.py facts: import to know
        ("cuda = open('/tmp/x').read()\n", "{}", True),  # code is never run, only literals
    ],
)
def test_the_probe_imports_torch_only_when_something_needs_importing(
    tmp_path, version_py, installed_ops, imported
):
    """Issue 39: a CPU torch with no op to import is known from its generated files; importing
    torch and DeepSpeed cost the check's cold run seconds of CPU for nothing."""
    mark = _marking_torch(tmp_path, version_py, installed_ops)
    found = _run_probe(tmp_path, MARKING_INIT.format(mark=str(mark)))
    assert mark.exists() == imported, found
    assert found["ops"] == {} and found["nccl"] is None, found


def test_probe_reports_a_torch_that_cannot_import_for_each_wanted_op(tmp_path):
    found = _run_probe(tmp_path, "raise ImportError('libtorch_cpu.so: cannot open')", "FusedAdam")
    assert found["torch_cuda"] is None
    assert "libtorch_cpu.so" in found["ops"]["FusedAdam"]


def test_imagekit_hosts_run_commands_through_the_engine_connection(monkeypatch):
    """`imagekit://USER@ID` hosts (checks/backend.py) exec through a Container handle, as
    the profile's user, with stdout and stderr kept apart; no docker CLI process."""
    import testinfra

    from imagekit.checks import backend

    calls = []

    class Recording:
        def __init__(self, engine, container_id, name):
            self.id = container_id

        def exec_split(self, argv, user=None):
            calls.append((self.id, argv, user))
            return 3, b"out\n", b"err\n"

    monkeypatch.setattr(backend, "Container", Recording)
    monkeypatch.setattr(backend, "_connection", lambda: None)
    host = testinfra.get_host(backend.hostspec("c0ffee-unit-test", "mpiuser"))
    result = host.run("echo %s", "a b")
    assert calls == [("c0ffee-unit-test", ["/bin/sh", "-c", "echo 'a b'"], "mpiuser")]
    assert (result.rc, result.stdout_bytes, result.stderr_bytes) == (3, b"out\n", b"err\n")


def _run_versions_probe(tmp_path, tools: dict[str, str], env=None) -> dict:
    """data/versions_probe.sh run by the host's sh with a PATH of stand-ins that print
    `tools[name]`, this interpreter as python3, and the sed and head the probe uses."""
    import os
    import shutil

    from imagekit.checks.runner import parse_probe_output

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, output in tools.items():
        (bin_dir / name).write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\n")
        (bin_dir / name).chmod(0o755)
    os.symlink(sys.executable, bin_dir / "python3")
    for tool in ("sed", "head", "tr"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    script = resources.files("imagekit").joinpath("data/versions_probe.sh").read_text("utf-8")
    out = subprocess.run(
        ["/bin/sh", "-c", script],
        env={"PATH": str(bin_dir), **(env or {})},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return parse_probe_output(out.stdout)


def test_versions_probe_reads_every_version_in_one_run(tmp_path):
    facts = _run_versions_probe(
        tmp_path,
        {
            "mpirun": "mpirun (Open MPI) 4.1.4",
            "nvcc": "Cuda compilation tools, release 12.4, V12.4.131",
        },
    )
    python3 = str(tmp_path / "bin" / "python3")
    version = subprocess.check_output(
        [python3, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], text=True
    )
    assert facts["has"] == {"python3", "mpirun"}  # what the version checks skip without
    assert facts["python"] == version.strip()
    assert (facts["openmpi"], facts["nvcc"]) == ("4.1.4", "12.4")
    dists = {key for key in facts if key.startswith("dist:")}
    assert dists <= {
        f"dist:{name}"
        for name in ("torch", "deepspeed", "nvidia-cuda-runtime-cu12")
        + tuple(f"nvidia-nccl-cu{major}" for major in (11, 12, 13))
    }


# prte_info --all as Debian 13's Open MPI 5.0.7 prints the parameter: wrapped over lines.
PRTE_INFO = """                MCA prte: "prte_default_hostfile" (current value:
                          "/etc/openmpi/prte-default-hostfile", data source:
                          default, type: string)
                          Name of the default hostfile (relative or absolute"""


def test_versions_probe_reads_open_mpi_5s_default_hostfile_across_wrapped_lines(tmp_path):
    facts = _run_versions_probe(
        tmp_path, {"mpirun": "mpirun (Open MPI) 5.0.7", "prte_info": PRTE_INFO}
    )
    assert facts["prte-default-hostfile"] == "default:/etc/openmpi/prte-default-hostfile"
    (tmp_path / "four").mkdir()
    four = _run_versions_probe(
        tmp_path / "four", {"mpirun": "mpirun (Open MPI) 4.1.4", "prte_info": PRTE_INFO}
    )
    assert "prte-default-hostfile" not in four  # ORTE: no PRRTE to ask


def test_versions_probe_leaves_out_what_is_missing(tmp_path):
    facts = _run_versions_probe(tmp_path, {"mpirun": "prterun (PRRTE) 3.0.6"})
    assert facts["has"] == {"python3", "mpirun"}
    assert "openmpi" not in facts and "nvcc" not in facts


def test_versions_probe_finds_a_system_nccl_by_its_full_version(tmp_path):
    first, second = tmp_path / "lib", tmp_path / "cuda-lib64"
    for directory, names in {
        first: ["libnccl.so", "libnccl.so.2"],  # links without the full version: skipped
        second: ["libnccl.so.2.18.3", "libnccl.so.2.18.3.bak"],
    }.items():
        directory.mkdir()
        for name in names:
            (directory / name).write_text("")
    facts = _run_versions_probe(tmp_path, {}, {"IMAGEKIT_PROBE_LIB_DIRS": f"{first} {second}"})
    assert facts["libnccl"] == "2.18.3"
    (tmp_path / "empty").mkdir()
    none = _run_versions_probe(
        tmp_path / "empty", {}, {"IMAGEKIT_PROBE_LIB_DIRS": str(tmp_path / "empty")}
    )
    assert "libnccl" not in none


def test_version_facts_parse_tabbed_lines_and_ignore_the_rest():
    from imagekit.checks.runner import parse_probe_output

    facts = parse_probe_output(
        "has\tmpirun\nnoise\npython\t3.11\nopenmpi\t\nhas\tpython3\nkey\t/a\nkey\t/b\n"
    )
    assert facts == {"has": {"mpirun", "python3"}, "python": "3.11", "keys": ["/a", "/b"]}


def _key(path, layer=3, shadowed=False):
    from imagekit.image.layers import LayerFile

    return LayerFile(layer, path, 400, 0o600, shadowed=shadowed)


def test_keys_inside_installed_packages_are_named_but_not_counted():
    from imagekit.checks.layerscan import key_kind, sort_keys

    assert key_kind("etc/ssh/ssh_host_rsa_key") == "host"
    assert key_kind("root/.ssh/id_rsa") == "user"
    assert key_kind("opt/app/deploy.pem") == "user"
    fixture = "usr/lib/python3/dist-packages/fsspec/implementations/tests/keycert.pem"
    assert key_kind(fixture) == "package"
    assert key_kind("opt/venv/lib/python3.11/site-packages/tornado/test/test.key") == "package"
    assert key_kind("usr/share/doc/openssl/demo.key") == "package"
    # an ssh key file name is a login key wherever it sits
    assert key_kind("usr/local/lib/python3.12/site-packages/app/id_ed25519") == "user"
    bad, declared, packaged = sort_keys(
        [_key("root/.ssh/id_rsa"), _key(fixture), _key("etc/ssh/ssh_host_ed25519_key")],
        allowed={"host"},
    )
    assert bad == ["user key /root/.ssh/id_rsa (layer 3)"]
    assert declared == ["host key /etc/ssh/ssh_host_ed25519_key (layer 3)"]
    assert packaged == [f"package key /{fixture} (layer 3)"]


def test_a_deleted_key_is_undeclared_whatever_its_kind():
    from imagekit.checks.layerscan import sort_keys

    fixture = "usr/lib/python3/dist-packages/demo/tests/server.key"
    bad, declared, packaged = sort_keys(
        [_key(fixture, shadowed=True), _key("etc/ssh/ssh_host_rsa_key", shadowed=True)],
        allowed={"host", "user"},
    )
    assert len(bad) == 2 and not declared and not packaged
    assert all("deleted later but still shipped" in entry for entry in bad)


def _run_initial_probe(tmp_path, user: str, commands: list[str], key_names=()) -> dict:
    """data/initial_probe.sh run by the host's sh, with stand-ins for `commands` on PATH and
    `key_names` in the key directory."""
    import os
    import shutil

    from imagekit.checks.runner import parse_probe_output

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in commands:
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    for tool in ("stat", "id"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    script = resources.files("imagekit").joinpath("data/initial_probe.sh").read_text("utf-8")
    keys = tmp_path / "keys"
    keys.mkdir()
    for name in key_names:
        (keys / name).write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    argv = [
        *("/bin/sh", "-c", script, "sh", user, str(keys)),
        *("python3", "mpirun", "ssh", "orted", "prted"),
    ]
    out = subprocess.run(argv, env={"PATH": str(bin_dir)}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return parse_probe_output(out.stdout)


def test_initial_probe_reads_every_fact_in_one_run(tmp_path):
    import os

    facts = _run_initial_probe(tmp_path, "root", ["mpirun", "prted"], ["id_ed25519", "id_rsa"])
    assert facts["end"] == "1" and facts["has"] == {"mpirun", "prted"}
    assert facts["keys"] == [str(tmp_path / "keys" / name) for name in ("id_rsa", "id_ed25519")]
    assert (facts["uid"], facts["gid"]) == ("0", "0")
    expected_run_sshd = "missing"
    if os.path.isdir("/run/sshd"):
        st = os.stat("/run/sshd")
        expected_run_sshd = f"{'root' if st.st_uid == 0 else st.st_uid} {oct(st.st_mode)[-3:]}"
    assert facts["run_sshd"].startswith(expected_run_sshd)
    sshd = next((p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.path.exists(p)), None)
    assert facts.get("sshd") == sshd
    bash = next((p for p in ("/bin/bash", "/usr/bin/bash") if os.path.exists(p)), None)
    assert facts.get("bash") == bash


def test_initial_probe_leaves_out_a_missing_user(tmp_path):
    facts = _run_initial_probe(tmp_path, "no-such-user-here", [])
    assert "uid" not in facts and "gid" not in facts and facts["has"] == set()
    assert facts["keys"] == []
    assert facts["end"] == "1"


class _CountingHost:
    def __init__(self, rc=0, stdout=""):
        self.commands: list[str] = []
        self.rc, self.stdout = rc, stdout

    def run(self, command, prints=False):
        self.commands.append(command)
        return SimpleNamespace(rc=self.rc, stdout=self.stdout, stderr="")


def test_probed_facts_cost_no_exec_and_others_are_asked_once():
    from imagekit.checks.facts import bash_path, has, sshd_binary

    probed = SimpleNamespace(initial={"end": "1", "has": {"mpirun"}, "sshd": "/usr/sbin/sshd"})
    host = _CountingHost()
    assert has(probed, host, "mpirun") and not has(probed, host, "ssh")
    assert sshd_binary(probed, host) == "/usr/sbin/sshd" and bash_path(probed, host) is None
    assert host.commands == []
    assert has(probed, host, "nvidia-smi") and has(probed, host, "nvidia-smi")  # not probed
    assert host.commands == ["command -v nvidia-smi"]
    unprobed = SimpleNamespace(initial={"run_sshd": "missing"})  # the probe could not run
    other = _CountingHost(stdout="/usr/local/sbin/sshd\n")
    assert has(unprobed, other, "mpirun") and sshd_binary(unprobed, other) == "/usr/local/sbin/sshd"
    assert len(other.commands) == 2


class _ShellHost:
    """A testinfra-like host that runs commands with this machine's sh and a given PATH."""

    def __init__(self, path: str):
        self.path = path

    def run(self, command, prints=False):
        import os

        env = {**os.environ, "PATH": self.path}
        out = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True)
        return SimpleNamespace(rc=out.returncode, stdout=out.stdout, stderr=out.stderr)


def test_both_mpiruns_report_each_launch_apart(tmp_path):
    """A stand-in mpirun that, like Open MPI as root, aborts unless --allow-run-as-root."""
    from imagekit.checks.facts import both_mpiruns

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").write_text(
        '#!/bin/sh\ncase " $* " in *" --allow-run-as-root "*) exit 0;; esac\n'
        'echo "mpirun has detected an attempt to run as root" >&2; exit 1\n'
    )
    (bin_dir / "mpirun").chmod(0o755)
    bare, flagged = both_mpiruns(_ShellHost(f"{bin_dir}:/usr/bin:/bin"))
    assert bare == (1, "mpirun has detected an attempt to run as root")
    assert flagged == (0, "")


def test_both_mpiruns_fail_the_check_when_the_shell_cannot_run_them(tmp_path):
    from imagekit.checks.facts import both_mpiruns

    class _Broken:
        def run(self, command, prints=False):
            return SimpleNamespace(rc=126, stdout="", stderr="sh: not found")

    with pytest.raises(pytest.fail.Exception, match="could not run mpirun"):
        both_mpiruns(_Broken())


def _sshd_ctx(binary: str):
    profile = SimpleNamespace(non_root=True, sshd_config="/etc/ssh/sshd_config")
    return SimpleNamespace(profile=profile, initial={"end": "1", "has": set(), "sshd": binary})


def test_start_sshd_sees_its_port_listen_in_one_exec(tmp_path):
    """The start-and-wait script finds a listening port in /proc/net/tcp (a socket of this
    test stands in for sshd); a start that exits non-zero is not waited for, and the
    evidence carries sshd's own words."""
    import socket

    from imagekit.checks.facts import start_sshd

    host = _ShellHost("/usr/bin:/bin")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        started = start_sshd(host, _sshd_ctx("/bin/true"), {"port": str(port)})
    assert started.running and started.evidence == f"sshd listening on {port}"
    refusing = tmp_path / "sshd"
    refusing.write_text("#!/bin/sh\necho 'sshd: no hostkeys available -- exiting.' >&2\nexit 1\n")
    refusing.chmod(0o755)
    started = start_sshd(host, _sshd_ctx(str(refusing)), {"port": str(port)})
    assert not started.running
    assert started.evidence == (
        f"sshd did not listen on port {port}: sshd: no hostkeys available -- exiting."
    )


def test_a_started_sshd_whose_output_the_engine_lost_still_counts_as_started():
    """The script's exit code says `listening` too: sshd cannot be started twice, so the
    start is not asked again when the engine loses its output (moby#27289)."""
    from imagekit.checks.facts import start_sshd

    class _Silent:
        def run(self, command, prints=False):
            return SimpleNamespace(rc=0, stdout="", stderr="")

    started = start_sshd(_Silent(), _sshd_ctx("/bin/true"), {"port": "22"})
    assert started.running and started.port == 22


def test_sshd_settings_and_its_config_test_come_apart_from_one_output():
    from imagekit.checks.facts import EXIT_MARK, split_sshd_output

    good = f"port 22\nStrictModes no\n{EXIT_MARK} 0\n{EXIT_MARK} 0\n\n"
    assert split_sshd_output(good) == ({"port": "22", "strictmodes": "no"}, 0, "")
    no_keys = f"port 22\n{EXIT_MARK} 0\n{EXIT_MARK} 1\nsshd: no hostkeys available -- exiting.\n"
    assert split_sshd_output(no_keys) == (
        {"port": "22"},
        1,
        "sshd: no hostkeys available -- exiting.",
    )
    broken = f"{EXIT_MARK} 255\n{EXIT_MARK} 255\n/etc/ssh/sshd_config line 3: bad option\n"
    assert split_sshd_output(broken) == (None, 255, "/etc/ssh/sshd_config line 3: bad option")
    settings, code, output = split_sshd_output("sh: 1: Syntax error\n")
    assert settings is None and code == 1 and "could not run sshd" in output


def _config_ctx(env=(), history=(), labels=None, profile_allows=()):
    return SimpleNamespace(
        config={"Env": list(env), "Labels": labels or {}},
        labels=labels or {},
        profile=SimpleNamespace(env_not_secret=tuple(profile_allows)),
        history=lambda: [{"CreatedBy": c} for c in history],
    )


def test_env_and_build_args_are_judged_by_name_too_with_masked_evidence():
    """#38: `ARG NPM_TOKEN=...` in the history and `ENV DB_PASSWORD=...` hold no token of a
    well-known shape, yet their names say secret, as recipe validation (and Docker's
    SecretsUsedInArgOrEnv) judges them."""
    from imagekit.checks.suite.checks_layers import check_credentials_in_config
    from imagekit.credentials import build_args

    password, token = "correct-horse-battery", "npm-0123456789abcdef"
    history = [
        f"|2 NPM_TOKEN={token} APT_MIRROR= /bin/sh -c npm ci",
        "|1 APT_AUTH_URL=http://172.17.0.1:7469/apt-auth.conf /bin/sh -c imagekit-apt-install",
    ]
    assert build_args(history[0]) == [("NPM_TOKEN", token), ("APT_MIRROR", "")]
    ctx = _config_ctx(
        env=[f"DB_PASSWORD={password}", "PATH=/usr/bin", "TOKENIZERS_PARALLELISM=false"],
        history=history,
    )
    with pytest.raises(pytest.fail.Exception) as info:
        check_credentials_in_config(ctx)
    evidence = str(info.value)
    assert "Env DB_PASSWORD: the name says it holds a secret (corr********)" in evidence
    assert "build arg NPM_TOKEN says it holds a secret (npm-********)" in evidence
    assert password not in evidence and token not in evidence
    assert "APT_AUTH_URL" not in evidence and "TOKENIZERS" not in evidence  # allow-listed
    # An empty value holds nothing; a name the recipe or the profile declares is allowed.
    check_credentials_in_config(_config_ctx(env=["DB_PASSWORD="]))
    declared = {"io.imagekit.env-not-secret": "DB_PASSWORD,NPM_TOKEN"}
    check_credentials_in_config(
        _config_ctx(env=[f"DB_PASSWORD={password}"], history=history, labels=declared)
    )
    check_credentials_in_config(_config_ctx(history=history, profile_allows=["NPM_TOKEN"]))
