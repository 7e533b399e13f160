"""`imagekit lock`: resolve a recipe's floating inputs with the real package managers.

apt: one container from the base runs `apt-get install -s` for each stage together with
the stages below it; the difference is what that stage adds (lock.apt_stage_pins).
pip: the Dockerfile is built up to its `python` stage (apt already pinned, so that build is
the locked build's own cache), then pip resolves every pip stage at once with
`--dry-run --report` from the same indexes and wheelhouse the build uses.
"""

from __future__ import annotations

import json
import shlex
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from imagekit import workdirs
from imagekit.build.aptauth import apt_build_args, build_through_mirror, explain_untrusted
from imagekit.build.base import base_content_digest, ensure_base
from imagekit.build.builder import BuildInputs, check_inputs, context_options
from imagekit.build.lockfile import (
    Lock,
    LockedBase,
    LockedTarball,
    apply_lock,
    apt_preferences,
    apt_stage_pins,
    cumulative_packages,
    dump_lock,
    inputs_sha256,
    lock_changes,
    lock_path,
    lock_state,
    missing_apt_pins,
    parse_apt_simulation,
    pip_constraints,
    pip_stage_pins,
    read_lock,
    unhashed_files,
)
from imagekit.build.plan import Plan, make_plan
from imagekit.build.render import render_context, write_context
from imagekit.engine.client import Engine, Message, Reporter
from imagekit.errors import BuildError, ImagekitError, LockError
from imagekit.files import sha256_file, write_text_atomic
from imagekit.labels import LOCK_LABEL
from imagekit.recipe.loader import load_recipe
from imagekit.recipe.model import LoadedRecipe

REPORT = "/tmp/imagekit-pip-report.json"


def _run_label() -> dict[str, str]:
    return {LOCK_LABEL: f"imagekit-lock-{uuid.uuid4().hex[:8]}"}


@dataclass(frozen=True)
class LockResult:
    path: Path
    lock: Lock
    changes: list[tuple[str, str | None, str | None]]
    written: bool  # False: the existing lock was already fresh (no --upgrade)


def lock_recipe(
    recipe_path: Path, inputs: BuildInputs, report: Reporter, upgrade: bool = False
) -> LockResult:
    check_inputs(inputs)
    loaded = load_recipe(recipe_path)
    plan = make_plan(loaded, inputs.platform)
    state = lock_state(recipe_path, plan)
    if state.usable and not upgrade:
        return LockResult(state.path, state.lock, [], written=False)
    if plan.python_ppa:
        raise LockError(
            f"{recipe_path}: python.source: deadsnakes cannot be locked yet "
            "(its packages come from a PPA added during the build)"
        )
    earlier = None if upgrade else _earlier_lock(loaded, state.lock, plan.platform, report)
    engine = Engine.connect()
    base = _locked_base(plan, engine, report)
    apt = _resolve_apt(plan, engine, inputs, report, earlier)
    partial = Lock(recipe=plan.name, inputs_sha256=inputs_sha256(plan), base=base, apt=apt)
    constraints = tuple(pip_constraints(earlier, plan)) if earlier else ()
    pip = _resolve_pip(apply_lock(plan, partial), engine, inputs, report, constraints)
    tarballs = (
        {"openmpi": LockedTarball(**{k: plan.openmpi_tarball[k] for k in ("url", "sha256")})}
        if plan.openmpi_tarball
        else {}
    )
    lock = partial.model_copy(update={"pip": pip, "tarballs": tarballs})
    write_text_atomic(state.path, dump_lock(lock, recipe_path))
    return LockResult(state.path, lock, lock_changes(state.lock, lock), written=True)


def _earlier_lock(
    loaded: LoadedRecipe, own: Lock | None, platform: str, report: Reporter
) -> Lock | None:
    """The pins a re-lock keeps where they still fit: the recipe's own (stale) lock, else
    the lock of the nearest recipe it `extends` for the same platform, so a variant shares
    its parent's layers."""
    if own is not None:
        report(Message("keeping the earlier pins where they still fit (--upgrade re-resolves)"))
        return own
    for source in loaded.sources[1:]:
        path = lock_path(source, platform)
        if not path.exists():
            continue
        try:
            parent = read_lock(path)
        except LockError as exc:
            report(Message(f"not starting from {path}: {exc.message}"))
            return None
        report(Message(f"starting from the pins of {path} where they still fit"))
        return parent
    return None


def _locked_base(plan: Plan, engine: Engine, report: Reporter) -> LockedBase:
    if plan.bootstrap is not None:
        ensure_base(plan.bootstrap, engine, report)
    elif not engine.image_exists(plan.base_image):
        raise LockError(f"base {plan.base_image}: not in the engine; pull it, then lock")
    return LockedBase(
        image=plan.base_image,
        content_digest=base_content_digest(plan, engine),
        bootstrap=plan.bootstrap.as_dict() if plan.bootstrap else None,
    )


def _resolve_apt(
    plan: Plan, engine: Engine, inputs: BuildInputs, report: Reporter, earlier: Lock | None
) -> dict[str, dict[str, str]]:
    stages = plan.apt_stages
    wanted = cumulative_packages(stages)
    report(Message(f"apt: resolving {len(stages)} stages on {plan.base_image}"))
    with apt_build_args(inputs.apt_mirror, engine, report, inputs.ca_bundle) as apt_args:
        script = ["set -e", *_apt_update_lines(apt_args)]
        if earlier is not None and earlier.apt:
            script.append(
                f"printf %s {shlex.quote(apt_preferences(earlier))} "
                "> /etc/apt/preferences.d/imagekit-earlier-lock"
            )
        for stage in stages:
            packages = " ".join(shlex.quote(p) for p in wanted[stage.name])
            script.append(f"echo '### {stage.name}'")
            script.append(f"apt-get install -s --no-install-recommends {packages} 2>&1")
        try:
            output = engine.run_once(
                plan.base_image,
                ["/bin/sh", "-c", "\n".join(script)],
                user="0",
                labels=_run_label(),
            )
        except ImagekitError as exc:
            missing = missing_apt_pins(exc.message)
            untrusted = explain_untrusted(exc.message, inputs.apt_mirror, inputs.ca_bundle)
            if untrusted is not None:
                detail = untrusted
            elif missing:
                detail = f"not found: {' '.join(missing)}"
            else:
                detail = exc.message.splitlines()[-1]
            raise LockError(f"apt resolution on {plan.base_image} failed: {detail}") from None
    closures: dict[str, dict[str, str]] = {}
    for block in output.split("### ")[1:]:
        name, _, text = block.partition("\n")
        closures[name.strip()] = parse_apt_simulation(text)
    pins = apt_stage_pins(stages, closures)
    for stage, packages in pins.items():
        report(Message(f"apt: {stage}: {len(packages)} packages"))
    return pins


def _apt_update_lines(apt_args: dict[str, str]) -> list[str]:
    """Shell lines that point this throwaway container's apt at the build's mirror and
    update its lists the way the Dockerfile's RUNs do: the same mirror rewrite
    (templates/apt-mirror.sh), then templates/apt-install.sh --update-only with the same
    build arguments (credentials and CA bundle fetched, used, deleted; an untrusted https
    source stops it with the same marker line)."""
    templates = resources.files("imagekit").joinpath("templates")
    lines = []
    if "APT_MIRROR" in apt_args:
        mirror = templates.joinpath("apt-mirror.sh").read_text()
        lines.append(f"sh -c {shlex.quote(mirror)} - {shlex.quote(apt_args['APT_MIRROR'])}")
    install = templates.joinpath("apt-install.sh").read_text()
    served = " ".join(
        f"{name}={shlex.quote(value)}" for name, value in apt_args.items() if name != "APT_MIRROR"
    )
    lines.append(f"{served} sh -c {shlex.quote(install)} - --update-only".lstrip())
    return lines


def _resolve_pip(
    plan: Plan,
    engine: Engine,
    inputs: BuildInputs,
    report: Reporter,
    constraints: tuple[str, ...],
) -> dict[str, list]:
    """Build up to the python stage, then let pip resolve every pip stage in one go, held
    to the earlier pins; when those cannot fit the recipe's edit, once more without them."""
    try:
        report_text = _pip_report(plan, engine, inputs, report, constraints)
    except BuildError:
        if not constraints:
            raise
        report(Message("pip: the earlier pins do not fit the recipe's changes; resolving afresh"))
        report_text = _pip_report(plan, engine, inputs, report, ())
    try:
        pip_report = json.loads(report_text)
    except json.JSONDecodeError:
        raise LockError("pip resolution: pip wrote no readable report") from None
    local = _wheelhouse_hashes(inputs.wheelhouse, unhashed_files(pip_report))
    pins = pip_stage_pins(pip_report, {s.stage: s.requirements for s in plan.pip_steps}, local)
    for stage, stage_pins in pins.items():
        report(Message(f"pip: {stage}: {len(stage_pins)} packages"))
    return pins


def _pip_report(
    plan: Plan,
    engine: Engine,
    inputs: BuildInputs,
    report: Reporter,
    constraints: tuple[str, ...],
) -> str:
    workdir = workdirs.make("lock")
    try:
        context = render_context(
            plan, context_options(inputs), pip_resolver_report=REPORT, pip_constraints=constraints
        )
        context_dir = write_context(context, workdir / "context")
        held = f", {len(constraints)} earlier pins kept where they fit" if constraints else ""
        report(Message(f"pip: building the python stage and resolving with pip --dry-run{held}"))
        outcome = build_through_mirror(
            engine,
            context_dir,
            report,
            inputs.apt_mirror,
            inputs.ca_bundle,
            target="imagekit-pip-resolver",
            memory=inputs.memory,
        )
        report_text = engine.run_once(
            outcome.image_id, ["cat", REPORT], user="0", labels=_run_label()
        )
        engine.remove_image(outcome.image_id)
        return report_text
    finally:
        workdirs.remove(workdir)


def _wheelhouse_hashes(wheelhouse: Path | None, names: set[str]) -> dict[str, str]:
    """sha256 of the wheelhouse files pip reported without one (pip usually hashes them)."""
    if wheelhouse is None or not names:
        return {}
    hashes = {}
    for wheel in sorted(wheelhouse.glob("*")):
        if wheel.is_file() and wheel.name in names:
            hashes[wheel.name] = sha256_file(wheel)
    return hashes
