"""Load and validate recipes: YAML in, a frozen, validated `Recipe` out.

Every problem becomes one line naming the file and the field path
(``recipes/x.yaml: torch.version: ...``). Nothing here touches Docker or the disk
beyond reading the recipe files themselves.
"""

from __future__ import annotations

import difflib
import re
import string
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from imagekit import grammar
from imagekit.platforms import DEFAULT_PLATFORM, PLATFORMS, Platform
from imagekit.requirements.fabric import fabric_off

# ---------------------------------------------------------------------------
# Value types


def _dotted(parts: int):
    """A numeric version with 2..`parts` components, like 12.2 or 12.2.2."""
    pattern = re.compile(r"\d+(\.\d+){1,%d}" % (parts - 1))  # noqa: UP031

    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"{value!r} is not a version like {'.'.join(['12'] * parts)}")
        return value

    return check


def _python_minor(value: str) -> str:
    if not re.fullmatch(r"3\.\d{1,2}", value):
        raise ValueError(f"{value!r} is not a Python minor version like 3.11")
    return value


PipVersion = Annotated[str, AfterValidator(grammar.check_pep440)]
CudaVersion = Annotated[str, AfterValidator(_dotted(3))]
PythonVersion = Annotated[str, AfterValidator(_python_minor)]
Sha256 = Annotated[str, AfterValidator(grammar.check_sha256)]
HttpUrl = Annotated[str, AfterValidator(grammar.check_http_url)]
ImageRef = Annotated[str, AfterValidator(grammar.check_image_ref)]
AptPackage = Annotated[str, AfterValidator(grammar.check_apt_package)]
PipRequirement = Annotated[str, AfterValidator(grammar.check_requirement)]
EnvName = Annotated[str, AfterValidator(grammar.check_env_name)]
OpName = Annotated[str, AfterValidator(grammar.check_op_name)]
Tag = Annotated[str, AfterValidator(grammar.check_tag)]
McaKey = Annotated[str, AfterValidator(grammar.check_mca_key)]
# Scalars in YAML (ports, "1", on/off) are written as strings into config files.
McaValue = Annotated[str | int, AfterValidator(lambda v: grammar.check_mca_value(str(v)))]
EnvValue = Annotated[str | int, AfterValidator(lambda v: grammar.check_text(str(v)))]
Description = Annotated[str, AfterValidator(lambda v: grammar.check_text(v, newline_ok=True))]


class Model(BaseModel):
    """Strict base: unknown keys are errors (with 'did you mean'), models are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------------
# Sections


class Bootstrap(Model):
    """A Debian base made locally with mmdebstrap: no registry needed, reproducible."""

    suite: Literal["bookworm", "trixie"] = Field(description="Debian suite to bootstrap")
    mirror: HttpUrl = Field("http://deb.debian.org/debian", description="Debian mirror URL")
    epoch: int = Field(
        1700000000,
        ge=0,
        le=grammar.MAX_EPOCH,
        description="SOURCE_DATE_EPOCH for a byte-identical base",
    )
    components: tuple[Literal["main", "contrib", "non-free", "non-free-firmware"], ...] = Field(
        ("main",),
        description="Archive components of the base's apt sources (contrib and non-free: "
        "Debian's CUDA toolkit, for cuda.source: wheels)",
    )

    @field_validator("components")
    @classmethod
    def _main_first(cls, components: tuple[str, ...]) -> tuple[str, ...]:
        if not components or components[0] != "main":
            raise ValueError("must start with main")
        if len(set(components)) != len(components):
            raise ValueError("lists a component twice")
        return components


class Base(Model):
    """Exactly one of `image` (a registry reference) or `bootstrap` (a local Debian)."""

    image: ImageRef | None = Field(None, description="Base image reference, e.g. nvidia/cuda:...")
    bootstrap: Bootstrap | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Base:
        if (self.image is None) == (self.bootstrap is None):
            raise ValueError("set exactly one of base.image or base.bootstrap")
        return self


class Distro(Model):
    name: Literal["debian", "ubuntu"]
    version: str = Field(
        description='Release number as in tags: "12", "22.04"',
        pattern=r"^[0-9]{1,4}(\.[0-9]{1,4})?$",
    )


class Cuda(Model):
    version: CudaVersion = Field(
        description="CUDA version: the base's toolkit (12.2.2), or the torch wheels' (12.4)"
    )
    source: Literal["base", "wheels"] = Field(
        "base",
        description="base: the base image carries CUDA (nvidia/cuda); wheels: no CUDA base, the "
        "runtime comes from the torch wheel's nvidia-* dependencies (PyPI) and nvcc, for the "
        "prebuilt DeepSpeed ops only, from Debian's non-free nvidia-cuda-toolkit in a builder "
        "stage",
    )


class Python(Model):
    version: PythonVersion
    source: Literal["distro", "deadsnakes"] = Field(
        "distro", description="distro: the distro's python3; deadsnakes: Ubuntu PPA"
    )


class OpenMPI(Model):
    version: CudaVersion = Field(description="Open MPI version, e.g. 4.1.4")
    source: Literal["distro", "tarball"] = "distro"
    url: HttpUrl | None = Field(None, description="Source tarball URL (source: tarball)")
    sha256: Sha256 | None = None

    @model_validator(mode="after")
    def _tarball_needs_url_and_hash(self) -> OpenMPI:
        if self.source == "tarball" and (self.url is None or self.sha256 is None):
            raise ValueError("source: tarball needs both url and sha256")
        if self.source == "distro" and (self.url or self.sha256):
            raise ValueError("url and sha256 are only for source: tarball")
        return self


class Nccl(Model):
    version: Literal["from-torch"] | CudaVersion = Field(
        "from-torch",
        description="from-torch: use the NCCL the PyTorch wheel loads; or an apt version",
    )


class Torch(Model):
    version: PipVersion
    variant: str = Field(
        description="Wheel build tag: cpu, or the CUDA tag such as cu121",
        pattern=r"^(cpu|cu\d{3,4})$",
    )
    index_url: HttpUrl | None = Field(None, description="PyTorch wheel index (e.g. .../whl/cu121)")
    source: Literal["pip", "distro"] = Field(
        "pip",
        description="pip: PyTorch's wheel; distro: the distro's python3-torch (Debian 13: "
        "2.6.0, CPU), for Pythons no CPU wheel is reachable for",
    )

    @model_validator(mode="after")
    def _distro_torch_is_cpu(self) -> Torch:
        if self.source == "distro" and self.variant != "cpu":
            raise ValueError("source: distro is the distro's CPU build: use variant: cpu")
        if self.source == "distro" and self.index_url:
            raise ValueError("index_url is only for source: pip")
        return self


class DeepSpeed(Model):
    version: PipVersion
    prebuild_ops: tuple[OpName, ...] = Field(
        (),
        max_length=64,
        description="DeepSpeed op builders compiled at build time so ranks do not JIT on start",
    )
    cuda_arch_list: str = Field(
        "7.0;8.0;8.6;9.0",
        pattern=r"^\d+\.\d+(\+PTX)?(;\d+\.\d+(\+PTX)?)*$",
        description="TORCH_CUDA_ARCH_LIST for ops compiled at build time (no GPU is needed)",
    )


class Packages(Model):
    apt: tuple[AptPackage, ...] = Field((), max_length=grammar.MAX_ITEMS)
    pip: tuple[PipRequirement, ...] = Field((), max_length=grammar.MAX_ITEMS)


class Ssh(Model):
    port: int = Field(22, ge=1, le=65535)
    user_keys: Literal["mounted", "image"] = Field(
        "mounted",
        description=(
            "mounted: the operator mounts keys at /root/.ssh; image: a key pair is baked into"
            " the image (anyone with the image can log in to its containers)"
        ),
    )
    host_keys: Literal["build", "start"] = Field(
        "build",
        description="build: generated in the image (works with any start command); "
        "start: generated by the entrypoint (needs the entrypoint to run)",
    )
    user: str = Field(
        "root",
        pattern=r"^[a-z_][a-z0-9_-]{0,31}$",
        description="root (the seed: R1), or the MPI user an operator runs workers as (K1: "
        "mpiuser): created with its own ~/.sshd_config (the mounted key as host key, `port`), "
        "the image's USER; root's sshd stays on 22",
    )
    uid: int = Field(1000, ge=1, le=65533, description="the MPI user's uid (runAsUser)")


# rdma-core's verbs providers (Debian's ibverbs-providers registers each in /etc/libibverbs.d).
VerbsProvider = Literal[
    "bnxt_re", "cxgb4", "efa", "erdma", "hfi1verbs", "hns", "ipathverbs", "irdma", "mana",
    "mlx4", "mlx5", "mthca", "ocrdma", "qedr", "rxe", "siw", "vmw_pvrdma",
]  # fmt: skip


class Network(Model):
    """F1-F4: the cluster fabric the image is made for."""

    fabric: Literal["tcp", "rdma"] = Field(
        "tcp",
        description="tcp: the seed's TCP clusters (Open MPI's ob1 PML, NCCL over sockets); "
        "rdma: InfiniBand or RoCE (rdma-core's verbs for NCCL's IB transport, UCX for Open "
        "MPI), no setting that turns it off",
    )
    providers: tuple[VerbsProvider, ...] = Field(
        (),
        max_length=32,
        description="verbs providers the image must register (rdma: mlx5 for Mellanox "
        "InfiniBand and RoCE, efa, rxe for soft-RoCE, ...)",
    )
    ucx: bool = Field(False, description="rdma: Open MPI's UCX PML and UCX's tools")

    @model_validator(mode="after")
    def _rdma_parts_need_rdma(self) -> Network:
        if self.fabric == "tcp" and (self.providers or self.ucx):
            raise ValueError("providers and ucx need fabric: rdma")
        if self.fabric == "rdma" and not self.providers:
            raise ValueError("fabric: rdma needs providers, e.g. [mlx5]")
        return self


DEFAULT_MCA: dict[str, str] = {
    "pml": "ob1",
    "btl": "^openib",
    "btl_tcp_if_exclude": "lo,docker0",
    "oob_tcp_if_exclude": "lo,docker0",
    "plm_rsh_no_tree_spawn": "1",
}


class Mpi(Model):
    allow_run_as_root: bool = True
    mca: dict[McaKey, McaValue] = Field(
        default_factory=lambda: dict(DEFAULT_MCA),
        max_length=grammar.MAX_ITEMS,
        description="Written to openmpi-mca-params.conf (L4-L10)",
    )


TAG_FIELDS = ("release", "accel", "py", "cuda", "os")


class Image(Model):
    name: str = Field(pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")
    release: str = Field(
        description='Release string at the front of the tag, e.g. "23.08"',
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$",
    )
    tag: str = Field(
        "{release}-{accel}-{py}-{cuda}-{os}",
        max_length=128,
        description="Tag template; fields: " + ", ".join(TAG_FIELDS),
    )
    moving_tags: tuple[Tag, ...] = Field(
        (), max_length=64, description="Extra tags moved on publish"
    )

    @field_validator("tag")
    @classmethod
    def _known_tag_fields(cls, tag: str) -> str:
        try:
            parts = list(string.Formatter().parse(tag))
        except ValueError as exc:  # an unmatched brace
            raise ValueError(f"not a tag template: {exc}") from None
        for literal, name, spec, conversion in parts:
            if not re.fullmatch(r"[A-Za-z0-9_.-]*", literal):
                raise ValueError(
                    f"{literal!r}: a tag template's text is letters, digits, '_', '.', '-'"
                )
            if name is None:
                continue
            if name not in TAG_FIELDS:
                near = difflib.get_close_matches(name, TAG_FIELDS, n=1, cutoff=0.5)
                hint = f" (did you mean {{{near[0]}}}?)" if near else ""
                raise ValueError(f"unknown tag field {{{name}}}{hint}")
            if spec or conversion:
                # `{release:>999999999}` would allocate gigabytes: fields are plain.
                raise ValueError(f"tag field {{{name}}} takes no format spec or conversion")
        return tag


class Recipe(Model):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    description: Description = ""
    base: Base
    distro: Distro
    cuda: Cuda | None = None
    python: Python
    openmpi: OpenMPI
    nccl: Nccl = Nccl()
    torch: Torch
    deepspeed: DeepSpeed
    packages: Packages = Packages()
    env: dict[EnvName, EnvValue] = Field({}, max_length=grammar.MAX_ITEMS)
    env_not_secret: tuple[EnvName, ...] = Field(
        (), description="env names that sound secret but are not (e.g. TOKENIZERS_PARALLELISM)"
    )
    ssh: Ssh = Ssh()
    mpi: Mpi = Mpi()
    network: Network = Network()
    platforms: tuple[Platform, ...] = Field(
        (DEFAULT_PLATFORM,),
        max_length=len(PLATFORMS),
        description="Platforms the recipe builds for (A1); the first is the default of "
        "--platform. linux/arm64 needs base.bootstrap and runs under emulation elsewhere",
    )
    image: Image

    @model_validator(mode="after")
    def _foreign_platforms_bootstrap_their_base(self) -> Recipe:
        if not self.platforms:
            raise ValueError("platforms: lists none (leave it out for linux/amd64)")
        if len(set(self.platforms)) != len(self.platforms):
            raise ValueError("platforms: lists a platform twice")
        others = [p for p in self.platforms if p != DEFAULT_PLATFORM]
        if others and self.base.bootstrap is None:
            raise ValueError(
                f"platforms: {others[0]} needs base.bootstrap (a registry base would be "
                "pulled for the engine's own platform, and these bases are made locally)"
            )
        return self

    @model_validator(mode="after")
    def _rdma_keeps_the_ucx_pml_selectable(self) -> Recipe:
        pml = self.mpi.mca.get("pml")
        if self.network.fabric == "rdma" and "mca" in self.mpi.model_fields_set and pml:
            if fabric_off({"OMPI_MCA_pml": str(pml)}):  # F4's own rule, as the check applies it
                raise ValueError(
                    f"mpi.mca.pml: {pml} keeps Open MPI off the RDMA fabric (F4); leave pml "
                    "unset (Open MPI picks ucx where RDMA is, ob1 elsewhere) or name ucx"
                )
        return self

    @model_validator(mode="after")
    def _distro_torch_needs_distro_python(self) -> Recipe:
        if self.torch.source == "distro" and self.python.source != "distro":
            raise ValueError("torch.source: distro needs python.source: distro")
        return self

    @model_validator(mode="after")
    def _cuda_wheels_needs_pip_torch_on_a_bootstrap(self) -> Recipe:
        if self.cuda is None or self.cuda.source != "wheels":
            return self
        if self.torch.source != "pip" or self.torch.variant == "cpu":
            raise ValueError("cuda.source: wheels needs torch.source: pip with a CUDA variant")
        if self.base.bootstrap is None:
            raise ValueError("cuda.source: wheels needs base.bootstrap (Debian's CUDA toolkit)")
        missing = [c for c in ("contrib", "non-free") if c not in self.base.bootstrap.components]
        if missing:
            raise ValueError(
                f"cuda.source: wheels needs {' and '.join(missing)} in base.bootstrap.components"
                " (Debian's nvidia-cuda-toolkit is in non-free, some of its dependencies in"
                " contrib)"
            )
        return self


# ---------------------------------------------------------------------------
# Loading


class LoadedRecipe(BaseModel):
    """A validated recipe plus where it came from (for messages, labels and hashes)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    recipe: Recipe
    path: Path
    sha256: str  # hash of the merged, validated recipe (stable across key order)
    sources: tuple[Path, ...] = ()  # every file read: the recipe, then its `extends` chain


def tag_fields(template: str) -> list[str]:
    """The {placeholders} of a tag template, in order."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def json_schema() -> dict[str, Any]:
    """JSON Schema of a recipe, for editors (`imagekit schema`)."""
    schema = Recipe.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "imagekit recipe"
    schema["properties"]["extends"] = {
        "type": "string",
        "description": "Path of a recipe this one extends (relative to this file)",
    }
    return schema
