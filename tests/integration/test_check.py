"""`imagekit check` against real containers: the CPU image passes; each image of a corpus of
deliberately broken ones fails exactly the check for what is broken; an image built the way
Kubeflow mpi-operator builds its base is judged under both profiles."""

from __future__ import annotations

import json

import pytest

from .conftest import build_env, check_json, imagekit
from .images import BROKEN, KUBEFLOW, NON_ROOT, build, build_broken


def failing(report: dict) -> set[str]:
    return {r["id"] for r in report["results"] if r["status"] == "fail"}


def test_cpu_image_passes_every_check(cpu_image, tmp_path):
    code, report, output = check_json(cpu_image.ref, tmp_path)
    assert code == 0, output
    assert report["schema"] == "imagekit.check-report/v1" and report["passed"] is True
    statuses = {r["id"]: r["status"] for r in report["results"]}
    for required in (
        "root-user",
        "mpirun",
        "sshd-start",
        "strictmodes",
        "run-sshd",
        "ssh-login-image-key",
        "ssh-login-mounted-key",
        "mpirun-two-ranks",
        "version-torch",
        "version-deepspeed",
        "version-openmpi",
        "version-python",
        "private-keys-in-layers",
        "build-secrets-in-layers",
        "architecture",
        "native-libraries",
    ):
        assert statuses[required] in ("pass", "warn", "info"), (required, statuses[required])
    # the baked keys are declared by the recipe: reported, not failed
    assert statuses["private-keys-in-layers"] == "warn"
    # the recipe sets OMPI_ALLOW_RUN_AS_ROOT*: bare mpirun and the flagged one both run (R8)
    assert statuses["mpirun-as-root"] == "pass"
    assert "PASSED" in output


def test_an_image_whose_mpi4py_cannot_find_libmpi_fails_native_libraries_only(
    engine, cpu_image, tmp_path
):
    """A1's second half: Open MPI's libmpi gone (as when mpi4py is built in a stage whose MPI
    the image does not keep). mpirun still runs, so nothing else notices; every rank's
    `from mpi4py import MPI` would fail. The check names both of mpi4py's ABI builds."""
    ref = build(
        engine,
        tmp_path / "ctx",
        "imagekit-test/no-libmpi:latest",
        f"FROM {cpu_image.ref}\nRUN rm /usr/lib/x86_64-linux-gnu/libmpi.so.40*\n",
        {},
    )
    try:
        code, report, output = check_json(ref, tmp_path)
    finally:
        engine.remove_image(ref)
    assert code != 0 and failing(report) == {"native-libraries"}, output
    row = next(r for r in report["results"] if r["id"] == "native-libraries")
    assert "2 of " in row["evidence"] and "MPI.openmpi." in row["evidence"], row
    assert "(needs libmpi.so.40)" in row["evidence"] and "(needs libmpi.so.12)" in row["evidence"]


def test_a_second_check_of_an_image_reads_its_probes_facts_from_the_cache(cpu_image, tmp_path):
    """Issue 16: the torch probe (importing torch and DeepSpeed in the image: seconds of CPU)
    answers once per image ID; a second check of the same image reads that answer and
    reaches the same verdicts. A cache turned off probes again. Issue 39: so do the A1 units'
    probes (every native file's ELF header, the loader over each library)."""
    env = {**build_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    runs = []
    for extra in ({}, {}, {"IMAGEKIT_CHECK_CACHE": "off"}):
        code, report, output = check_json(cpu_image.ref, tmp_path, env={**env, **extra})
        assert code == 0, output
        runs.append({r["id"]: r for r in report["results"]})
    first, second, off = (run["prebuilt-ops"]["evidence"] for run in runs)
    kept = "read from the check cache"
    assert kept not in first and kept in second and kept not in off, (first, second, off)
    # The CPU image's one op (ShareMemComm, JIT-built at build time) is a torch extension, not
    # an installed op its label names; the kept answer is the probed one, word for word, plus
    # where it came from.
    assert first.startswith("the image's label names no prebuilt op"), first
    assert first == off and second.startswith(first), (first, second, off)
    for unit in ("architecture", "native-libraries"):
        first, second, off = (run[unit]["evidence"] for run in runs)
        assert kept not in first and first == off and second.startswith(f"{first}; {kept}"), unit
    for run in runs[1:]:
        assert {i: r["status"] for i, r in run.items()} == {
            i: r["status"] for i, r in runs[0].items()
        }
    assert list((tmp_path / "cache" / "imagekit" / "probes").glob("*.json"))


def test_profile_probes_run_and_report_under_their_own_ids(mini, tmp_path):
    """Checks written as data: exec probes (exit code, output) and tcp probes (with the
    image's sshd running), each reported with its own ID, requirement and fix."""
    profile = tmp_path / "probing.yaml"
    profile.write_text(
        """
user_keys: [image, mounted]
probes:
  - {id: has-run-sshd, requirement: OPS1, title: t, exec: "stat -c %a /run/sshd", output: "^755$"}
  - {id: wrong-exit, requirement: OPS2, title: t, exec: "exit 3", fix: "make it exit 0"}
  - {id: wrong-output, requirement: OPS3, title: t, exec: "echo hello", output: "^bye"}
  - {id: sshd-listens, requirement: OPS4, title: t, tcp: 22}
  - {id: nothing-on-2222, requirement: OPS5, title: t, tcp: 2222, fix: "listen on 2222"}
"""
    )
    code, report, output = check_json(mini, tmp_path, "--profile", str(profile))
    results = {r["id"]: r for r in report["results"]}
    assert code == 7, output
    assert failing(report) == {"wrong-exit", "wrong-output", "nothing-on-2222"}, output
    assert results["has-run-sshd"]["status"] == "pass"
    assert results["sshd-listens"]["status"] == "pass"
    assert results["wrong-exit"]["requirement"] == "OPS2"
    assert results["wrong-exit"]["fix"] == "make it exit 0"
    assert "exited 3, the profile expects 0" in results["wrong-exit"]["evidence"]
    assert "does not match" in results["wrong-output"]["evidence"]
    assert "nothing listens on TCP port 2222" in results["nothing-on-2222"]["evidence"]
    # a profile without probes has no probe rows at all
    _, plain, _ = check_json(mini, tmp_path)
    assert not any(r["requirement"] in ("PROFILE", "profile") for r in plain["results"])


def test_mini_image_passes_whatever_the_users_pytest_settings(mini, tmp_path):
    """The check suite runs pytest in-process with its one plugin: the user's pytest
    environment (a plugin that is not installed, an unknown flag) does not reach it."""
    env = {
        **build_env(),
        "PYTEST_PLUGINS": "imagekit_no_such_plugin",
        "PYTEST_ADDOPTS": "--imagekit-no-such-flag",
    }
    code, report, output = check_json(mini, tmp_path, env=env)
    assert code == 0 and failing(report) == set(), output
    # mini does not set OMPI_ALLOW_RUN_AS_ROOT: the flagged mpirun runs, the bare one aborts
    as_root = next(r for r in report["results"] if r["id"] == "mpirun-as-root")
    assert as_root["status"] == "warn", as_root
    assert "bare mpirun aborts as root" in as_root["evidence"], as_root


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_image_fails_exactly_its_check(engine, mini, tmp_path, name):
    expected = BROKEN[name][1]
    ref = build_broken(engine, mini, name, tmp_path)
    code, report, output = check_json(ref, tmp_path)
    assert code == 7, output
    assert failing(report) == expected, output
    for result in report["results"]:
        if result["status"] == "fail":
            assert result["evidence"] and result["fix"], result
    if name == "no-ssh-client":  # the ssh client's fix, not R8's or R9's usual ones
        for result in report["results"]:
            if result["status"] == "fail":
                assert result["fix"].startswith("install openssh-client"), result
            if result["id"].startswith("ssh-login") or result["id"] == "remote-environment":
                assert result["status"] == "skip" and "no ssh client" in result["evidence"]
    assert f"ERROR {ref}: failed" in output
    leftovers = [
        c
        for c in engine.api.containers(all=True)
        if c["Image"] in (ref, engine.inspect_image(ref)["Id"])
    ]
    assert leftovers == []


def test_kubeflow_style_image_under_both_profiles(engine, mini, tmp_path):
    ref = build(engine, tmp_path / "kf", "imagekit-test/kubeflow-style:latest", KUBEFLOW, {})
    code, report, output = check_json(ref, tmp_path, "--profile", "kubeflow-mpi-operator-v2")
    assert code == 0, output
    statuses = {r["id"]: r for r in report["results"]}
    assert statuses["ssh-login-mounted-key"]["status"] == "pass"
    assert statuses["ssh-login-image-key"]["status"] == "skip"
    assert statuses["private-keys-in-layers"]["status"] == "warn"  # host keys, allowed by profile
    # Debian's default sshd allows passwords; no account has one: reported, not failed
    assert statuses["password-auth-off"]["status"] == "warn"
    assert statuses["version-torch"]["status"] in ("skip", "info")  # nothing declared: reported

    code, report, output = check_json(ref, tmp_path, "--profile", "seed")
    assert code == 7
    assert failing(report) == {"sshd-port", "private-keys-in-layers"}, output
    by_id = {r["id"]: r for r in report["results"]}
    assert "expects port 22; sshd listens on 2222" in by_id["sshd-port"]["evidence"]
    assert "/etc/ssh/ssh_host_rsa_key (layer" in by_id["private-keys-in-layers"]["evidence"]


def test_one_check_run_writes_every_report(cpu_image, tmp_path):
    """JSON, JUnit and Markdown from one run (format from each suffix), as CI needs."""
    targets = {"r.json": '"results"', "r.xml": "<testsuite", "r.md": "| check | req | status |"}
    args = [a for name in targets for a in ("--report", str(tmp_path / name))]
    result = imagekit("check", cpu_image.ref, *args, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("PASSED") == 1  # one run, not one per report
    for name, marker in targets.items():
        assert marker in (tmp_path / name).read_text(), name
    # the IDs in every report are the same run's
    ids = [r["id"] for r in json.loads((tmp_path / "r.json").read_text())["results"]]
    markdown = (tmp_path / "r.md").read_text()
    assert all(f"| {i} |" in markdown or f"`{i}`" in markdown for i in ids)


def test_bad_input_gets_one_line_and_distinct_codes(engine):
    missing = imagekit("check", "imagekit-test/no-such-image:never", timeout=120)
    assert missing.returncode == 6
    assert missing.stderr.strip().splitlines()[0] == (
        "ERROR image imagekit-test/no-such-image:never: not found in the engine"
    )
    malformed = imagekit("sbom", "Not::A-Ref", timeout=120)  # the engine's 400, as bad input
    assert malformed.returncode == 2, malformed.stderr
    assert malformed.stderr.strip() == (
        "ERROR image 'Not::A-Ref': not a valid image reference ([host/]name[:tag] or an ID)"
    )
    profile = imagekit("check", "whatever", "--profile", "sead", timeout=120)
    assert profile.returncode == 2 and "did you mean 'seed'?" in profile.stderr
    down = imagekit(
        "check",
        "whatever",
        env={"DOCKER_HOST": "tcp://127.0.0.1:1", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert down.returncode == 4 and "cannot reach the Docker engine" in down.stderr


LAYER_CHECKS = ("private-keys-in-layers", "build-secrets-in-layers", "credentials-in-layers")


def test_layers_read_in_place_and_exported_give_the_same_findings(engine, mini, tmp_path):
    """The layer checks read the engine's overlay2 directories in place (no export) where
    they can; IMAGEKIT_LAYERS=export forces the export. A file deleted in a later layer (an
    overlay2 whiteout device) must be found still shipped either way."""
    ref = build_broken(engine, mini, "leaked-build-ca", tmp_path)
    found = {}
    for mode in ("auto", "export"):
        report = tmp_path / f"{mode}.json"
        env = {**build_env(), "IMAGEKIT_LAYERS": mode, "IMAGEKIT_LAYER_CACHE": "off"}
        result = imagekit("check", ref, "--report", str(report), env=env, timeout=600)
        assert result.returncode == 7, result.stdout[-3000:]
        results = json.loads(report.read_text())["results"]
        found[mode] = {
            r["id"]: (r["status"], r["evidence"]) for r in results if r["id"] in LAYER_CHECKS
        }
    assert found["auto"] == found["export"]
    status, evidence = found["auto"]["build-secrets-in-layers"]
    assert status == "fail" and "tmp/build-ca.pem" in evidence and "still shipped" in evidence
    code, report, output = check_json(mini, tmp_path)
    by_id = {r["id"]: r for r in report["results"]}
    in_place = engine.api.info().get("Driver") == "overlay2"
    expected = "read in place (overlay2)" if in_place else "read from an export"
    assert expected in by_id["build-secrets-in-layers"]["evidence"], output


FIXTURE_DIR = "/usr/lib/python3/dist-packages/demo/tests"


def test_a_check_on_a_known_base_reads_only_new_layers_and_finds_a_key_planted_there(
    engine, mini, tmp_path
):
    """Issue 16: layer scans are cached by diff ID. Checking an image built on an image
    already checked reads only its new layer, and a private key planted in that layer (under
    a name that does not say "key": found by content) is still found and named. (mini
    declares baked user keys, so the check counts it as one: a warning naming it.) A key
    inside an installed package (a public test fixture) is named too, as such, not counted."""
    env = {**build_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    code, report, output = check_json(mini, tmp_path, env=env)
    assert code == 0, output
    by_id = {r["id"]: r for r in report["results"]}
    base = by_id["build-secrets-in-layers"]["evidence"]
    assert " 0 from the cache" in base, base
    assert "deploy.pem" not in by_id["private-keys-in-layers"]["evidence"]
    planted = build(
        engine,
        tmp_path / "planted",
        "imagekit-test/planted-key:latest",
        f"FROM {mini}\nRUN mkdir -p /opt/app {FIXTURE_DIR}"
        f" && ssh-keygen -q -t ed25519 -N '' -f /opt/app/deploy.pem"
        f" && ssh-keygen -q -t ed25519 -N '' -f {FIXTURE_DIR}/server.key\n",
        {},
    )
    layers = len(engine.inspect_image(planted)["RootFS"]["Layers"])
    code, report, output = check_json(planted, tmp_path, env=env)
    by_id = {r["id"]: r for r in report["results"]}
    keys = by_id["private-keys-in-layers"]
    assert keys["status"] == "warn", output
    declared, packaged = keys["evidence"].split("; inside installed packages")
    assert f"user key /opt/app/deploy.pem (layer {layers - 1})" in declared, output
    assert f"package key {FIXTURE_DIR}/server.key (layer {layers - 1})" in packaged, output
    assert "server.key" not in declared, output
    source = by_id["build-secrets-in-layers"]["evidence"]
    assert f"{layers} layers: {layers - 1} from the cache, 1 read" in source, source


def test_a_check_runs_its_commands_over_the_engine_api_not_the_docker_cli(mini, tmp_path):
    """Every command goes through the engine connection (checks/backend.py): a `docker`
    earlier on PATH that records each call and fails is never called, and the check passes."""
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "docker-calls"
    (fake / "docker").write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 1\n')
    (fake / "docker").chmod(0o755)
    env = {**build_env(), "PATH": f"{fake}:{build_env()['PATH']}"}
    code, report, output = check_json(mini, tmp_path, env=env)
    assert code == 0 and failing(report) == set(), output
    assert not calls.exists(), calls.read_text()


NONROOT_PROFILE = "kubeflow-mpi-operator-v2-nonroot"


def test_non_root_image_passes_its_profile_and_fails_seed_on_r1_only(engine, mini, tmp_path):
    """K1's non-root workers: mpiuser's sshd (-f ~/.sshd_config, the mounted key as host key,
    port 2222) started as mpiuser, logins and mpirun as mpiuser, keys mounted at
    /home/mpiuser/.ssh owned by it. The same image under the seed profile fails R1 alone."""
    ref = build(engine, tmp_path / "nr", "imagekit-test/non-root:latest", NON_ROOT, {})
    code, report, output = check_json(ref, tmp_path, "--profile", NONROOT_PROFILE)
    assert code == 0, output
    by_id = {r["id"]: r for r in report["results"]}
    assert "listening on 2222" in by_id["sshd-start"]["evidence"], output
    for proven in ("ssh-login-mounted-key", "sshd-port", "strictmodes", "sshd-config"):
        assert by_id[proven]["status"] == "pass", (proven, output)
    assert by_id["remote-environment"]["status"] == "pass", output
    assert by_id["mpirun-two-ranks"]["status"] == "info", output  # ran, as mpiuser
    for not_applicable in ("root-user", "run-sshd", "root-login-key-only", "mpirun-as-root"):
        assert by_id[not_applicable]["status"] == "skip", (not_applicable, output)

    code, report, output = check_json(ref, tmp_path, "--profile", "seed")
    assert code == 7 and failing(report) == {"root-user"}, output

    # The operator's Port line lost from ~/.sshd_config: exactly the port check fails.
    no_port = (
        f"FROM {ref}\nUSER root\nRUN sed -i '/^Port/d' /home/mpiuser/.sshd_config\nUSER mpiuser\n"
    )
    broken = build(engine, tmp_path / "np", "imagekit-test/non-root:no-port", no_port, {})
    code, report, output = check_json(broken, tmp_path, "--profile", NONROOT_PROFILE)
    assert code == 7 and failing(report) == {"sshd-port"}, output

    # An image without the profile's user fails R1 under it, and nothing else is blamed.
    code, report, output = check_json(mini, tmp_path, "--profile", NONROOT_PROFILE)
    assert code == 7 and failing(report) == {"root-user"}, output
    root_user = next(r for r in report["results"] if r["id"] == "root-user")
    assert "runs as mpiuser: no such user" in root_user["evidence"], output


def _image_of_files(engine, ref: str, files: dict[str, bytes]) -> str:
    """A one-layer image holding just `files` (mode 0755), as `docker import` makes it."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    repository, tag = ref.rsplit(":", 1)
    engine.api.import_image_from_data(buf.getvalue(), repository=repository, tag=tag)
    return ref


@pytest.mark.parametrize(
    "files, reason",
    [
        (
            {"hello": b"hi\n"},  # scratch, distroless: nothing to run a command with
            "has no /bin/sh (distroless or scratch?); an MPIJob image needs a POSIX shell: "
            "ssh runs mpirun's remote commands through it, and so do imagekit's probes",
        ),
        (
            {"bin/sh": b"\x7fELF\x02\x01\x01\x00not for this machine"},  # another CPU's shell
            "cannot run /bin/sh: exec format error (an image for another CPU architecture? "
            "docker image inspect IMAGE --format '{{.Architecture}}'; such an image runs "
            "under qemu once its handler is registered: ./dev setup)",
        ),
    ],
    ids=["no-shell", "foreign-shell"],
)
def test_an_image_that_cannot_run_a_shell_is_one_line_for_every_command(engine, files, reason):
    """check, smoke, adapt and sbom of such an image: exit 6 and what is wrong with it (was
    exit 4, 'engine error', and 300 characters of the runtime's OCI message or a 409 about
    a container that is not running), and no container left behind."""
    ref = _image_of_files(engine, f"imagekit-test/unrunnable-{len(files)}{len(reason)}:1", files)
    for command in (["check", ref], ["smoke", ref], ["adapt", ref], ["sbom", ref]):
        result = imagekit(*command, timeout=300)
        assert result.returncode == 6, (command, result.stderr)
        assert result.stderr.strip() == f"ERROR image {ref}: {reason}", command
    leftovers = engine.api.containers(all=True, filters={"ancestor": ref})
    assert leftovers == []
