"""`imagekit mpirun` and `imagekit mpijob`: the recommended line and the manifests for a
recipe or image under a profile. This is where recipes and profiles are read (only when
named: start-up time); recommend.py, lint.py and manifests.py stay pure."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from imagekit import operators
from imagekit.run.manifests import mpijob, trainjob
from imagekit.run.recommend import LaunchLine, LaunchRequest, recommend


def mpirun_line(request: dict, recipe: Path | None, profile: str) -> LaunchLine:
    """The recommended launch line; MCA parameters the recipe bakes in are left out, and a
    profile whose sshd is not on port 22 gets the rsh agent pointed at its port."""
    fields = dict(request)  # the caller's mapping stays as it was
    plan = None
    if recipe is not None:  # the recipe machinery is the slow part of start-up: only then
        from imagekit.build.targets import recipe_plan

        plan = recipe_plan(recipe)
    if plan is not None:
        fields.setdefault("baked_mca", {k: v for k, v, _ in (*plan.mca, *plan.prte_mca)})
        if fields.get("openmpi_major") is None:
            fields["openmpi_major"] = plan.openmpi_major
        if fields.get("gpu") is None:
            fields["gpu"] = plan.accel == "gpu"
        if fields.get("fabric") is None:
            fields["fabric"] = plan.fabric
    fields["gpu"] = bool(fields.get("gpu"))
    fields["fabric"] = fields.get("fabric") or "tcp"
    fields["openmpi_major"] = int(fields.get("openmpi_major") or 4)
    fields["ssh_port"] = profile_port(profile)
    return recommend(LaunchRequest(**fields))


def profile_port(name_or_path: str) -> int:
    """A profile's sshd port. A built-in profile's is read straight from the data file:
    building the profile model (pydantic) would be most of `imagekit mpirun`'s start-up.
    The unit tests hold this equal to `load_profile(...).port` for every built-in profile."""
    from imagekit.datafiles import data_yaml

    body = data_yaml("profiles.yaml").get(name_or_path)
    if isinstance(body, dict):
        port = body.get("port", 22)
        if isinstance(port, int):
            return port
    from imagekit.profiles import load_profile  # a user's profile file: validated

    return load_profile(name_or_path).port


def lint_defaults(
    openmpi_flag: str | None, fabric_flag: str | None, recipe: Path | None
) -> tuple[int | None, str]:
    """(Open MPI major, fabric) for `lint-cmd`: each flag wins; else the recipe's (read
    once, only when a flag leaves something to read); else unknown and tcp."""
    plan = None
    if recipe is not None and (openmpi_flag is None or fabric_flag is None):
        from imagekit.build.targets import recipe_plan

        plan = recipe_plan(recipe)
    major = int(openmpi_flag) if openmpi_flag is not None else None
    if major is None and plan is not None:
        major = plan.openmpi_major
    fabric = fabric_flag or (plan.fabric if plan is not None else "tcp")
    return major, fabric


def mpijob_manifest(
    target: str,
    name: str,
    workers: int,
    slots: int,
    command: tuple[str, ...],
    gpus_per_worker: int,
    shm_size: str,
    operator: str = operators.DEFAULT,
    profile: str | None = None,
    rdma: Mapping[str, int] | None = None,
) -> list[dict]:
    """The documents to `kubectl apply` for TARGET under `operator`."""
    from imagekit.build.targets import recipe_plan, resolve_target

    image, recipe = resolve_target(target)
    chosen = None
    if profile is not None:
        from imagekit.profiles import load_profile

        chosen = load_profile(profile)
    line = mpirun_line(
        {
            "workers": workers,
            "slots": slots,
            "command": command,
            "gpu": True if gpus_per_worker else None,
            "fabric": "rdma" if rdma else None,
        },
        recipe,
        profile or "seed",
    )
    if operators.OPERATORS[operator].manifest == "TrainJob":
        plan = recipe_plan(recipe)
        port = plan.ssh_port if plan is not None else 22
        if chosen is not None and chosen.non_root:
            port = chosen.port
        return trainjob(
            name, image, workers, slots, line.argv, gpus_per_worker, shm_size, port, chosen, rdma
        )
    return [mpijob(name, image, workers, slots, line.argv, gpus_per_worker, shm_size, chosen, rdma)]
