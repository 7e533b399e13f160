"""Credential shapes and recipe env rules: a secret never ships in image ENV unnoticed, and
evidence never repeats the secret."""

from __future__ import annotations

import pytest
import yaml

from imagekit.credentials import file_findings, find, mask, recipe_env_problems, secret_name
from imagekit.errors import RecipeError
from imagekit.recipe.loader import load_recipe

from .test_recipe import HERE

TOKENS = {
    "URL with a password": "deb http://builder:s3cr3tT0ken@apt.example.internal/debian bookworm",
    "GitHub token": "ghp_" + "a1B2c3D4e5F6g7H8i9J0kLmN",
    "Hugging Face token": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWx",
    "AWS access key": "aws_access_key_id = AKIA" + "ABCDEFGHIJKLMNOP",
    "Slack token": "xoxb-" + "123456789012-abcdefghij",
    "private key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n",
}


@pytest.mark.parametrize("what", sorted(TOKENS))
def test_each_token_shape_is_found_and_masked(what):
    (found,) = find(TOKENS[what])
    assert found.what == what
    for secret in (
        "s3cr3tT0ken",
        "a1B2c3D4e5F6g7H8i9J0kLmN",
        "AbCdEfGhIjKlMnOpQrStUvWx",
        "ABCDEFGHIJKLMNOP",
        "abcdefghij",
    ):
        assert secret not in found.masked


def test_ordinary_text_is_not_a_credential():
    text = "deb http://deb.debian.org/debian bookworm main\nPATH=/usr/bin\nhf_hub_offline=1\n"
    assert find(text) == []


def test_mask_keeps_a_recognisable_prefix_only():
    assert mask("hf_AbCdEfGhIjKlMnOp") == "hf_A********"
    assert mask("short") == "s********"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("WANDB_API_KEY", True),
        ("DB_PASSWORD", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("NCCL_DEBUG", False),
        ("PATH", False),
        ("OMP_NUM_THREADS", False),
    ],
)
def test_secret_names(name, secret):
    assert secret_name(name) is secret


def test_recipe_env_rules():
    assert recipe_env_problems({"NCCL_DEBUG": "WARN"}, ()) == []
    (named,) = recipe_env_problems({"WANDB_API_KEY": "x"}, ())
    assert named.startswith("env.WANDB_API_KEY: the name says it is a secret")
    assert "mount it at run time" in named
    assert (
        recipe_env_problems({"TOKENIZERS_PARALLELISM": "false"}, ("TOKENIZERS_PARALLELISM",)) == []
    )
    # a token-shaped value is an error whatever the name, and is never echoed
    (shaped,) = recipe_env_problems({"EXTRA": TOKENS["Hugging Face token"]}, ("EXTRA",))
    assert "Hugging Face token" in shaped and "AbCdEfGhIjKlMnOpQrStUvWx" not in shaped


def test_a_recipe_with_a_token_in_env_is_one_line_exit_2(tmp_path, capsys):
    data = yaml.safe_load((HERE / "minimal-cpu.yaml").read_text())
    data["env"] = {"HF_TOKEN": TOKENS["Hugging Face token"], "NCCL_DEBUG": "WARN"}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert len(info.value.problems) == 1 and info.value.problems[0].startswith(
        f"{path}: env.HF_TOKEN:"
    )
    data["env"] = {"TOKENIZERS_PARALLELISM": "false"}
    data["env_not_secret"] = ["TOKENIZERS_PARALLELISM"]
    path.write_text(yaml.safe_dump(data))
    assert load_recipe(path).recipe.env == {"TOKENIZERS_PARALLELISM": "false"}


def test_a_recipe_value_holding_a_password_is_refused(tmp_path):
    data = yaml.safe_load((HERE / "minimal-cpu.yaml").read_text())
    password = "s3cr3t" + "T0ken"
    data["torch"]["index_url"] = f"https://ci:{password}@pypi.internal/whl/cpu"
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}: torch.index_url: holds a URL with a password")
    assert password not in problem and "--index-url" in problem


def test_a_build_arg_that_looks_secret_is_refused_before_anything_runs(capsys):
    from ..conftest import RECIPES
    from .test_cli import run

    hf = TOKENS["Hugging Face token"]
    for arg in (f"HF_TOKEN={hf}", f"MIRROR=https://ci:{hf}@pypi.internal/simple"):
        recipe = str(RECIPES / "deepspeed-cpu.yaml")
        code, _, err = run(capsys, "build", recipe, "--build-arg", arg, "--dry-run")
        assert code == 2
        assert err.startswith(f"ERROR --build-arg {arg.split('=')[0]}: looks like a secret")
        assert len(err.strip().splitlines()) == 1 and hf not in err


@pytest.mark.parametrize(
    ("path", "head", "expected"),
    [
        (
            "root/.npmrc",
            b"//registry.npmjs.org/:_authToken=npm_abcdefghijklmnop\n",
            "_authToken set (npm_",
        ),
        (
            "etc/apt/auth.conf.d/private.conf",
            b"machine apt.internal login b password s3cr3tT0ken\n",
            "password set",
        ),
        (
            "root/.docker/config.json",
            b'{"auths": {"r.example": {"auth": "dXNlcjpwYXNz"}}}',
            "auth set",
        ),
        ("root/.aws/credentials", b"[default]\n", "a credentials file"),
        ("home/u/.git-credentials", b"", "a credentials file"),
        (
            "etc/apt/sources.list.d/p.list",
            b"deb http://u:s3cr3tT0ken@apt.internal/debian bookworm main\n",
            "URL with a password",
        ),
        (
            "etc/profile.d/hf.sh",
            b"export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWx\n",
            "Hugging Face token",
        ),
        (
            "root/.kube/config",
            b"users:\n- user:\n    token: eyJhbGciOiJSUzI1NiJ9abc\n",
            "token set",
        ),
    ],
)
def test_credential_files(path, head, expected):
    reasons = file_findings(path, head)
    assert reasons and expected in reasons[0]
    assert all(s not in " ".join(reasons) for s in ("s3cr3tT0ken", "dXNlcjpwYXNz", "AbCdEfGhIj"))


@pytest.mark.parametrize(
    ("path", "head"),
    [
        ("etc/pip.conf", b"[global]\nindex-url = https://pypi.org/simple\n"),
        ("etc/ssh/ssh_config", b"PasswordAuthentication no\n"),
        ("etc/ssh/ssh_host_rsa_key", b"-----BEGIN OPENSSH PRIVATE KEY-----\n"),  # keys check's
        ("etc/apt/sources.list", b"deb http://deb.debian.org/debian bookworm main\n"),
        ("root/.npmrc", b"registry=https://registry.npmjs.org/\n"),
    ],
)
def test_ordinary_files_are_not_credentials(path, head):
    assert file_findings(path, head) == []
