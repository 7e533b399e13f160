"""The platforms imagekit builds for (A1): their OCI names, each one's architecture, and where
a platform shows in tags and lock file names. The default platform shows nowhere, so the
recipes, tags and locks made before platforms existed keep their names."""

from __future__ import annotations

from typing import Literal

Platform = Literal["linux/amd64", "linux/arm64"]
DEFAULT_PLATFORM: Platform = "linux/amd64"
PLATFORMS: tuple[Platform, ...] = ("linux/amd64", "linux/arm64")
# Architecture -> the kernel's machine name (uname -m) and qemu's binfmt_misc handler, which
# runs that architecture's binaries on another host.
MACHINES = {"amd64": ("x86_64", "qemu-x86_64"), "arm64": ("aarch64", "qemu-aarch64")}


def architecture(platform: str) -> str:
    """The architecture part (amd64, arm64): Debian's name and the image config's."""
    return platform.split("/", 1)[1]


def tag_suffix(platform: str) -> str:
    """What a platform adds to an image's tags: the engine holds one image per tag."""
    return "" if platform == DEFAULT_PLATFORM else f"-{architecture(platform)}"


def lock_suffix(platform: str) -> str:
    """A lock per platform (apt and pip pins differ by architecture): x.lock, x.arm64.lock."""
    return ".lock" if platform == DEFAULT_PLATFORM else f".{architecture(platform)}.lock"


def split_lock_name(name: str) -> tuple[str, str]:
    """'x.arm64.lock' -> ('x', 'linux/arm64'); 'x.lock' -> ('x', the default platform)."""
    for platform in PLATFORMS:
        suffix = lock_suffix(platform)
        if platform != DEFAULT_PLATFORM and name.endswith(suffix):
            return name.removesuffix(suffix), platform
    return name.removesuffix(".lock"), DEFAULT_PLATFORM


def without_tag_suffix(tag: str, platform: str) -> str:
    """The tag a platform's image shares with its siblings: '1.0-arm64' -> '1.0'."""
    suffix = tag_suffix(platform)
    return tag.removesuffix(suffix) if suffix else tag
