"""Local base images: Debian bootstrapped with mmdebstrap at a fixed SOURCE_DATE_EPOCH and
imported into the engine, named by a hash of the spec and reused while it exists. This is
what lets imagekit build with no registry at all, from a reproducible base."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

from imagekit import workdirs
from imagekit.build.normalize import LayerResult, NormalizedArchive, config_bytes, epoch_stamp
from imagekit.build.plan import BootstrapSpec, Plan
from imagekit.engine.client import Engine, Message, Reporter
from imagekit.errors import BootstrapError, ImageNotFoundError
from imagekit.platforms import MACHINES


def mmdebstrap_command(spec: BootstrapSpec, tarball: Path) -> list[str]:
    # mmdebstrap's default is main alone; the flag appears only when the recipe asks for more.
    components = (
        [] if spec.components == ("main",) else [f"--components={','.join(spec.components)}"]
    )
    return [
        "mmdebstrap",
        f"--architectures={spec.architecture}",  # explicit: the host's may differ (A1)
        f"--variant={spec.variant}",
        f"--include={','.join(spec.include)}",
        *components,
        spec.suite,
        str(tarball),
        spec.mirror,
    ]


def ensure_base(spec: BootstrapSpec, engine: Engine, report: Reporter) -> str:
    """Return the base image reference, bootstrapping it first when it is missing."""
    if engine.image_exists(spec.image_ref):
        report(Message(f"base {spec.image_ref}: reusing the local bootstrap"))
        return spec.image_ref
    if shutil.which("mmdebstrap") is None:
        raise BootstrapError(
            f"base {spec.image_ref}: mmdebstrap is not installed",
            hint="apt-get install -y mmdebstrap (Debian/Ubuntu), or set base.image in the recipe",
        )
    _check_emulation(spec)
    report(Message(f"base {spec.image_ref}: bootstrapping Debian {spec.suite} from {spec.mirror}"))
    with workdirs.scratch("base") as tmp:
        tarball = Path(tmp) / "base.tar"
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(spec.epoch)}
        result = subprocess.run(
            mmdebstrap_command(spec, tarball), env=env, capture_output=True, text=True
        )
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip()
            lines = output.splitlines() or [str(result.returncode)]
            raise BootstrapError(
                f"base {spec.image_ref}: mmdebstrap failed: {lines[-1]}",
                hint="\n".join(lines[-15:]),
            )
        archive = rootfs_archive(tarball, spec)
        engine.load_archive(archive.chunks(), archive.image_id, what=f"base {spec.image_ref}")
        engine.tag(archive.image_id, spec.image_ref)
    report(Message(f"base {spec.image_ref}: imported (linux/{spec.architecture})"))
    return spec.image_ref


BINFMT = Path("/proc/sys/fs/binfmt_misc")


def _check_emulation(spec: BootstrapSpec) -> None:
    """mmdebstrap runs the foreign architecture's maintainer scripts here: without qemu's
    handler it fails deep in its log. One line instead, naming what to set up."""
    machine, handler = MACHINES.get(spec.architecture, ("", ""))
    if platform.machine() == machine or (BINFMT / handler).exists():
        return
    raise BootstrapError(
        f"base {spec.image_ref}: {spec.architecture} binaries cannot run on this "
        f"{platform.machine()} host: no qemu handler ({BINFMT / handler})",
        hint="./dev setup registers it (apt-get install qemu-user-static binfmt-support; "
        "mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc)",
    )


def rootfs_archive(tarball: Path, spec: BootstrapSpec) -> NormalizedArchive:
    """The bootstrap's root filesystem as a one-layer docker-archive whose config names the
    spec's platform (A1). `docker import` would record the engine's own architecture, so an
    arm64 base would say amd64 and every tool after it would believe that. The config's
    times are the spec's epoch: the same tarball always gives the same base image ID."""
    digest = hashlib.sha256()
    with tarball.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    diff_id = f"sha256:{digest.hexdigest()}"
    stamp = epoch_stamp(spec.epoch)
    config = {
        "architecture": spec.architecture,
        "os": "linux",
        "created": stamp,
        "config": {},
        "history": [{"created": stamp, "created_by": f"mmdebstrap {spec.suite} (imagekit)"}],
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    body = config_bytes(config)
    layer = LayerResult(tarball, diff_id, tarball.stat().st_size, 0)
    return NormalizedArchive("sha256:" + hashlib.sha256(body).hexdigest(), body, [layer])


def base_content_digest(plan: Plan, engine: Engine) -> str:
    """What the base really is: the bootstrap's root filesystem layer, or the registry
    digest the tag pointed at when it was pulled."""
    info = engine.inspect_image(plan.base_image)
    if plan.bootstrap is not None:
        return info["RootFS"]["Layers"][0]
    digests = info.get("RepoDigests") or []
    if not digests:
        raise ImageNotFoundError(
            f"base {plan.base_image}: the engine knows no registry digest for it "
            "(built or loaded locally); pull it from its registry first"
        )
    return digests[0]
