"""`imagekit adapt IMAGE`: an existing image -> one thin layer that makes it MPIJob-ready.

IMAGE -> facts (probe.sh in a throwaway container) -> AdaptPlan (pure: what the profile needs
and the image lacks, each fix citing its requirement) -> context (templates/adapt/) -> build
-> `imagekit check` under the same profile. Nothing the image already has is reinstalled:
not Python, torch or CUDA, and MPI only when the user asks for the distro's package.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from imagekit import workdirs
from imagekit.build.render import Context, template_environment, write_context
from imagekit.errors import EngineError, ImagekitError, ImageUnusableError, UsageError
from imagekit.grammar import parse_ref
from imagekit.labels import ADAPT_LABEL, LABEL_PREFIX
from imagekit.ompi import OPERATOR_HOSTFILE, openmpi_major
from imagekit.profiles import Profile
from imagekit.requirements import SSH_CLIENT, SSHD, EnvRequirement, SettingsRequirement, env_units

# What sshd gives a root session when nothing else (pam_env, SetEnv) says otherwise.
SSHD_ROOT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
ROOT_USERS = ("", "root", "0", "0:0", "root:root")
SUPPORTED = ("debian", "ubuntu")
LABEL = LABEL_PREFIX


@dataclass(frozen=True)
class ImageFacts:
    """What probe.sh printed, plus the image's config (user, env, labels)."""

    probed: dict[str, str]
    image_id: str = ""
    user: str = ""
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str:
        return self.probed.get(key, "")

    def has(self, command: str) -> bool:
        return bool(self.get(f"which.{command}"))

    @property
    def sshd(self) -> bool:
        return self.get("file./usr/sbin/sshd") == "yes"


def parse_probe(output: str, inspected: dict) -> ImageFacts:
    """probe.sh's lines and `docker inspect`'s answer -> facts."""
    config = inspected.get("Config") or {}
    probed = {}
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in probed:  # the first value, as sshd -T and ssh -G mean it
            probed[key] = value.strip()
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    labels = dict(config.get("Labels") or {})
    return ImageFacts(probed, inspected.get("Id", ""), config.get("User") or "", env, labels)


@dataclass(frozen=True)
class Fix:
    requirement: str
    what: str
    in_script: bool = True  # done by adapt.sh (else by a Dockerfile instruction)


@dataclass(frozen=True)
class McaFile:
    """Launch defaults one of Open MPI's parameter files lacks (L4-L10; K3 for PRRTE's)."""

    path: str
    settings: tuple[tuple[str, str], ...]
    # Keys whose value in the image is replaced rather than kept: the line goes first.
    replaced: tuple[str, ...] = ()
    requirement: str = "L4-L10"

    @property
    def runtime(self) -> str:
        return "PRRTE" if self.path.endswith("prte-mca-params.conf") else "Open MPI"


@dataclass(frozen=True)
class MpiUser:
    """K1: the non-root user a profile runs sshd and mpirun as, and what adapt gives it."""

    name: str
    uid: int
    port: int
    # The image's ENV names a session of this user's sshd must see: it runs without PAM, so
    # SetEnv in its sshd_config carries them (pam_env's /etc/environment does for root).
    session_env: tuple[str, ...] = ()

    @property
    def home(self) -> str:
        return f"/home/{self.name}"

    # For templates/user-sshd_config.j2, which recipes render from their plan.
    @property
    def ssh_user(self) -> str:
        return self.name

    @property
    def ssh_port(self) -> int:
        return self.port


# ENV names a non-root session needs from the image, when the image sets them.
SESSION_ENV_NAMES = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "PYTHONPATH", "TORCH_EXTENSIONS_DIR")
SESSION_ENV_PREFIXES = ("OMPI_", "PRTE_", "NCCL_")


@dataclass(frozen=True)
class AdaptPlan:
    image: str
    profile: str
    port: int
    fixes: tuple[Fix, ...]
    packages: tuple[str, ...] = ()
    package_reasons: str = ""
    # --apt-mirror: packages come through the mirror (build arguments, as in `build`); the
    # image keeps its own apt sources.
    via_mirror: bool = False
    sshd_settings: bool = False
    ssh_settings: bool = False
    pam_loginuid: bool = False
    run_sshd: bool = False
    host_keys: bool = False
    session_env: tuple[str, ...] = ()
    mca_files: tuple[McaFile, ...] = ()  # L4-L10, K3: Open MPI's (and PRRTE's) launch defaults
    hostfile_placeholder: str = ""  # K3: the default hostfile PRRTE now reads, when missing
    switch_to_root: bool = False
    original_user: str = ""
    run_as_root_env: bool = False
    # Each failing ENV unit's remedy (imagekit/requirements): (requirement, title, values).
    env_remedies: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = ()
    user: MpiUser | None = None  # K1: a non-root profile's user, made by adapt.sh
    final_user: str = ""  # the image's USER at the end (a non-root profile's user)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def needed(self) -> bool:
        return bool(self.fixes)

    @property
    def needs_script(self) -> bool:
        return any(fix.in_script for fix in self.fixes)


def check_distro(image: str, facts: ImageFacts) -> None:
    os_id = facts.get("os.id")
    family = {os_id, *facts.get("os.like").split()}
    if facts.get("os.release") == "missing":
        raise UsageError(
            f"{image}: has no /etc/os-release, so adapt cannot tell its distribution "
            "(it supports Debian/Ubuntu images)"
        )
    if not family & set(SUPPORTED) or not facts.has("apt-get"):
        found = facts.get("os.pretty") or os_id or "no distribution named"
        raise UsageError(f"{image}: adapt supports Debian/Ubuntu images; found {found}")


def plan_adapt(
    image: str,
    facts: ImageFacts,
    profile: Profile,
    *,
    port: int | None = None,
    install_mpi: bool = False,
    apt_mirror: bool = False,
) -> AdaptPlan:
    """Pure: the fixes `profile` needs that `facts` shows missing, in the order they run."""
    check_distro(image, facts)
    if profile.non_root:
        _check_non_root_profile(profile)
    port = port or profile.port
    fixes: list[Fix] = []
    packages, reasons = _packages(image, facts, install_mpi, fixes)
    sshd = _sshd_fixes(facts, profile, port, fixes)
    user = _user_fix(facts, profile, port, fixes)
    mca_files = _launch_defaults(facts)
    for mca in mca_files:
        fixes.append(Fix(mca.requirement, _describe_mca(mca, facts)))
    hostfile_placeholder = _hostfile_placeholder(mca_files, facts)
    if hostfile_placeholder:
        fixes.append(
            Fix(
                "K3",
                f"{hostfile_placeholder} placeholder with no hosts, so mpirun outside an MPIJob "
                "runs locally (the operator mounts the real one over it)",
            )
        )
    switch_to_root, final_user = _users(facts, profile, fixes)
    run_as_root_env = _run_as_root_env(facts, profile, fixes)
    env_remedies = _env_remedies(facts, profile, fixes)
    labels = _labels(image, facts, profile, port, user, fixes)  # last: it may add a fix
    return AdaptPlan(
        image=image,
        profile=profile.name,
        port=port,
        fixes=tuple(fixes),
        packages=tuple(packages),
        package_reasons="; ".join(reasons),
        via_mirror=apt_mirror and bool(packages),
        **sshd,
        mca_files=mca_files,
        hostfile_placeholder=hostfile_placeholder,
        switch_to_root=switch_to_root,
        original_user=facts.user,
        run_as_root_env=run_as_root_env,
        env_remedies=env_remedies,
        user=user,
        final_user=final_user,
        labels=labels,
    )


def _packages(
    image: str, facts: ImageFacts, install_mpi: bool, fixes: list[Fix]
) -> tuple[list[str], list[str]]:
    """R2, R4, R9, R11: the distro packages the image lacks (never MPI unless asked)."""
    packages: list[str] = []
    reasons: list[str] = []

    def need(name: str, requirement: str, why: str) -> None:
        packages.append(name)
        reasons.append(f"{requirement}: {why}")
        fixes.append(Fix(requirement, f"install {name} ({why})"))

    if not facts.has("mpirun"):
        if not install_mpi:
            raise UsageError(
                f"{image}: no mpirun on the image's PATH (R2); adapt does not install MPI "
                "over a training stack. Pass --install-mpi to add the distro's openmpi-bin"
            )
        need("openmpi-bin", "R2", "mpirun on PATH")
    if not facts.sshd:
        need("openssh-server", "R4", "workers run sshd")
    if not facts.has("ssh"):
        need("openssh-client", "R9", "the launcher's mpirun starts ranks over ssh")
    if facts.get("file./bin/bash") != "yes":
        need("bash", "R11", "mpirun ... bash run.sh")
    return packages, reasons


def _sshd_fixes(facts: ImageFacts, profile: Profile, port: int, fixes: list[Fix]) -> dict:
    """Root's sshd (its settings, PAM, /run/sshd, host keys, pam_env's environment) is what a
    root-run MPIJob starts; a non-root profile's user runs its own sshd instead (_user_fix).
    The ssh client's settings are the launcher's either way."""
    root_sshd = not profile.non_root
    sshd_settings = root_sshd and (not facts.sshd or _sshd_wrong(facts, port))
    if sshd_settings:
        fixes.append(Fix("R3 R5 R10", f"sshd settings first in sshd_config (port {port})"))
    ssh_settings = not facts.has("ssh") or _ssh_wrong(facts, port)
    if ssh_settings:
        fixes.append(Fix("R9 R10", f"ssh client settings first in ssh_config (port {port})"))
    # openssh-server installed here arrives with pam_loginuid required (Debian's default).
    pam_loginuid = root_sshd and (not facts.sshd or facts.get("pam_loginuid") == "required")
    if pam_loginuid:
        fixes.append(Fix("R3", "pam_loginuid optional in /etc/pam.d/sshd (containers)"))
    run_sshd = root_sshd and facts.get("run_sshd") != "root 755"
    if run_sshd:
        fixes.append(Fix("R6", "/run/sshd, root, 0755"))
    host_keys = root_sshd and (not facts.sshd or int(facts.get("host_keys") or 0) == 0)
    if host_keys:
        fixes.append(Fix("R4", "host keys (ssh-keygen -A), so `sshd -De` starts as is"))
    session_env = _session_env(facts) if root_sshd else ()
    if session_env:
        names = " and ".join(session_env)
        fixes.append(Fix("K4", f"{names} of the image's ENV in /etc/environment (ssh sessions)"))
    return {
        "sshd_settings": sshd_settings,
        "ssh_settings": ssh_settings,
        "pam_loginuid": pam_loginuid,
        "run_sshd": run_sshd,
        "host_keys": host_keys,
        "session_env": session_env,
    }


def _user_fix(facts: ImageFacts, profile: Profile, port: int, fixes: list[Fix]) -> MpiUser | None:
    """K1: a non-root profile's user, with its own sshd_config, unless the image has both."""
    ready = facts.user == profile.user and facts.get(f"file.{profile.sshd_config}") == "yes"
    if not profile.non_root or ready:
        return None
    user = MpiUser(profile.user, profile.uid, port, _user_session_env(facts))
    fixes.append(
        Fix(
            "K1 K4",
            f"user {user.name} (uid {user.uid}) with its own sshd_config (port {port}, the "
            f"mounted key as host key, SetEnv {' '.join(user.session_env) or 'nothing'})",
        )
    )
    return user


def _users(facts: ImageFacts, profile: Profile, fixes: list[Fix]) -> tuple[bool, str]:
    """Who adapt.sh runs as, and the image's USER at the end: root (R1), or a non-root
    profile's user (K1; root only while adapt.sh runs)."""
    original_user = facts.user
    if profile.non_root:
        switch_to_root = original_user not in ROOT_USERS and any(f.in_script for f in fixes)
        if original_user != profile.user:
            fixes.append(Fix("K1", f"USER {profile.user} (was {original_user or 'root'})", False))
        return switch_to_root, profile.user
    switch_to_root = original_user not in ROOT_USERS
    if switch_to_root:
        fixes.append(Fix("R1", f"USER root (was {original_user})", in_script=False))
    return switch_to_root, ""


def _run_as_root_env(facts: ImageFacts, profile: Profile, fixes: list[Fix]) -> bool:
    """R8: a profile that runs mpirun as root without --allow-run-as-root needs the ENV."""
    needed = (
        not profile.non_root
        and profile.run_as_root == "env"
        and not all(
            facts.env.get(name) == "1"
            for name in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
        )
    )
    if needed:
        fixes.append(Fix("R8", "ENV OMPI_ALLOW_RUN_AS_ROOT=1 ..._CONFIRM=1", in_script=False))
    return needed


def _env_remedies(
    facts: ImageFacts, profile: Profile, fixes: list[Fix]
) -> tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]:
    """Each failing ENV unit's remedy (imagekit/requirements), as ENV lines."""
    remedies = tuple(
        (unit.requirement, unit.title, tuple(unit.remedy(facts.env).items()))
        for unit in failing_env_units(facts, profile)
    )
    for requirement, _, values in remedies:
        settings = " ".join(f"{name}={value}" for name, value in values)
        fixes.append(Fix(requirement, f"ENV {settings}", in_script=False))
    return remedies


def _labels(
    image: str,
    facts: ImageFacts,
    profile: Profile,
    port: int,
    user: MpiUser | None,
    fixes: list[Fix],
) -> dict[str, str]:
    """Where the adapted image came from, and what `imagekit smoke` and the check read.
    SEC: host keys in layers pass only where the profile allows them or a label declares
    them; R4 needs them in the image, so adapt declares them: a visible choice."""
    declare_host_keys = (
        "host" not in profile.allow_keys_in_layers
        and facts.labels.get(f"{LABEL}.ssh.host-keys") != "build"
    )
    if declare_host_keys and not fixes:
        fixes.append(Fix("SEC", "label the image's host keys as declared", in_script=False))
    if not fixes:
        return {}
    labels = {
        f"{LABEL}.adapted-from": image,
        f"{LABEL}.adapted-from.id": facts.image_id,
        f"{LABEL}.adapted.profile": profile.name,
    }
    if declare_host_keys:
        labels[f"{LABEL}.ssh.host-keys"] = "build"
    if facts.labels.get(f"{LABEL}.ssh.port", "22") != str(port):
        labels[f"{LABEL}.ssh.port"] = str(port)  # where `imagekit smoke` finds the port
    if user is not None:
        labels[f"{LABEL}.ssh.user"] = user.name
    return labels


def _check_non_root_profile(profile: Profile) -> None:
    """adapt writes K1's layout: the user's home, keys and sshd_config where mpi-operator's
    non-root examples keep them (/home/USER, ~/.ssh, ~/.sshd_config), and a uid to give it."""
    if profile.uid is None:
        raise UsageError(f"--profile {profile.name}: give the user's uid (uid:) to create it")
    home = f"/home/{profile.user}"
    if profile.key_dir != f"{home}/.ssh" or profile.sshd_config != f"{home}/.sshd_config":
        raise UsageError(
            f"--profile {profile.name}: adapt writes the user's keys and sshd_config under "
            f"{home} (ssh_dir: {home}/.ssh, sshd_config: {home}/.sshd_config)"
        )


def _user_session_env(facts: ImageFacts) -> tuple[str, ...]:
    """The image's ENV names a non-root sshd's sessions get through SetEnv (K4); PATH always
    (an image may leave it to the engine's default, which ssh sessions do not get)."""
    found = {
        name
        for name in facts.env
        if name in SESSION_ENV_NAMES or name.startswith(SESSION_ENV_PREFIXES)
    }
    return tuple(sorted(found | {"PATH"}))


def _settings(facts: ImageFacts, source: str) -> dict[str, str]:
    """What probe.sh read of `sshd -T` (source "sshd") or `ssh -G` ("ssh"), by name."""
    prefix = f"{source}."
    return {k.removeprefix(prefix): v for k, v in facts.probed.items() if k.startswith(prefix)}


def failing_units(facts: ImageFacts, source: str, port: int) -> list[type[SettingsRequirement]]:
    """The setting units (imagekit/requirements) the image does not pass, judged by the same
    rule the check uses: adapt remedies each whose verdict is not "pass"."""
    units = SSHD if source == "sshd" else SSH_CLIENT
    settings = _settings(facts, source)
    return [unit for unit in units if not unit.judge(settings, port).passed]


def failing_env_units(facts: ImageFacts, profile: Profile) -> list[type[EnvRequirement]]:
    """The ENV units that apply under `profile` and fail on the image's ENV: the check's rule."""
    return [
        unit
        for unit in env_units()
        if unit.skip_reason(profile) is None and unit.judge(facts.env, profile).failed
    ]


def _sshd_wrong(facts: ImageFacts, port: int) -> bool:
    # UsePAM: pam_env is how root's ssh sessions get the image's environment (K4's remedy).
    usepam = _settings(facts, "sshd").get("usepam") in ("yes", "1")
    return bool(failing_units(facts, "sshd", port)) or not usepam


def _ssh_wrong(facts: ImageFacts, port: int) -> bool:
    return bool(failing_units(facts, "ssh", port))


def _session_env(facts: ImageFacts) -> tuple[str, ...]:
    """K4: the image's PATH and LD_LIBRARY_PATH, where an ssh session would not get them."""
    session_path = facts.get("environment.PATH") or ":".join(SSHD_ROOT_PATH)
    wanted = [
        facts.get(f"which.{command}")
        for command in ("orted", "prted", "mpirun", "python3")
        if facts.has(command)
    ]
    needed = []
    if any(os.path.dirname(path) not in session_path.split(":") for path in wanted):
        needed.append("PATH")
    library_path = facts.env.get("LD_LIBRARY_PATH", "")
    if library_path and facts.get("environment.LD_LIBRARY_PATH") != library_path:
        needed.append("LD_LIBRARY_PATH")
    return tuple(needed)


# PRRTE settings whose value in the image is replaced, not kept: the operators' hostfile must
# be the default whatever the image said (K3).
ENFORCED_PRTE = frozenset({"prte_default_hostfile"})


def _launch_defaults(facts: ImageFacts) -> tuple[McaFile, ...]:
    """imagekit's launch defaults the image's parameter files lack, as recipes' images have
    them (a value the image sets itself is kept). Open MPI 5 reads the runtime's (PRRTE's) from
    a file of its own, where the operators' hostfile must be the default whatever the image
    said: the operators set only OMPI_MCA_orte_default_hostfile, which Open MPI 5 ignores (K3)."""
    from imagekit.build.plan import mca_files
    from imagekit.recipe.model import DEFAULT_MCA

    etc = facts.get("mpi.sysconfdir")
    major = openmpi_major(facts.get("mpi.version"))
    if not etc or major is None or major < 4:
        return ()
    mpi_lines, prte_lines = mca_files(DEFAULT_MCA, major)
    files = []
    missing = tuple((k, v) for k, v, _ in mpi_lines if facts.get(f"mca.{k}") != "set")
    if missing:
        files.append(McaFile(f"{etc}/openmpi-mca-params.conf", missing))
    missing = tuple(
        (k, v)
        for k, v, _ in prte_lines
        if not facts.get(f"prte.{k}") or (k in ENFORCED_PRTE and facts.get(f"prte.{k}") != v)
    )
    if missing:
        replaced = tuple(k for k, _ in missing if k in ENFORCED_PRTE and facts.get(f"prte.{k}"))
        files.append(McaFile(f"{etc}/prte-mca-params.conf", missing, replaced, "K3 L4-L10"))
    return tuple(files)


def _hostfile_placeholder(files: tuple[McaFile, ...], facts: ImageFacts) -> str:
    """The operators' hostfile path when adapt makes PRRTE read it by default and the image
    has none: PRRTE fails on a missing default hostfile, so a plain `mpirun` in a container
    started outside an MPIJob (the check, a developer's shell) would fail."""
    made_default = any(
        (key, value) == ("prte_default_hostfile", OPERATOR_HOSTFILE)
        for mca in files
        for key, value in mca.settings
    )
    return OPERATOR_HOSTFILE if made_default and not facts.get(f"file.{OPERATOR_HOSTFILE}") else ""


def _describe_mca(mca: McaFile, facts: ImageFacts) -> str:
    def setting(key: str, value: str) -> str:
        was = facts.get(f"prte.{key}") if key in mca.replaced else ""
        return f"{key} {value}" + (f" (was {was})" if was else "")

    names = ", ".join(setting(k, v) for k, v in mca.settings)
    return f"{mca.runtime} launch defaults in {mca.path}: {names}"


def render_adapt(plan: AdaptPlan) -> Context:
    """Pure: the build context (Dockerfile and imagekit-adapt/ files) for `plan`."""
    env = template_environment(trim_blocks=True)
    values = {"plan": plan, "sshd_units": SSHD, "ssh_units": SSH_CLIENT}
    files = {"Dockerfile": env.get_template("adapt/Dockerfile.j2").render(values)}
    if plan.needs_script:
        files["imagekit-adapt/adapt.sh"] = env.get_template("adapt/adapt.sh.j2").render(values)
    if plan.packages:  # the build's own apt script: mirror credentials, CA, untrusted marker
        files["imagekit-adapt/apt-install.sh"] = _template_text("apt-install.sh")
    if plan.via_mirror:
        files["imagekit-adapt/apt-mirror.sh"] = _template_text("apt-mirror.sh")
    if plan.hostfile_placeholder:  # the same placeholder a recipe's Open MPI 5 image gets
        files["imagekit-adapt/hostfile-placeholder"] = _template_text("hostfile-placeholder")
    if plan.sshd_settings:
        files["imagekit-adapt/sshd_config.head"] = env.get_template(
            "adapt/sshd_config.head.j2"
        ).render(values)
    if plan.ssh_settings:
        files["imagekit-adapt/ssh_config.head"] = env.get_template(
            "adapt/ssh_config.head.j2"
        ).render(values)
    if plan.user is not None:  # the same sshd_config a recipe's non-root image gets
        files["imagekit-adapt/user-sshd_config"] = (
            template_environment().get_template("user-sshd_config.j2").render({"plan": plan.user})
        )
    return Context(files)


def _template_text(name: str) -> str:
    return resources.files("imagekit").joinpath(f"templates/{name}").read_text("utf-8")


def probe_script() -> str:
    return _template_text("adapt/probe.sh")


# -- the steps that talk to the engine -------------------------------------------------------


@dataclass(frozen=True)
class AdaptResult:
    plan: AdaptPlan
    tag: str | None = None  # None: nothing needed, nothing built
    added_bytes: int = 0
    seconds: float = 0.0


def read_facts(engine, image: str, inspected: dict) -> ImageFacts:
    """probe.sh's answer in a throwaway container of `image` (`inspected`: its inspect)."""
    try:
        output = engine.run_once(
            image,
            ["/bin/sh", "-c", probe_script()],
            user="0",
            labels={ADAPT_LABEL: f"imagekit-adapt-{os.getpid()}"},
        )
    except (EngineError, ImageUnusableError):  # the engine's trouble; no /bin/sh at all
        raise
    except ImagekitError as exc:  # the probe itself failed in the image
        raise UsageError(
            f"{image}: cannot read the image (adapt needs /bin/sh in it): {exc.message}"
        ) from None
    facts = parse_probe(output, inspected)
    if facts.get("probe") != "done":
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise UsageError(f"{image}: the probe did not finish: {tail[-200:]}")
    return facts


def default_tag(image: str, profile: str) -> str:
    """IMAGE's name with `-PROFILE` after its tag: a digest (name@sha256:...) is not a tag, so
    its first 12 hex digits stand in for one; a registry's port is not a tag either."""
    ref = parse_ref(image)
    tag = ref.tag or (ref.digest or "").removeprefix("sha256:")[:12] or "latest"
    return f"{ref.name}:{tag}-{profile}"


def adapt(
    image: str,
    profile: Profile,
    report,
    *,
    tag: str | None = None,
    output: Path | None = None,
    port: int | None = None,
    install_mpi: bool = False,
    apt_mirror: str | None = None,
    ca_bundle: Path | None = None,
) -> AdaptResult:
    from imagekit.build.aptauth import build_through_mirror
    from imagekit.build.builder import BuildInputs, check_inputs, check_tag_flag
    from imagekit.engine.client import Engine
    from imagekit.events import Message

    if tag is not None:
        check_tag_flag(tag)
    check_inputs(BuildInputs(apt_mirror=apt_mirror, ca_bundle=ca_bundle))
    engine = Engine.connect()
    before = engine.inspect_image(image)
    facts = read_facts(engine, image, before)
    plan = plan_adapt(
        image, facts, profile, port=port, install_mpi=install_mpi, apt_mirror=bool(apt_mirror)
    )
    if not plan.needed:
        return AdaptResult(plan)
    if apt_mirror and not plan.via_mirror:
        report(Message("--apt-mirror: nothing to install, so apt is not run"))
    report(Message(f"{image} under profile {profile.name}: {len(plan.fixes)} to add"))
    for fix in plan.fixes:
        report(Message(f"  {fix.requirement:<10} {fix.what}"))
    context = render_adapt(plan)
    if output is not None:  # to review, commit or build elsewhere
        write_context(context, output)
        report(Message(f"wrote the build context to {output}/"))
    started = time.monotonic()
    workdir = workdirs.make("adapt")
    try:
        context_dir = write_context(context, workdir / "context")
        mirror = apt_mirror if plan.via_mirror else None  # nothing to install: no apt at all
        outcome = build_through_mirror(engine, context_dir, report, mirror, ca_bundle)
    finally:
        workdirs.remove(workdir)
    tag = tag or default_tag(image, profile.name)
    engine.tag(outcome.image_id, tag)  # only after the build succeeded
    after = engine.inspect_image(outcome.image_id)
    added = int(after.get("Size", 0)) - int(before.get("Size", 0))
    return AdaptResult(plan, tag, added, time.monotonic() - started)
