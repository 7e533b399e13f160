"""Recipe loading and validation: every bad recipe gets one line per problem naming the
file and the field, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from imagekit.errors import RecipeError
from imagekit.recipe.loader import load_recipe
from imagekit.recipe.model import json_schema

from ..conftest import RECIPES

HERE = Path(__file__).parent / "recipes"


def minimal() -> dict:
    return yaml.safe_load((HERE / "minimal-cpu.yaml").read_text())


def write(tmp_path: Path, data, name: str = "r.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    return info.value.problems


@pytest.mark.parametrize("name", sorted(p.name for p in RECIPES.glob("*.yaml")))
def test_shipped_recipes_are_valid(name):
    loaded = load_recipe(RECIPES / name)
    assert loaded.recipe.name == name.removesuffix(".yaml")
    assert len(loaded.sha256) == 64


def test_minimal_recipe_gets_defaults():
    r = load_recipe(HERE / "minimal-cpu.yaml").recipe
    assert r.ssh.port == 22 and r.ssh.user_keys == "mounted" and r.ssh.host_keys == "build"
    assert r.mpi.allow_run_as_root is True
    assert r.mpi.mca["pml"] == "ob1" and r.mpi.mca["btl"] == "^openib"
    assert r.nccl.version == "from-torch"
    assert r.base.bootstrap.mirror == "http://deb.debian.org/debian"


def test_extends_merges_mappings_and_replaces_lists():
    r = load_recipe(RECIPES / "deepspeed-cu124.yaml").recipe
    assert r.cuda.version == "12.4.1"
    assert r.openmpi.source == "tarball"
    assert r.deepspeed.version == "0.15.4"
    # inherited from deepspeed-cu122.yaml, untouched by the child
    assert r.deepspeed.prebuild_ops == ("FusedAdamBuilder", "CPUAdamBuilder")
    assert r.ssh.user_keys == "image"
    assert r.packages.pip == ("mpi4py==4.0.1",)  # lists are replaced, not appended


def test_hash_ignores_key_order_and_formatting(tmp_path):
    data = minimal()
    a = write(tmp_path, data, "a.yaml")
    b = write(tmp_path, dict(reversed(list(data.items()))), "b.yaml")
    assert load_recipe(a).sha256 == load_recipe(b).sha256
    data["deepspeed"]["version"] = "0.19.9"
    assert load_recipe(write(tmp_path, data, "c.yaml")).sha256 != load_recipe(a).sha256


def _set(path: str, value):
    def mutate(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return mutate


def _delete(path: str):
    def mutate(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


# (id, mutation, expected fragment of the single problem line)
BAD = [
    (
        "unknown-top-key",
        _set("pyhton", {"version": "3.11"}),
        "pyhton: unknown key (did you mean 'python'?)",
    ),
    (
        "unknown-nested-key",
        _set("torch.verison", "2.1"),
        "torch.verison: unknown key (did you mean 'version'?)",
    ),
    ("unknown-ssh-key", _set("ssh.prot", 22), "ssh.prot: unknown key (did you mean 'port'?)"),
    ("missing-name", _delete("name"), "name: required field is missing"),
    ("missing-torch-version", _delete("torch.version"), "torch.version: required field is missing"),
    ("python-as-float", _set("python.version", 3.1), 'quote it in YAML: "3.1"'),
    (
        "python-bad-format",
        _set("python.version", "three"),
        "python.version: 'three' is not a Python",
    ),
    (
        "torch-bad-version",
        _set("torch.version", "2.x"),
        "torch.version: '2.x' is not a valid version",
    ),
    (
        "deepspeed-bad-version",
        _set("deepspeed.version", "latest"),
        "deepspeed.version: 'latest' is not",
    ),
    ("cuda-bad-version", _set("cuda", {"version": "12"}), "cuda.version: '12' is not a version"),
    ("torch-variant", _set("torch.variant", "gpu"), "torch.variant: String should match pattern"),
    (
        "ssh-port-range",
        _set("ssh.port", 70000),
        "ssh.port: Input should be less than or equal to 65535",
    ),
    ("ssh-port-type", _set("ssh.port", "twenty"), "ssh.port: Input should be a valid integer"),
    (
        "user-keys-enum",
        _set("ssh.user_keys", "baked"),
        "ssh.user_keys: Input should be 'mounted' or 'image'",
    ),
    (
        "both-bases",
        _set("base.image", "debian:12"),
        "base: set exactly one of base.image or base.bootstrap",
    ),
    ("suite-enum", _set("base.bootstrap.suite", "buster"), "base.bootstrap.suite: Input should be"),
    (
        "distro-enum",
        _set("distro.name", "centos"),
        "distro.name: Input should be 'debian' or 'ubuntu'",
    ),
    (
        "tarball-without-hash",
        _set("openmpi", {"version": "4.1.6", "source": "tarball", "url": "https://x/y.tar.bz2"}),
        "openmpi: source: tarball needs both url and sha256",
    ),
    (
        "bad-sha",
        _set(
            "openmpi",
            {
                "version": "4.1.6",
                "source": "tarball",
                "url": "https://example.org/o.tar.bz2",
                "sha256": "abc",
            },
        ),
        "openmpi.sha256: 'abc' is not 64 lowercase hex digits",
    ),
    ("apt-not-list", _set("packages.apt", "vim"), "packages.apt: Input should be a valid tuple"),
    ("env-nested", _set("env", {"A": {"b": 1}}), "env.A.str: Input should be a valid string"),
    ("image-name", _set("image.name", "Bad Name"), "image.name: String should match pattern"),
    (
        "tag-field",
        _set("image.tag", "{release}-{pyton}"),
        "unknown tag field {pyton} (did you mean {py}?)",
    ),
    # compatibility rules
    (
        "distro-python",
        _set("python.version", "3.10"),
        "python.version: debian-12 ships Python 3.11, not 3.10",
    ),
    (
        "distro-openmpi",
        _set("openmpi.version", "4.1.6"),
        "debian-12 ships Open MPI 4.1.4, not 4.1.6",
    ),
    (
        "suite-vs-distro",
        _set("base.bootstrap.suite", "trixie"),
        "distro: base.bootstrap.suite trixie is debian-13",
    ),
    (
        "cuda-torch-on-cpu",
        _set("torch.variant", "cu121"),
        "torch.variant: cu121 on an image without CUDA",
    ),
    (
        "nccl-without-cuda",
        _set("nccl.version", "2.18.5"),
        "nccl.version: an NCCL version needs a CUDA image",
    ),
    (
        "deadsnakes-debian",
        _set("python.source", "deadsnakes"),
        "deadsnakes is not available on debian",
    ),
    ("ds-old-torch", _set("torch.version", "1.8.0"), "deepspeed 0.19.8 needs torch >=1.9"),
]


@pytest.mark.parametrize("mutate,expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_recipe_gets_one_clear_line(tmp_path, mutate, expected):
    data = minimal()
    mutate(data)
    path = write(tmp_path, data)
    problems = problems_of(path)
    assert any(expected in p for p in problems), problems
    assert all(p.startswith(f"{path}: ") for p in problems)
    assert all("\n" not in p and "Traceback" not in p for p in problems)


@pytest.mark.parametrize(
    "written,value",
    [("3.10", "3.1"), ("3.20", "3.2"), ("3.1_0", "3.1")],  # 3.1_0: YAML 1.1 reads it as 3.1 too
)
def test_unquoted_version_hint_quotes_what_was_written(tmp_path, written, value):
    """YAML reads an unquoted 3.10 as the number 3.1: the fix is "3.10", never "3.1"."""
    text = (HERE / "minimal-cpu.yaml").read_text()
    text = text.replace('python: {version: "3.11"}', f"python: {{version: {written}}}")
    assert text != (HERE / "minimal-cpu.yaml").read_text()
    [problem] = problems_of(write(tmp_path, text))
    assert problem.endswith(
        f"python.version: Input should be a valid string (YAML reads {written} as the number "
        f'{value}; quote it in YAML: "{written}")'
    ), problem


def test_a_float_where_a_number_is_wanted_still_validates(tmp_path):
    """Floats keep their text for messages, and are floats for the schema: 2222.0 is a port."""
    text = (HERE / "minimal-cpu.yaml").read_text() + "ssh: {port: 2222.0}\n"
    assert load_recipe(write(tmp_path, text)).recipe.ssh.port == 2222


def test_there_are_at_least_twenty_distinct_bad_recipes():
    assert len({b[0] for b in BAD}) >= 20


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", "the recipe is empty"),
        ("# only a comment\n", "the recipe is empty"),
        ("- a\n- b\n", "a recipe must be a mapping, got list"),
        ("name: [unclosed\n", "line 2, column 1: malformed YAML"),
        ("name: x\n  bad: indent\n", "malformed YAML"),
        ("just a string", "a recipe must be a mapping, got str"),
    ],
)
def test_malformed_files(tmp_path, text, expected):
    problems = problems_of(write(tmp_path, text))
    assert len(problems) == 1 and expected in problems[0], problems


def test_missing_file(tmp_path):
    assert problems_of(tmp_path / "nope.yaml") == [f"{tmp_path / 'nope.yaml'}: no such file"]


def test_extends_missing_parent_and_cycle(tmp_path):
    write(tmp_path, {"extends": "missing.yaml"}, "a.yaml")
    assert "extends: no such recipe missing.yaml" in problems_of(tmp_path / "a.yaml")[0]
    write(tmp_path, {"extends": "c.yaml"}, "b.yaml")
    write(tmp_path, {"extends": "b.yaml"}, "c.yaml")
    assert "extends: cycle" in problems_of(tmp_path / "b.yaml")[0]


def test_all_problems_reported_at_once(tmp_path):
    data = minimal()
    data["ssh"] = {"port": 0, "prot": 1}
    data["python"]["version"] = "3"
    problems = problems_of(write(tmp_path, data))
    assert len(problems) == 3, problems


def test_removed_nvidia_cuda_tag_suggests_kept_one(tmp_path):
    data = yaml.safe_load((RECIPES / "deepspeed-cu122.yaml").read_text())
    data["base"]["image"] = "nvidia/cuda:12.2.0-cudnn8-devel-ubuntu22.04"
    data["cuda"]["version"] = "12.2.0"
    problems = problems_of(write(tmp_path, data))
    assert any("is no longer published (did you mean 12.2.2?)" in p for p in problems), problems


def test_cuda_version_must_match_base_tag(tmp_path):
    data = yaml.safe_load((RECIPES / "deepspeed-cu122.yaml").read_text())
    data["cuda"]["version"] = "12.4.1"
    problems = problems_of(write(tmp_path, data))
    assert any("cuda.version: is 12.4.1, but base.image is CUDA 12.2.2" in p for p in problems)


def test_torch_cuda_major_mismatch(tmp_path):
    data = yaml.safe_load((RECIPES / "deepspeed-cu122.yaml").read_text())
    data["torch"]["variant"] = "cu118"
    problems = problems_of(write(tmp_path, data))
    assert any("majors differ" in p for p in problems), problems


def test_openmpi5_rejects_orte_params(tmp_path):
    data = minimal()
    data["base"]["bootstrap"]["suite"] = "trixie"
    data["distro"]["version"] = "13"
    data["python"]["version"] = "3.13"
    data["openmpi"]["version"] = "5.0.7"
    data["torch"]["version"] = "2.9.0"
    data["mpi"] = {"mca": {"orte_abort_on_non_zero_status": 1}}
    problems = problems_of(write(tmp_path, data))
    field = "mpi.mca.orte_abort_on_non_zero_status"
    assert len(problems) == 1
    assert problems[0].startswith(f"{tmp_path / 'r.yaml'}: {field}: does not exist in Open MPI 5")


def test_json_schema_covers_every_section():
    schema = json_schema()
    assert schema["title"] == "imagekit recipe"
    for key in (
        "base",
        "python",
        "openmpi",
        "nccl",
        "torch",
        "deepspeed",
        "ssh",
        "mpi",
        "image",
        "extends",
    ):
        assert key in schema["properties"], key
    assert schema["additionalProperties"] is False


def test_key_given_twice_names_the_key_and_both_lines(tmp_path):
    text = (HERE / "minimal-cpu.yaml").read_text() + "name: other\n"
    first = 1 + text.splitlines().index("name: minimal-cpu")
    last = len(text.splitlines())
    problems = problems_of(write(tmp_path, text))
    assert problems == [
        f"{tmp_path / 'r.yaml'}: line {last}: key 'name' given twice (first on line {first}); "
        "YAML would silently keep only the last one"
    ]


def test_key_given_twice_in_a_nested_flow_mapping(tmp_path):
    text = (
        (HERE / "minimal-cpu.yaml")
        .read_text()
        .replace('python: {version: "3.11"}', 'python: {version: "3.11", version: "3.12"}')
    )
    (problem,) = problems_of(write(tmp_path, text))
    assert "key 'version' given twice" in problem


def test_merge_keys_may_be_overridden(tmp_path):
    text = (
        (HERE / "minimal-cpu.yaml")
        .read_text()
        .replace(
            'python: {version: "3.11"}',
            'defaults: &d {version: "3.10"}\npython: {<<: *d, version: "3.11"}',
        )
    )
    # `defaults` is an unknown key, but the override of the merged `version` is not a duplicate
    problems = problems_of(write(tmp_path, text))
    assert problems == [f"{tmp_path / 'r.yaml'}: defaults: unknown key"]


def test_a_pile_of_unknown_keys_is_capped(tmp_path):
    data = minimal()
    data.update({f"unknown{i}": i for i in range(16)})
    with pytest.raises(RecipeError) as info:
        load_recipe(write(tmp_path, data))
    assert len(info.value.problems) == 16  # all kept for callers
    shown = info.value.message.splitlines()
    assert len(shown) == 11 and shown[-1] == "... and 6 more"
    assert all("unknown key" in line for line in shown[:10])


def test_openmpi5_names_the_prrte_parameter_for_a_renamed_one(tmp_path):
    data = yaml.safe_load((RECIPES / "deepspeed-cpu-ompi5.yaml").read_text())
    data["mpi"] = {"mca": {"orte_default_hostfile": "/etc/mpi/hostfile"}}
    problems = problems_of(write(tmp_path, data))
    assert len(problems) == 1
    assert "mpi.mca.orte_default_hostfile: is prte_default_hostfile in Open MPI 5" in problems[0]


@pytest.mark.parametrize(
    "torch, python, message",
    [
        ({"variant": "cu124"}, {}, "source: distro is the distro's CPU build"),
        ({"index_url": "https://download.pytorch.org/whl/cpu"}, {}, "index_url is only for"),
        ({}, {"source": "deadsnakes"}, "torch.source: distro needs python.source: distro"),
    ],
)
def test_distro_torch_is_the_distros_cpu_build(tmp_path, torch, python, message):
    data = yaml.safe_load((RECIPES / "deepspeed-cpu-ompi5.yaml").read_text())
    data["torch"].update(torch)
    data["python"].update(python)
    problems = problems_of(write(tmp_path, data))
    assert any(message in p for p in problems), problems
