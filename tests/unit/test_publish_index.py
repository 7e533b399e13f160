"""The pure parts of a multi-platform publish: which check report speaks for which image,
the index's tag, one image per platform, and the index document itself. The pushes and the
pull back per platform are in tests/integration/test_platform.py, against a real registry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from imagekit.engine.registry import DOCKER_INDEX, DOCKER_MANIFEST, OCI_MANIFEST, Descriptor
from imagekit.errors import PublishError, PublishRefusedError, UsageError
from imagekit.image import publish

AMD = "sha256:" + "a" * 64
ARM = "sha256:" + "b" * 64


def _report(tmp_path: Path, name: str, image_id: str, passed: bool) -> Path:
    path = tmp_path / name
    body = {"schema": "imagekit.check-report/v1", "image_id": image_id, "passed": passed}
    path.write_text(json.dumps(body))
    return path


def _image(ref: str, image_id: str, arch: str, os_name: str = "linux") -> publish._Image:
    return publish._Image(ref, {"Id": image_id, "Os": os_name, "Architecture": arch})


def test_each_image_needs_its_own_passing_report(tmp_path):
    amd = _report(tmp_path, "amd.json", AMD, True)
    arm = _report(tmp_path, "arm.json", ARM, True)
    assert publish.check_verdicts((arm, amd), [AMD, ARM], required=True) == {AMD: True, ARM: True}
    with pytest.raises(PublishRefusedError, match="without a check report for sha256:bbbb"):
        publish.check_verdicts((amd,), [AMD, ARM], required=True)
    failed = _report(tmp_path, "failed.json", ARM, False)
    with pytest.raises(PublishRefusedError, match="failed its checks"):
        publish.check_verdicts((amd, failed), [AMD, ARM], required=True)


def test_a_report_of_another_image_is_refused_and_none_is_fine_unless_required(tmp_path):
    other = _report(tmp_path, "other.json", "sha256:" + "c" * 64, True)
    with pytest.raises(PublishRefusedError, match="not any of these images"):
        publish.check_verdicts((other,), [AMD, ARM], required=False)
    assert publish.check_verdicts((), [AMD, ARM], required=False) == {AMD: None, ARM: None}
    with pytest.raises(PublishRefusedError, match="without a check report"):
        publish.check_verdicts((), [AMD], required=True)


@pytest.mark.parametrize("text", ["", "[]", '"x"', "{", '{"schema": "other"}'])
def test_a_report_that_is_not_one_is_a_usage_error(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(UsageError, match="bad.json"):
        publish.check_verdicts((path,), [AMD], required=False)


def test_the_index_tag_is_the_images_tag_without_the_platform_suffix():
    found = [_image("x:23.08-cpu", AMD, "amd64"), _image("x:23.08-cpu-arm64", ARM, "arm64")]
    assert publish._common_tag(found) == "23.08-cpu"
    found[1] = _image("x:24.01-cpu-arm64", ARM, "arm64")
    with pytest.raises(UsageError, match="--tag"):
        publish._common_tag(found)


@pytest.mark.parametrize(
    ("images", "message"),
    [
        ([("a:1", "amd64"), ("b:1", "amd64")], "both linux/amd64"),
        ([("a:1", "amd64"), ("b:1", "s390x")], "'linux/s390x'"),
        ([("a:1", "amd64"), ("b:1", "arm64\x1b[2J")], "arm64\\\\x1b"),
    ],
)
def test_an_index_holds_one_image_per_known_platform(images, message):
    found = [_image(ref, AMD, arch) for ref, arch in images]
    with pytest.raises(UsageError, match=message):
        publish._one_image_per_known_platform(found)


class _Registry:
    """The registry's answers as data: what `descriptor` says of each pushed digest."""

    def __init__(self, media_types: dict[str, str]):
        self.media_types = media_types

    def descriptor(self, digest: str) -> Descriptor | None:
        media_type = self.media_types.get(digest)
        return None if media_type is None else Descriptor(media_type, digest, 1234)


def _entries() -> list[publish.PlatformRecord]:
    return [
        publish.PlatformRecord("linux/amd64", "t-amd64", "sha256:" + "1" * 64, AMD, True),
        publish.PlatformRecord("linux/arm64", "t-arm64", "sha256:" + "2" * 64, ARM, True),
    ]


def test_the_index_names_each_platforms_manifest():
    entries = _entries()
    registry = _Registry({e.digest: DOCKER_MANIFEST for e in entries})
    media_type, body = publish._index_body(registry, "r/x", entries)
    index = json.loads(body)
    assert media_type == index["mediaType"] == DOCKER_INDEX
    assert [(m["digest"], m["platform"]) for m in index["manifests"]] == [
        (entries[0].digest, {"architecture": "amd64", "os": "linux"}),
        (entries[1].digest, {"architecture": "arm64", "os": "linux"}),
    ]
    assert publish._index_body(registry, "r/x", entries)[1] == body  # same bytes, same digest


def test_a_manifest_missing_after_its_push_or_mixed_types_write_no_index():
    entries = _entries()
    with pytest.raises(PublishError, match="not there"):
        publish._index_body(_Registry({entries[0].digest: DOCKER_MANIFEST}), "r/x", entries)
    mixed = {entries[0].digest: DOCKER_MANIFEST, entries[1].digest: OCI_MANIFEST}
    with pytest.raises(PublishError, match="mix media types"):
        publish._index_body(_Registry(mixed), "r/x", entries)


class _Tags:
    """A registry's tags as data: each one an image ID or an index's {platform: image ID}."""

    def __init__(self, tags: dict):
        self.tags = tags

    def index_configs(self, tag: str):
        found = self.tags.get(tag)
        return found if found is None or isinstance(found, dict) else {}

    def config_digest(self, tag: str):
        return self.tags[tag]


def _push(tags: dict, force: bool = False) -> publish._Push:
    options = publish.PublishOptions(registry="r", force=force)
    return publish._Push(None, _Tags(tags), "r/x", options, lambda event: None)


@pytest.mark.parametrize(
    ("tags", "wanted", "refused"),
    [
        ({}, AMD, None),
        ({"t": AMD}, AMD, None),
        ({"t": ARM}, AMD, "r/x:t already points at another image (sha256:bbbbbbbbbbbb)"),
        ({"t": {"linux/amd64": AMD}}, AMD, "already points at an index (linux/amd64)"),
        ({"t": AMD}, {"linux/amd64": AMD}, "already points at another image"),
        ({"t": {"linux/amd64": AMD}}, {"linux/amd64": AMD}, None),
        ({"t": {"linux/amd64": ARM}}, {"linux/amd64": AMD}, "an index of other images"),
    ],
)
def test_a_version_tag_never_moves_unless_forced(tags, wanted, refused):
    if refused is None:
        publish._refuse_to_move(_push(tags), "t", wanted)
    else:
        with pytest.raises(PublishRefusedError, match=re.escape(refused)):
            publish._refuse_to_move(_push(tags), "t", wanted)
    publish._refuse_to_move(_push(tags, force=True), "t", wanted)  # --force: never refused
