"""imagekit/grammar.py: one grammar per value shape, each with fullmatch (a trailing newline
passed `re.match(...$)`), and the one image-reference parser."""

from __future__ import annotations

import pytest

from imagekit import grammar
from imagekit.build.targets import publish_targets
from imagekit.engine.client import split_ref

from ..conftest import RECIPES


@pytest.mark.parametrize(
    "check, good, bad",
    [
        (
            grammar.check_apt_package,
            ["curl", "libc6:amd64", "automake=1:1.16.5-1.3"],
            ["Curl", "x\n", "a b", "c;d"],
        ),
        (
            grammar.check_requirement,
            ["mpi4py==4.1.2", 'x; python_version >= "3.8"'],
            ["x\n", " x", "x==1\nRUN y"],
        ),
        (grammar.check_pep440, ["2.1.2", "2.13.0+cpu"], ["2.1.2\n", "1 .0", "latest"]),
        (grammar.check_env_name, ["NCCL_DEBUG", "_X1"], ["1X", "A-B", "A\n"]),
        (grammar.check_sha256, ["a" * 64], ["A" * 64, "a" * 64 + "\n", "a" * 63]),
        (grammar.check_tag, ["23.08-cpu", "latest"], [".x", "-x", "x\n", "é", "a" * 129]),
        (grammar.check_mca_key, ["btl_tcp_if_exclude"], ["btl tcp", "plm_rsh_agent\n"]),
        (grammar.check_mca_value, ["^openib", "lo,docker0"], ["ob1\nplm_rsh_agent = /x", " x", ""]),
        (
            grammar.check_http_url,
            ["https://pypi.org/simple", "http://u:p@[::1]:8080/x"],
            ["ftp://x", "https://x/#f", "https://x/$y", "https://x\n", "/srv"],
        ),
        (
            grammar.check_image_ref,
            ["nvidia/cuda:12.2.2-devel", "localhost:5000/a/b:t", "a@sha256:" + "0" * 64],
            ["A/b", "a:b\n", "a b"],
        ),
    ],
)
def test_each_grammar_takes_its_shape_and_nothing_more(check, good, bad):
    for value in good:
        assert check(value) == value
    for value in bad:
        with pytest.raises(ValueError):
            check(value)


@pytest.mark.parametrize(
    "ref, name, tag, digest",
    [
        ("localhost:5000/team/img:1.0", "localhost:5000/team/img", "1.0", None),
        ("localhost:5000/team/img", "localhost:5000/team/img", None, None),
        ("img@sha256:" + "ab" * 32, "img", None, "sha256:" + "ab" * 32),
        ("deepspeed-training:latest-cpu", "deepspeed-training", "latest-cpu", None),
    ],
)
def test_one_parser_for_image_references(ref, name, tag, digest):
    assert grammar.parse_ref(ref) == grammar.Reference(name, tag, digest)
    assert split_ref(ref) == (name, tag or "latest")


def test_a_recipes_moving_tags_are_their_tags():
    images, moving = publish_targets((str(RECIPES / "deepspeed-cpu.yaml"),))
    assert images == ("deepspeed-training:23.08-cpu-py311-debian12",)
    assert moving == ("latest-cpu",)


def test_an_index_takes_the_platforms_moving_tags_without_their_suffix():
    images, moving = publish_targets(
        (str(RECIPES / "deepspeed-cpu.yaml"), str(RECIPES / "deepspeed-cpu-arm64.yaml"))
    )
    assert images == (
        "deepspeed-training:23.08-cpu-py311-debian12",
        "deepspeed-training:23.08-cpu-py311-debian12-arm64",
    )
    assert moving == ("latest-cpu",)


def test_shown_keeps_an_error_on_one_line():
    assert grammar.shown("plain") == "plain"
    assert grammar.shown("two\nlines") == "'two\\nlines'"
    assert len(grammar.shown("x" * 500)) <= 80
