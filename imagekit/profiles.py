"""Profiles are data (data/profiles.yaml, or a user's YAML file), validated here."""

from __future__ import annotations

import difflib
import re
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from imagekit import schema_errors
from imagekit.datafiles import UserYamlError, data_yaml, read_user_yaml
from imagekit.errors import UsageError


class Probe(BaseModel):
    """A check written as data (container-canary's idea): run a command in the image's check
    container and match its exit code and output, or require a listening TCP port once sshd
    runs. Reported like the built-in checks: ID, requirement, evidence, fix."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    requirement: str = Field("profile", description="Requirement ID the probe proves")
    title: str
    fix: str = ""
    exec: str | None = Field(None, description="Shell command, run as root in the container")
    exit_code: int = Field(0, description="exec: the exit code it must end with")
    output: str | None = Field(None, description="exec: a regular expression its output matches")
    tcp: int | None = Field(None, ge=1, le=65535, description="A port listening once sshd runs")

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Probe:
        if (self.exec is None) == (self.tcp is None):
            raise ValueError("give exactly one of exec or tcp")
        if self.output is not None:
            try:
                re.compile(self.output)
            except re.error as exc:
                raise ValueError(f"output: not a regular expression: {exc}") from None
        return self


def _absolute_path(value: str) -> str:
    """A path a profile names inside the image (it reaches manifests and the check's commands):
    absolute, plain characters, no `.` or `..` component."""
    parts = value.split("/")
    if (
        len(value) > 255
        or not re.fullmatch(r"/[A-Za-z0-9._+~/-]*", value)
        or any(part in (".", "..") for part in parts)
    ):
        raise ValueError(f"{value[:60]!r} is not an absolute path of plain names")
    return value


AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]
FileName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,127}$")]


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # The name reaches tags (`adapt`'s IMAGE:TAG-PROFILE), labels and report titles.
    name: str = Field("", pattern=r"^([A-Za-z0-9][A-Za-z0-9._-]{0,63})?$")
    description: str = Field("", max_length=4096)
    port: int = Field(22, ge=1, le=65535)
    user_keys: tuple[Literal["image", "mounted"], ...] = ("image", "mounted")
    run_as_root: Literal["flag", "env"] = "flag"
    allow_keys_in_layers: tuple[Literal["host", "user"], ...] = ()
    # Env and build-arg names that sound secret but are not (credentials-in-config).
    env_not_secret: tuple[
        Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")], ...
    ] = ()
    probes: tuple[Probe, ...] = ()
    # K1: who runs sshd and mpirun, where the operator mounts the keys, which sshd_config
    # it starts sshd with (`sshd -De -f FILE`). Root and /etc/ssh for the seed.
    user: str = Field("root", pattern=r"^[a-z_][a-z0-9_-]*$")
    ssh_dir: AbsolutePath | None = Field(None, description="default: ~USER/.ssh")
    sshd_config: AbsolutePath = "/etc/ssh/sshd_config"
    uid: int | None = Field(None, ge=1, description="the user's uid, for manifests (runAsUser)")
    # How the operator's Secret reaches a non-root user: its own files (mpi-operator), or
    # root's files at mode 0640 read through the group (fsGroup: Trainer v2, K2).
    secret_files: Literal["owned", "group-readable"] = "owned"
    # F1: the cluster's fabric. "rdma": NCCL and Open MPI must be able to use InfiniBand or
    # RoCE, so an image setting that turns it off fails (F4); "tcp": the seed's sample lines.
    fabric: Literal["tcp", "rdma"] = "tcp"
    key_type: Literal["rsa", "ecdsa"] = "rsa"  # K2: an ECDSA P-521 key stored as id_rsa
    # The driver's libraries, which the NVIDIA container runtime mounts into GPU containers:
    # an image must not ship them, so native-libraries allows exactly these to be missing.
    driver_libraries: tuple[FileName, ...] = (
        "libcuda.so.1",
        "libnvidia-ml.so.1",
        "libnvidia-ptxjitcompiler.so.1",
        "libnvidia-nvvm.so.4",
        "libcudadebugger.so.1",
        "libnvidia-cfg.so.1",
    )

    @property
    def non_root(self) -> bool:
        return self.user != "root"

    @property
    def key_dir(self) -> str:
        if self.ssh_dir:
            return self.ssh_dir
        return "/root/.ssh" if not self.non_root else f"/home/{self.user}/.ssh"

    @model_validator(mode="after")
    def _unique_probe_ids(self) -> Profile:
        ids = [probe.id for probe in self.probes]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"probe IDs must be unique: {', '.join(twice)}")
        return self


@cache
def builtin_profiles() -> dict[str, Profile]:
    return {name: Profile(name=name, **body) for name, body in data_yaml("profiles.yaml").items()}


def load_profile(name_or_path: str) -> Profile:
    profiles = builtin_profiles()
    if name_or_path in profiles:
        return profiles[name_or_path]
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        near = difflib.get_close_matches(name_or_path, list(profiles), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UsageError(
            f"--profile {name_or_path}: no such profile{hint}; "
            f"built in: {', '.join(profiles)}, or a .yaml file"
        )
    try:
        data = read_user_yaml(path)
    except UserYamlError as exc:
        raise UsageError(f"--profile {path}: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict) or not all(isinstance(key, str) for key in data):
        raise UsageError(
            f"--profile {path}: a profile file is a mapping of names to values, "
            f"got {type(data).__name__}"
        )
    try:
        return Profile(name=data.pop("name", path.stem), **data)
    except ValidationError as exc:
        problems = schema_errors.problems(exc, Profile)
        raise UsageError(f"--profile {path}: {schema_errors.one_line(problems)}") from None
