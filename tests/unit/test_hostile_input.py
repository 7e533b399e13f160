"""Hostile input (#38): no recipe, lock, profile or flag value may inject a line into a file
imagekit writes, run a command, read outside its tree, hang, or end in a traceback.

Three layers: one test per class of attack (each refused in one line, or kept literal), a
property test that renders adversarial strings in every free-text field and parses the result
with a real Dockerfile parser, and a fuzz test that runs commands in-process and fails on any
exception that is not an imagekit error (`main` turns those into one line and an exit code).
"""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from dockerfile_parse import DockerfileParser
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagekit.build.lockfile import locked_plan
from imagekit.build.render import render_context
from imagekit.cli.main import main
from imagekit.errors import RecipeError
from imagekit.recipe.loader import load_recipe

from ..conftest import RECIPES

CPU = RECIPES / "deepspeed-cpu.yaml"
BASE = yaml.safe_load(CPU.read_text())
# CI runs the same 60 examples a property every time (derandomized: a red CI run is a bug
# someone can rerun); IMAGEKIT_FUZZ_EXAMPLES=2000 hunts further, at random, by hand.
FUZZ_EXAMPLES = int(os.environ.get("IMAGEKIT_FUZZ_EXAMPLES", "60"))
HYPOTHESIS = settings(
    max_examples=FUZZ_EXAMPLES,
    derandomize="IMAGEKIT_FUZZ_EXAMPLES" not in os.environ,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# What an attacker types into a value: line breaks, quotes, expansions, comments, escapes.
NASTY = st.text(
    alphabet=st.sampled_from(list("\n\r\t \"'$`#\\{}();&|<>*?!%=:@/.-_~[]") + list("abcXYZ019")),
    min_size=1,
    max_size=40,
)


def run(capsys, *args):
    """A command in-process: its exit code and output. Anything but SystemExit propagates, so
    a traceback a user would see fails the test."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def write_recipe(directory: Path, data: dict, name: str = "r.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def with_value(path: tuple, value) -> dict:
    data = copy.deepcopy(BASE)
    cursor = data
    for key in path[:-1]:
        cursor = cursor.setdefault(key, {})
    cursor[path[-1]] = value
    return data


def one_line_error(code, err, expected_code=2):
    lines = err.strip().splitlines()
    assert code == expected_code, err
    assert len(lines) == 1 and lines[0].startswith("ERROR "), err
    assert "Traceback" not in err


# -- raw values in the Dockerfile and scripts: refused where the model is built ------------------

INJECTIONS = [
    (("packages", "apt"), ["curl\nRUN echo PWN"], "packages.apt.0"),
    (("packages", "pip"), ['mpi4py"; echo PWN; "'], "packages.pip.0"),
    (("packages", "pip"), ["mpi4py\nRUN echo PWN"], "packages.pip.0"),
    (("env",), {"A\nRUN echo PWN": "1"}, "env"),
    (("env",), {"A": "x\nRUN echo PWN"}, "env.A"),
    (("mpi", "mca"), {"pml": "ob1\nplm_rsh_agent = /tmp/x.sh"}, "mpi.mca.pml"),
    (("mpi", "mca"), {"plm_rsh_agent = /tmp/x.sh\npml": "ob1"}, "mpi.mca"),
    (("deepspeed", "prebuild_ops"), ['X"]; import os; os.system("id"); ["'], "prebuild_ops.0"),
    (("torch", "index_url"), "https://x/simple\nRUN echo PWN", "torch.index_url"),
    (("torch", "index_url"), "https://x/$(id)", "torch.index_url"),
    (("base", "bootstrap", "mirror"), "http://m/#;e id;#", "base.bootstrap.mirror"),
    (("image", "tag"), "{release:>999999999}", "image.tag"),
    (("image", "tag"), "{release!r}", "image.tag"),
    (("image", "release"), "23.08\n", "image.release"),
    (("image", "moving_tags"), ["latest\nRUN echo PWN"], "image.moving_tags.0"),
    (("description",), "x" * 200_000, "description"),
    (("distro", "version"), "12\nRUN echo PWN", "distro.version"),
    (("deepspeed", "version"), "0.19.8\n", "deepspeed.version"),
]


@pytest.mark.parametrize("path, value, field", INJECTIONS, ids=lambda v: str(v)[:30])
def test_a_hostile_recipe_value_is_refused_in_one_line(capsys, tmp_path, path, value, field):
    recipe = write_recipe(tmp_path, with_value(path, value))
    out = tmp_path / "out"
    code, _, err = run(capsys, "render", recipe, "-o", out)
    one_line_error(code, err)
    assert f"{recipe}: " in err and field in err
    assert not out.exists()


def test_a_tarball_url_and_base_image_are_refused(capsys, tmp_path):
    data = copy.deepcopy(yaml.safe_load((RECIPES / "deepspeed-cu122.yaml").read_text()))
    data["base"]["image"] = "nvidia/cuda:12.2.2\nRUN echo PWN"
    code, _, err = run(capsys, "validate", write_recipe(tmp_path, data))
    one_line_error(code, err)
    assert "base.image" in err


def test_a_multi_line_description_becomes_a_one_line_label(tmp_path):
    loaded = load_recipe(write_recipe(tmp_path, with_value(("description",), "two\nlines $X")))
    dockerfile = render_context(locked_plan(loaded)[0]).dockerfile
    assert 'org.opencontainers.image.description="two lines \\$X"' in dockerfile


def test_dollar_and_quotes_in_env_are_literal_not_substituted(tmp_path):
    """Docker substitutes $VAR in ENV and LABEL values: escaped, the value stays as written."""
    value = 'a $HOME ${APT_MIRROR} "q" \\ `b`'
    loaded = load_recipe(write_recipe(tmp_path, with_value(("env",), {"X": value})))
    dockerfile = render_context(locked_plan(loaded)[0]).dockerfile
    parser = DockerfileParser(path=str(tmp_path / "Dockerfile"))
    parser.content = dockerfile
    envs = [i for i in parser.structure if i["instruction"] == "ENV" and "X=" in i["value"]]
    assert len(envs) == 1
    assert 'X="a \\$HOME \\${APT_MIRROR} \\"q\\" \\\\ `b`"' in envs[0]["value"]


# -- lock files are untrusted too -------------------------------------------------------------


def test_a_forged_lock_with_a_fresh_hash_cannot_inject(capsys, tmp_path):
    """Anyone can recompute a lock's inputs hash: its pins are checked like a recipe's."""
    recipe = write_recipe(tmp_path, BASE, "deepspeed-cpu.yaml")
    lock = yaml.safe_load((RECIPES / "deepspeed-cpu.lock").read_text())
    stage = next(iter(lock["apt"]))
    lock["apt"][stage]["bash"] = "5.2\nRUN echo PWN"
    (tmp_path / "deepspeed-cpu.lock").write_text(yaml.safe_dump(lock))
    code, _, err = run(capsys, "render", recipe, "-o", tmp_path / "out")
    one_line_error(code, err, expected_code=14)
    assert "deepspeed-cpu.lock" in err and "apt" in err
    assert not (tmp_path / "out").exists()
    lock["apt"][stage]["bash"] = "5.2"
    first = next(iter(lock["pip"]))
    lock["pip"][first][0]["version"] = '1.0 --hash=sha256:00 "; echo PWN'
    (tmp_path / "deepspeed-cpu.lock").write_text(yaml.safe_dump(lock))
    code, _, err = run(capsys, "render", recipe, "-o", tmp_path / "out")
    one_line_error(code, err, expected_code=14)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    "text, expected",
    [
        (BOMB, "alias bomb"),
        ("a: &a [*a]\n", "refers to itself"),
        ("lock_version: 1\nrecipe: \xff\n", "not UTF-8"),
        ("lock_version: " + "9" * 5000 + "\n", "a value YAML cannot hold"),
        ("- just\n- a list\n", "expected a mapping"),
    ],
    ids=["alias-bomb", "self-alias", "latin-1", "huge-int", "a-list"],
)
def test_a_hostile_lock_is_one_line_exit_14(capsys, tmp_path, text, expected):
    recipe = write_recipe(tmp_path, BASE, "deepspeed-cpu.yaml")
    (tmp_path / "deepspeed-cpu.lock").write_bytes(text.encode("latin-1"))
    code, _, err = run(capsys, "validate", recipe)
    one_line_error(code, err, expected_code=14)
    assert expected in err


@pytest.mark.parametrize(
    "text, expected",
    [
        (BOMB, "alias bomb"),
        ("name: x\ndescription: \xff\n", "not UTF-8"),
        ("x" * (1024 * 1024 + 1), "larger than 1024 KiB"),
        ("port: " + "9" * 5000 + "\n", "a value YAML cannot hold"),
    ],
    ids=["alias-bomb", "latin-1", "too-big", "huge-int"],
)
def test_a_hostile_recipe_file_is_one_line_exit_2(capsys, tmp_path, text, expected):
    recipe = tmp_path / "r.yaml"
    recipe.write_bytes(text.encode("latin-1"))
    code, _, err = run(capsys, "validate", recipe)
    one_line_error(code, err)
    assert expected in err


def test_a_recipe_that_is_a_device_or_fifo_is_not_read(capsys, tmp_path):
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.yaml")
    for name in ("zero.yaml", "fifo.yaml"):
        code, _, err = run(capsys, "validate", tmp_path / name)
        one_line_error(code, err)
        assert "not a regular file" in err


# -- reads outside the recipe's tree -----------------------------------------------------------


@pytest.mark.parametrize("how", ["relative", "absolute", "symlink"])
def test_extends_cannot_leave_the_recipe_directory(capsys, tmp_path, monkeypatch, how):
    monkeypatch.delenv("IMAGEKIT_RECIPE_ROOT", raising=False)
    outside = tmp_path / "outside.yaml"
    outside.write_text("name: SECRET-VALUE-FROM-OUTSIDE\n")
    tree = tmp_path / "recipes"
    tree.mkdir()
    target = {"relative": "../outside.yaml", "absolute": str(outside), "symlink": "link.yaml"}[how]
    if how == "symlink":
        (tree / "link.yaml").symlink_to(outside)
    child = tree / "child.yaml"
    child.write_text(f"extends: {target}\n")
    code, _, err = run(capsys, "validate", child)
    one_line_error(code, err)
    assert "leaves the recipe's directory" in err
    assert "SECRET-VALUE" not in err


def test_an_explicit_root_allows_a_shared_parent(capsys, tmp_path, monkeypatch):
    (tmp_path / "shared").mkdir()
    (tmp_path / "team").mkdir()
    write_recipe(tmp_path / "shared", BASE, "base.yaml")
    child = tmp_path / "team" / "child.yaml"
    child.write_text("extends: ../shared/base.yaml\nname: child\n")
    monkeypatch.delenv("IMAGEKIT_RECIPE_ROOT", raising=False)
    code, _, err = run(capsys, "validate", child)
    assert code == 2 and "leaves the recipe's directory" in err
    monkeypatch.setenv("IMAGEKIT_RECIPE_ROOT", str(tmp_path))
    code, out, err = run(capsys, "validate", child)
    assert code == 0, err


def test_a_long_extends_chain_is_refused_not_a_recursion_error(capsys, tmp_path):
    write_recipe(tmp_path, BASE, "r0.yaml")
    for n in range(1, 40):
        (tmp_path / f"r{n}.yaml").write_text(f"extends: r{n - 1}.yaml\n")
    code, _, err = run(capsys, "validate", tmp_path / "r39.yaml")
    one_line_error(code, err)
    assert "more than 8 recipes deep" in err


# -- profiles ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("just a string\n", "a profile file is a mapping"),
        ("- a\n- b\n", "a profile file is a mapping"),
        ("name: \xff\n", "not UTF-8"),
        (BOMB, "alias bomb"),
        ("name: '[/red] x'\n", "name"),  # reaches tags and report titles (rich markup)
        ("user: mpiuser\nsshd_config: /home/mpiuser/../../etc/shadow\n", "sshd_config"),
        ("driver_libraries: ['libcuda.so.1; id']\n", "driver_libraries"),
    ],
    ids=["string", "list", "latin-1", "alias-bomb", "markup-name", "dotdot-path", "library"],
)
def test_a_hostile_profile_file_is_one_line(capsys, tmp_path, text, expected):
    profile = tmp_path / "p.yaml"
    profile.write_bytes(text.encode("latin-1"))
    code, _, err = run(
        capsys, "mpirun", "--workers", "2", "--slots", "1", "--profile", profile, "--", "x"
    )
    one_line_error(code, err)
    assert expected in err


# -- flags --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--index-url", "https://x/simple\ntrusted-host = evil"], "--index-url"),
        (["--extra-index-url", "https://x/simple\n"], "--extra-index-url"),
        (["--apt-mirror", "http://m/#;e id;#"], "--apt-mirror"),
        (["--build-arg", "APT_MIRROR=http://m/#;e id;#"], "--build-arg APT_MIRROR"),
        (["--build-arg", "X=a\nb"], "--build-arg X"),
        (["--tag", "x:y\n"], "--tag"),
        (["--tag", "x:é"], "--tag"),
    ],
)
def test_hostile_build_flags_are_refused_before_anything(capsys, flags, expected):
    code, _, err = run(capsys, "build", CPU, "--dry-run", *flags)
    one_line_error(code, err)
    assert err.startswith(f"ERROR {expected}")


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--name", "job\n"], "--name"),
        (["--name", "a" * 64], "--name"),
        (["--shm-size", "1Gi\n"], "--shm-size"),
    ],
)
def test_hostile_mpijob_flags_are_refused(capsys, flags, expected):
    base = {"--name": "e1", "--shm-size": "1Gi"}
    base.update(dict(zip(flags[::2], flags[1::2], strict=True)))
    args = [a for pair in base.items() for a in pair]
    code, _, err = run(capsys, "mpijob", CPU, "--workers", "2", "--slots", "1", *args, "--", "x")
    one_line_error(code, err)
    assert expected in err


@pytest.mark.parametrize(
    "command, flags",
    [
        ("mpijob", ["--rdma", "rdma/hca=1\nx: y"]),
        ("mpijob", ["--rdma", "rdma/hca=0"]),
        ("mpijob", ["--rdma", "rdma/hca=1e9"]),
        ("mpijob", ["--rdma", "$(id)=1"]),
        ("mpijob", ["--rdma", "a" * 400 + "=1"]),
        ("mpirun", ["--net-devices", "mlx5_0:1;reboot"]),
        ("mpirun", ["--net-devices", "mlx5_0:1\n"]),
        ("mpirun", ["--fabric", "infiniband"]),
        ("lint-cmd", ["--fabric", "rdma\n"]),
    ],
)
def test_hostile_fabric_flags_are_one_line_usage_errors(capsys, command, flags):
    shape = {
        "mpijob": [CPU, "--name", "e1", "--workers", "2", "--slots", "1"],
        "mpirun": ["--workers", "2", "--slots", "1"],
        "lint-cmd": ["mpirun -np 2 x"],
    }[command]
    tail = [] if command == "lint-cmd" else ["--", "x"]
    code, out, err = run(capsys, command, *shape, *flags, *tail)
    assert code == 2 and "Invalid value for" in err and "Traceback" not in err, err
    assert out == ""


@pytest.mark.parametrize("size", ["1m", "lots", "16g\n", "9" * 40, "9" * 20 + "p"])
def test_build_memory_is_a_size_of_at_least_64_mib(capsys, size):
    code, _, err = run(capsys, "build", CPU, "--dry-run", "--memory", size)
    assert code == 2 and "Invalid value for '--memory'" in err and "Traceback" not in err


def test_mpirun_timeout_must_be_positive(capsys):
    code, _, err = run(capsys, "mpirun", "--workers", "2", "--slots", "1", "--timeout", "-5", "x")
    assert code == 2 and "--timeout" in err and "Traceback" not in err


# -- the property test: adversarial strings in every free-text field -----------------------------

FREE_TEXT_FIELDS = [
    ("env",),
    ("description",),
    ("packages", "apt"),
    ("packages", "pip"),
    ("mpi", "mca"),
    ("image", "release"),
    ("torch", "index_url"),
    ("deepspeed", "prebuild_ops"),
]


def _instructions(dockerfile: str, directory: Path) -> list[str]:
    parser = DockerfileParser(path=str(directory / "Dockerfile"))
    parser.content = dockerfile
    return [i["instruction"] for i in parser.structure]


def _shaped(field: tuple, text: str) -> object:
    """`text` where `field` takes it: a mapping's value, a list's item, or the field itself."""
    if field == ("env",):
        return {"X_VALUE": text}
    if field == ("mpi", "mca"):
        return {"btl": text}
    if field in (("packages", "apt"), ("packages", "pip"), ("deepspeed", "prebuild_ops")):
        return [text]
    return text


BENIGN_TEXT = {
    ("packages", "apt"): "curl",
    ("packages", "pip"): "mpi4py",
    ("torch", "index_url"): "https://example.org/simple",
    ("deepspeed", "prebuild_ops"): "ShareMemCommBuilder",
}


def _render(directory: Path, field: tuple, text: str) -> str:
    loaded = load_recipe(write_recipe(directory, with_value(field, _shaped(field, text))))
    return render_context(locked_plan(loaded)[0])


@HYPOTHESIS
@given(field=st.sampled_from(FREE_TEXT_FIELDS), text=NASTY)
def test_adversarial_values_are_refused_or_kept_literal(tmp_path_factory, field, text):
    directory = tmp_path_factory.mktemp("prop")
    benign = _render(directory, field, BENIGN_TEXT.get(field, "x1")).dockerfile
    try:
        context = _render(directory, field, text)
    except RecipeError as exc:
        assert all("\n" not in p for p in exc.problems)  # each problem stays one line
        return
    # The same instructions as with a benign value: nothing added, nothing cut.
    assert _instructions(context.dockerfile, directory) == _instructions(benign, directory)
    parser = DockerfileParser(path=str(directory / "Dockerfile"))
    parser.content = context.dockerfile
    for instruction in parser.structure:
        if instruction["instruction"] == "RUN":
            # Each RUN is still one well-formed shell command with the value as data.
            check = subprocess.run(["bash", "-n", "-c", instruction["value"]], capture_output=True)
            assert check.returncode == 0, (instruction["value"][:200], check.stderr)
    conf = context.files["imagekit/openmpi-mca-params.conf"]
    assert all(" = " in line for line in conf.splitlines() if line and not line.startswith("#"))


# -- the fuzz test: commands in-process, any exception but SystemExit fails -----------------------

FLAG_VALUES = st.one_of(NASTY, st.sampled_from(["", "-1", "0", "9" * 30, "1Gi", "x:y", "/"]))


@HYPOTHESIS
@given(
    command=st.sampled_from(["build", "mpijob", "mpirun", "lint-cmd", "render"]),
    flag=st.sampled_from(
        [
            "--tag",
            "--index-url",
            "--extra-index-url",
            "--apt-mirror",
            "--build-arg",
            "--name",
            "--shm-size",
            "--workers",
            "--slots",
            "--timeout",
            "--profile",
            "--operator",
            "-o",
            "--source-date-epoch",
            "--memory",
        ]
    ),
    value=FLAG_VALUES,
)
def test_no_flag_value_ends_in_a_traceback(
    capsys, monkeypatch, tmp_path_factory, command, flag, value
):
    monkeypatch.chdir(tmp_path_factory.mktemp("fuzz"))  # `-o` values land there, not here
    args = {
        "build": [CPU, "--dry-run", flag, value],
        "mpijob": [CPU, "--name", "e1", "--workers", "2", "--slots", "1", flag, value, "--", "x"],
        "mpirun": ["--workers", "2", "--slots", "1", flag, value, "--", "x"],
        "lint-cmd": [value],
        "render": [CPU, flag, value],
    }[command]
    code, _, err = run(capsys, command, *args)
    assert isinstance(code, int) and "Traceback" not in err


@HYPOTHESIS
@given(
    document=st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), NASTY),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NASTY, inner, max_size=4),
        max_leaves=12,
    ),
    where=st.sampled_from(["recipe", "lock", "profile"]),
)
def test_no_recipe_lock_or_profile_document_ends_in_a_traceback(
    capsys, tmp_path_factory, document, where
):
    directory = tmp_path_factory.mktemp("docs")
    text = yaml.safe_dump(document)
    if where == "recipe":
        (directory / "r.yaml").write_text(text)
        code, _, err = run(capsys, "validate", directory / "r.yaml")
    elif where == "lock":
        write_recipe(directory, BASE, "deepspeed-cpu.yaml")
        (directory / "deepspeed-cpu.lock").write_text(text)
        code, _, err = run(capsys, "validate", directory / "deepspeed-cpu.yaml")
    else:
        (directory / "p.yaml").write_text(text)
        code, _, err = run(
            capsys,
            "mpirun",
            "--workers",
            "2",
            "--slots",
            "1",
            "--profile",
            directory / "p.yaml",
            "--",
            "x",
        )
    assert isinstance(code, int) and "Traceback" not in err
