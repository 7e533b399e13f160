"""Local base images: Debian bootstrapped with mmdebstrap at a fixed SOURCE_DATE_EPOCH and
imported into the engine, named by a hash of the spec and reused while it exists. This is
what lets imagekit build with no registry at all, from a reproducible base."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from imagekit import workdirs
from imagekit.build.plan import BootstrapSpec, Plan
from imagekit.engine.client import Engine, Message, Reporter
from imagekit.errors import BootstrapError, ImageNotFoundError


def mmdebstrap_command(spec: BootstrapSpec, tarball: Path) -> list[str]:
    # mmdebstrap's default is main alone; the flag appears only when the recipe asks for more.
    components = (
        [] if spec.components == ("main",) else [f"--components={','.join(spec.components)}"]
    )
    return [
        "mmdebstrap",
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
        engine.import_tarball(tarball, spec.image_ref)
    report(Message(f"base {spec.image_ref}: imported"))
    return spec.image_ref


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
