"""Recipe -> Plan: every decision about the image, made once, as data. Pure: no I/O.

Templates only lay out what the plan says; tests assert on plans without rendering.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.version import Version

from imagekit.errors import RecipeError
from imagekit.labels import (
    FABRIC_LABEL,
    FABRIC_PROVIDERS_LABEL,
    FABRIC_UCX_LABEL,
    LABEL_PREFIX,
    PLATFORM_LABEL,
)
from imagekit.ompi import OMPI5_MCA_RENAMES, OPERATOR_HOSTFILE
from imagekit.platforms import DEFAULT_PLATFORM, architecture, tag_suffix
from imagekit.recipe.compat import rules_data
from imagekit.recipe.model import LoadedRecipe, Recipe

# Packages every image needs for R2-R11, by requirement.
SYSTEM_PACKAGES = (
    "bash",  # R11: mpirun ... bash run.sh
    "ca-certificates",
    "openssh-server",  # R3, R4, R10
    "openssh-client",  # R3, R9: mpirun's rsh agent is ssh
    "iproute2",  # R10: `ss -lntp` is the seed's own sshd check
    "procps",
    "g++",  # DeepSpeed ops and mpi4py compile against the image's toolchain
    "make",
)
OPENMPI_DISTRO_PACKAGES = ("openmpi-bin", "libopenmpi-dev")
# network.fabric: rdma (F2): verbs and its providers for NCCL's IB transport (NCCL dlopens
# libibverbs at init), rdma-cm, and the tools a user debugs a fabric with. Debian's Open MPI
# pulls some of them by accident of packaging; a recipe that needs them says so.
FABRIC_PACKAGES = ("libibverbs1", "ibverbs-providers", "librdmacm1", "ibverbs-utils")
UCX_PACKAGES = ("libucx0", "ucx-utils")  # Open MPI's UCX PML, ucx_info
OPENMPI_BUILD_PACKAGES = ("curl", "bzip2", "file", "perl")
# An rdma recipe's Open MPI from source: configure finds verbs and UCX through their headers
# (builder stage only); the runtime libraries go into the stage that receives Open MPI.
OPENMPI_FABRIC_BUILD_PACKAGES = ("libibverbs-dev", "librdmacm-dev")
OPENMPI_UCX_BUILD_PACKAGES = ("libucx-dev",)
# cuda.source: wheels -- nvcc for DeepSpeed's prebuilt ops, in the deepspeed builder stage only
# (Debian non-free; CUDA_HOME is /usr). setuptools: DeepSpeed's setup.py must see the
# installed torch to compile ops, so its sdist builds without isolation.
CUDA_TOOLKIT_PACKAGES = ("nvidia-cuda-toolkit", "python3-setuptools")
CUDA_TOOLKIT_HOME = "/usr"
OPENMPI_TARBALL_PREFIX = "/opt/openmpi"
TORCH_EXTENSIONS_DIR = "/opt/imagekit/torch-extensions"
BUILD_DIR = "/tmp/imagekit-build"  # only ever exists in builder stages
STAGE_ROOT = "/stage"  # pip --root of builder stages, copied into the final image


# Why each default MCA parameter is there, cited by requirement ID in the rendered file.
MCA_WHY = {
    "pml": "L4: ob1 is stable on Kubernetes networks; ucx is not",
    "btl": "L5: openib errors out without InfiniBand",
    "btl_tcp_if_exclude": "L6: never route MPI traffic over loopback or docker0",
    "oob_tcp_if_exclude": "L6: same for Open MPI's out-of-band channel",
    "btl_tcp_if_include": "L6: pin MPI traffic to the pod interface",
    "oob_tcp_if_include": "L6: pin out-of-band traffic to the pod interface",
    "plm_rsh_no_tree_spawn": "L10: launch every worker from the launcher; more stable in K8s",
    "orte_abort_on_non_zero_status": "L10: one failing rank ends the job",
    "plm_ssh_no_tree_spawn": "L10: launch every worker from the launcher; more stable in K8s",
    "prte_default_hostfile": (
        "K3: Open MPI 5 ignores the operators' OMPI_MCA_orte_default_hostfile; without this"
        " every rank runs on the launcher and the job still exits 0"
    ),
    "prte_keep_fqdn_hostnames": (
        "K3: the operators' hostfiles name workers by FQDN (Open MPI 5 ignores"
        " OMPI_MCA_orte_keep_fqdn_hostnames)"
    ),
}

# Open MPI 5 runs jobs with PRRTE, which reads its own parameter file and names: ORTE's
# names from the defaults (and from Open MPI 4 habits) map onto these.
# Frameworks of the runtime (PRRTE) rather than the MPI library, by parameter prefix.
PRTE_PREFIXES = ("plm_", "oob_", "prte_", "ras_", "rmaps_", "odls_", "errmgr_", "state_")
# Open MPI 5 images read the operators' hostfile by default, so a launch without --hostfile
# still reaches the workers (K3).
OPENMPI5_DEFAULT_PRTE = {
    "prte_default_hostfile": OPERATOR_HOSTFILE,
    "prte_keep_fqdn_hostnames": "1",
}


@dataclass(frozen=True)
class BootstrapSpec:
    suite: str
    mirror: str
    epoch: int
    variant: str = "apt"
    include: tuple[str, ...] = ("ca-certificates",)
    components: tuple[str, ...] = ("main",)
    architecture: str = "amd64"  # A1: Debian's name, which is also the image config's

    def as_dict(self) -> dict[str, object]:
        """The spec as recorded in locks and hashed into the base's name. Fields at their
        default are left out, so bases and locks made before a field existed stay valid."""
        spec = dict(self.__dict__)
        if self.components == ("main",):
            del spec["components"]
        if self.architecture == "amd64":
            del spec["architecture"]
        return spec

    @property
    def digest(self) -> str:
        blob = json.dumps(self.as_dict(), sort_keys=True, default=list).encode()
        return hashlib.sha256(blob).hexdigest()

    @property
    def image_ref(self) -> str:
        return f"imagekit-base:{self.suite}-{self.digest[:12]}"


@dataclass(frozen=True)
class PipStep:
    """One builder stage: pip installs `requirements` into /stage, copied into the image."""

    stage: str
    requirements: tuple[str, ...]
    needs: tuple[str, ...] = ()  # earlier stages whose /stage must be visible to pip


@dataclass(frozen=True)
class AptStage:
    """One `apt-get install` of the Dockerfile: its packages and the stage it builds on."""

    name: str
    packages: tuple[str, ...]
    after: str | None  # the stage whose packages are already installed underneath


@dataclass(frozen=True)
class Plan:
    name: str
    recipe_sha256: str
    base_image: str
    bootstrap: BootstrapSpec | None
    distro: str
    accel: str
    tags: tuple[str, ...]
    moving_tags: tuple[str, ...]
    expected: dict[str, str]
    labels: dict[str, str]
    system_packages: tuple[str, ...]
    python_packages: tuple[str, ...]
    python_ppa: str | None
    openmpi_packages: tuple[str, ...]
    openmpi_tarball: dict[str, str] | None
    pip_steps: tuple[PipStep, ...]
    torch_index_url: str | None
    prebuild_ops: tuple[str, ...]
    ds_accelerator: str
    cuda_arch_list: str
    apt_extras: tuple[str, ...]
    base_env: dict[str, str]
    user_env: dict[str, str]
    mca: tuple[tuple[str, str, str], ...]  # (key, value, why)
    mca_conf_path: str
    ssh_port: int  # the sshd workers run: root's, or the MPI user's (ssh_user)
    user_keys: str
    host_keys: str
    allow_run_as_root: bool
    path_prefix: tuple[str, ...] = field(default=())
    # K1: a non-root MPI user with its own sshd on ssh_port; root's keeps root_ssh_port.
    ssh_user: str = "root"
    ssh_uid: int = 0
    openmpi_major: int = 4
    # Open MPI 5: PRRTE's own parameters and file (the launch side: plm, oob, prte, ...).
    prte_mca: tuple[tuple[str, str, str], ...] = ()
    prte_conf_path: str | None = None
    # torch from the distro: pip stages install on top of Debian's packages, shadowing (never
    # uninstalling) the ones they need newer, and never replacing the distro's torch.
    pip_over_distro: bool = False
    # apt stage -> `apt-get install` arguments: names, or exact `name=version` when locked.
    apt_installs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # pip stage -> requirements file (`name==version --hash=sha256:...`), when locked.
    pip_locks: dict[str, str] = field(default_factory=dict)
    locked: bool = False
    # cuda.source: wheels: DeepSpeed's CUDA ops compiled when pip builds DeepSpeed (DS_BUILD_*),
    # as installed ops that import without nvcc, instead of a JIT load at build time.
    cuda_source: str | None = None
    fabric: str = "tcp"  # network.fabric (F1): tcp | rdma
    # rdma: one apt stage and Open MPI's RDMA defaults in the final image, over the layers the
    # recipe's TCP image has (an rdma variant shares them all: one layer more).
    fabric_packages: tuple[str, ...] = ()
    fabric_mca: tuple[tuple[str, str, str], ...] = ()
    ds_build_env: dict[str, str] = field(default_factory=dict)
    platform: str = DEFAULT_PLATFORM  # A1: one of the recipe's platforms

    @property
    def cuda_toolkit_stage(self) -> bool:
        """nvcc from the distro, in a builder stage: only to compile ops at build time."""
        return self.cuda_source == "wheels" and bool(self.ds_build_env)

    @property
    def image(self) -> str:
        return self.tags[0]

    @property
    def root_ssh_port(self) -> int:
        """root's sshd and ssh client: the recipe's port, or 22 when an MPI user (K1) has
        its own sshd on that port (root's stays for an operator that runs pods as root)."""
        return self.ssh_port if self.ssh_user == "root" else 22

    @property
    def apt_stages(self) -> tuple[AptStage, ...]:
        """The apt installs of the rendered Dockerfile, in build order."""
        stages = [AptStage("system", self.system_packages, None)]
        below = "system"
        if self.openmpi_tarball:
            stages.append(AptStage("openmpi-build", self.openmpi_build_packages, "system"))
            if self.fabric_stage == "openmpi":
                stages.append(AptStage("openmpi", self.fabric_packages, below))
                below = "openmpi"
        elif self.openmpi_packages:
            stages.append(AptStage("openmpi", self.openmpi_packages, below))
            below = "openmpi"
        stages.append(AptStage("python", self.python_packages, below))
        if self.cuda_toolkit_stage:
            stages.append(AptStage("cuda-toolkit", CUDA_TOOLKIT_PACKAGES, "python"))
        if self.apt_extras:
            stages.append(AptStage("image", self.apt_extras, "python"))
        if self.fabric_stage == "fabric":
            below = "image" if self.apt_extras else "python"
            stages.append(AptStage("fabric", self.fabric_packages, below))
        return tuple(stages)

    @property
    def fabric_stage(self) -> str | None:
        """Where an rdma recipe's fabric packages are installed: a last layer ("fabric") over
        the TCP image's, which it shares; or, for Open MPI built from source, the stage that
        receives it ("openmpi"): that build links UCX and verbs, so every later stage (mpi4py
        links against libmpi in a pip stage) needs their runtime libraries."""
        if not self.fabric_packages:
            return None
        return "openmpi" if self.openmpi_tarball else "fabric"

    @property
    def openmpi_build_packages(self) -> tuple[str, ...]:
        if self.fabric != "rdma":
            return OPENMPI_BUILD_PACKAGES
        ucx = OPENMPI_UCX_BUILD_PACKAGES if "libucx0" in self.fabric_packages else ()
        return OPENMPI_BUILD_PACKAGES + OPENMPI_FABRIC_BUILD_PACKAGES + ucx

    def apt_install(self, stage: str) -> tuple[str, ...]:
        """The arguments of one stage's apt install, for the template."""
        packages = self.apt_installs.get(stage)
        if packages is None:
            packages = next(s.packages for s in self.apt_stages if s.name == stage)
        return packages


def make_plan(loaded: LoadedRecipe, platform: str | None = None) -> Plan:
    """The recipe's plan for `platform` (default: the first of the recipe's platforms)."""
    r = loaded.recipe
    platform = platform or r.platforms[0]
    if platform not in r.platforms:
        raise RecipeError(
            [f"{loaded.path}: platforms: {', '.join(r.platforms)}; not {platform} (--platform)"]
        )
    accel = "cpu" if r.cuda is None else "gpu"
    expected = expected_versions(r, platform)
    suffix = tag_suffix(platform)
    version_tag = image_tag(r) + suffix
    repo = r.image.name
    bootstrap = _bootstrap(r, platform)
    tarball = _openmpi_tarball(r)
    path_prefix = (f"{OPENMPI_TARBALL_PREFIX}/bin",) if tarball else ()
    ompi_major = Version(r.openmpi.version).major
    mpi_mca, prte_mca = _mca(r, ompi_major)
    etc = f"{OPENMPI_TARBALL_PREFIX}/etc" if tarball else "/etc/openmpi"
    cuda_source = r.cuda.source if r.cuda else None
    return Plan(
        name=r.name,
        recipe_sha256=loaded.sha256,
        base_image=bootstrap.image_ref if bootstrap else str(r.base.image),
        bootstrap=bootstrap,
        distro=f"{r.distro.name}{r.distro.version}",
        accel=accel,
        tags=(f"{repo}:{version_tag}",),
        moving_tags=tuple(f"{repo}:{t}{suffix}" for t in r.image.moving_tags),
        expected=expected,
        labels=_labels(r, loaded.sha256, version_tag, expected, platform),
        system_packages=SYSTEM_PACKAGES,
        python_packages=_python_packages(r),
        python_ppa="ppa:deadsnakes/ppa" if r.python.source == "deadsnakes" else None,
        openmpi_packages=OPENMPI_DISTRO_PACKAGES if tarball is None else (),
        fabric_packages=_fabric_packages(r),
        fabric_mca=_fabric_mca(r, ompi_major),
        openmpi_tarball=tarball,
        pip_steps=_pip_steps(r, platform),
        torch_index_url=r.torch.index_url,
        prebuild_ops=() if cuda_source == "wheels" else r.deepspeed.prebuild_ops,
        ds_accelerator="cpu" if r.cuda is None else "cuda",
        cuda_arch_list=r.deepspeed.cuda_arch_list,
        apt_extras=r.packages.apt,
        base_env=_base_env(r),
        user_env={k: str(v) for k, v in r.env.items()},
        mca=mpi_mca,
        mca_conf_path=f"{etc}/openmpi-mca-params.conf",
        ssh_port=r.ssh.port,
        ssh_user=r.ssh.user,
        ssh_uid=r.ssh.uid if r.ssh.user != "root" else 0,
        user_keys=r.ssh.user_keys,
        host_keys=r.ssh.host_keys,
        allow_run_as_root=r.mpi.allow_run_as_root,
        path_prefix=path_prefix,
        openmpi_major=ompi_major,
        prte_mca=prte_mca,
        prte_conf_path=f"{etc}/prte-mca-params.conf" if ompi_major >= 5 else None,
        pip_over_distro=r.torch.source == "distro",
        cuda_source=cuda_source,
        ds_build_env=_ds_build_env(r)
        if cuda_source == "wheels" and r.deepspeed.prebuild_ops
        else {},
        fabric=r.network.fabric,
        platform=platform,
    )


def _fabric_packages(r: Recipe) -> tuple[str, ...]:
    if r.network.fabric != "rdma":
        return ()
    return FABRIC_PACKAGES + (UCX_PACKAGES if r.network.ucx else ())


def ds_build_name(builder: str) -> str:
    """DeepSpeed's install-time switch for an op builder class (FusedAdamBuilder ->
    DS_BUILD_FUSED_ADAM), from data/compat.yaml; the compat rule rejects unknown builders."""
    return "DS_BUILD_" + rules_data()["deepspeed_install_ops"]["table"][builder]


def _ds_build_env(r: Recipe) -> dict[str, str]:
    """pip builds DeepSpeed with these ops compiled in: no GPU is needed (TORCH_CUDA_ARCH_LIST
    says which GPUs), and nothing is JIT-compiled when a rank loads them."""
    env = {"DS_BUILD_OPS": "0"}
    env.update({ds_build_name(op): "1" for op in r.deepspeed.prebuild_ops})
    env.update(
        {
            "DS_ACCELERATOR": "cuda",
            "TORCH_CUDA_ARCH_LIST": r.deepspeed.cuda_arch_list,
            "CUDA_HOME": CUDA_TOOLKIT_HOME,
        }
    )
    return env


McaLines = tuple[tuple[str, str, str], ...]


def _mca(r: Recipe, ompi_major: int) -> tuple[McaLines, McaLines]:
    return mca_files(r.mpi.mca, ompi_major)


def _fabric_mca(r: Recipe, ompi_major: int) -> McaLines:
    """rdma: Open MPI's defaults in the final image, replacing the TCP image's file. F4: no
    pml unless the recipe names one: Open MPI selects ucx where RDMA is and ob1 elsewhere,
    and an RDMA launch line asks for ucx by name (`imagekit mpirun --fabric rdma`)."""
    if r.network.fabric != "rdma":
        return ()
    mca = dict(r.mpi.mca)
    if "mca" not in r.mpi.model_fields_set:
        mca.pop("pml", None)
    return mca_files(mca, ompi_major)[0]


def mca_files(mca: Mapping[str, object], ompi_major: int) -> tuple[McaLines, McaLines]:
    """(MPI library parameters, PRRTE parameters) of `mca`, each line (name, value, why):
    one file before Open MPI 5, two from it, ORTE's names mapped onto PRRTE's (K3). Recipes'
    images and `imagekit adapt` write the same lines."""
    if ompi_major < 5:
        return tuple((k, str(v), _mca_why(k, v)) for k, v in mca.items()), ()
    mpi: list[tuple[str, str, str]] = []
    prte: dict[str, tuple[str, str, str]] = {
        k: (k, v, MCA_WHY[k]) for k, v in OPENMPI5_DEFAULT_PRTE.items()
    }
    for key, value in mca.items():
        name = OMPI5_MCA_RENAMES.get(key, key)
        why = _mca_why(key, value)
        if name != key:
            why = f"{why} (Open MPI 5's name for {key})"
        if name.startswith(PRTE_PREFIXES):
            prte[name] = (name, str(value), why)
        else:
            mpi.append((name, str(value), why))
    return tuple(mpi), tuple(prte.values())


def _mca_why(key: str, value: object) -> str:
    """The comment of one MCA line: L4's reason is for ob1; a pml that names ucx is an RDMA
    cluster's choice (F1)."""
    if key == "pml" and "ucx" in str(value):
        return "F1: UCX carries MPI over the RDMA fabric (set by the recipe)"
    return MCA_WHY.get(key, "set by the recipe")


def expected_versions(r: Recipe, platform: str = DEFAULT_PLATFORM) -> dict[str, str]:
    """What the image claims (R12); check compares these with what is inside."""
    versions = {
        "python": r.python.version,
        "openmpi": r.openmpi.version,
        "torch": torch_pin(r, platform) if r.torch.source == "pip" else r.torch.version,
        "deepspeed": r.deepspeed.version,
        "nccl": r.nccl.version,
    }
    if r.cuda is not None:
        versions["cuda"] = r.cuda.version
    return versions


def torch_pin(r: Recipe, platform: str = DEFAULT_PLATFORM) -> str:
    """PyTorch's own indexes publish local versions: 2.1.2+cu121, 2.13.0+cpu (a --wheelhouse
    stands in for them). PyPI's Linux wheels (no index_url) carry none: on x86-64 2.6.0 is
    the cu124 build there (cuda.source: wheels), on aarch64 2.9.1 the CPU build (compat.yaml's
    pypi_torch says which build PyPI has)."""
    version = Version(r.torch.version)
    if version.local or (
        r.torch.index_url is None and (_pypi_cuda_torch(r) or platform != DEFAULT_PLATFORM)
    ):
        return str(version)
    return f"{version}+{r.torch.variant}"


def _pypi_cuda_torch(r: Recipe) -> bool:
    return r.cuda is not None and r.cuda.source == "wheels" and r.torch.index_url is None


def image_tag(r: Recipe) -> str:
    fields = {
        "release": r.image.release,
        "accel": "cpu" if r.cuda is None else "gpu",
        "py": "py" + r.python.version.replace(".", ""),
        "cuda": _cuda_tag(r),
        "os": f"{r.distro.name}{r.distro.version}",
    }
    return r.image.tag.format(**fields)


def _cuda_tag(r: Recipe) -> str:
    if r.cuda is None:
        return "nocuda"
    v = Version(r.cuda.version)
    return f"cu{v.major}{v.minor}"


def _bootstrap(r: Recipe, platform: str) -> BootstrapSpec | None:
    b = r.base.bootstrap
    if b is None:
        return None
    return BootstrapSpec(
        suite=b.suite,
        mirror=b.mirror,
        epoch=b.epoch,
        components=b.components,
        architecture=architecture(platform),
    )


def _python_packages(r: Recipe) -> tuple[str, ...]:
    if r.python.source == "distro":
        packages = ("python3", "python3-dev", "python3-pip", "python3-venv", "python-is-python3")
        if r.torch.source == "distro":
            # setuptools: DeepSpeed's sdist builds against the system site (no isolation
            # from Debian's torch), and Python 3.12+ no longer ships it. DeepSpeed's ops
            # compile against torch's C++ headers, which Debian ships in libtorch-dev, and
            # pybind11's (tried: without them, `#include <torch/extension.h>` fails).
            packages += ("python3-torch", "python3-setuptools", "libtorch-dev", "pybind11-dev")
        return packages
    py = f"python{r.python.version}"
    return (py, f"{py}-dev", f"{py}-venv", "python3-pip")


def _openmpi_tarball(r: Recipe) -> dict[str, str] | None:
    if r.openmpi.source != "tarball":
        return None
    flags = ["--with-cuda=/usr/local/cuda"] if r.cuda else []
    if r.network.fabric == "rdma" and r.network.ucx:
        # Explicit: configure stops when UCX is missing instead of building without the PML.
        flags.append("--with-ucx=/usr")
    return {
        "url": str(r.openmpi.url),
        "sha256": str(r.openmpi.sha256),
        "prefix": OPENMPI_TARBALL_PREFIX,
        "configure_flags": " ".join(flags),
    }


def _pip_steps(r: Recipe, platform: str) -> tuple[PipStep, ...]:
    """Separate stages so a DeepSpeed bump leaves the torch layer cached."""
    steps = []
    if r.torch.source == "pip":
        steps.append(PipStep("torch", (f"torch=={torch_pin(r, platform)}",)))
    below = tuple(s.stage for s in steps)
    steps.append(PipStep("deepspeed", (f"deepspeed=={r.deepspeed.version}",), needs=below))
    if r.packages.pip:
        steps.append(PipStep("extras", r.packages.pip, needs=(*below, "deepspeed")))
    return tuple(steps)


def _base_env(r: Recipe) -> dict[str, str]:
    """Fixed environment, set early; the recipe's own env goes last so editing it is cheap."""
    env = {"TORCH_EXTENSIONS_DIR": TORCH_EXTENSIONS_DIR}
    if r.mpi.allow_run_as_root:
        # R8: mpirun as root works without --allow-run-as-root.
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def session_env_names(plan: Plan) -> tuple[str, ...]:
    """Variables copied into /etc/environment, so ssh sessions (mpirun's remote orted) see
    them: Docker's ENV never reaches processes that sshd starts."""
    names = {"PATH", "LD_LIBRARY_PATH", "CUDA_HOME", *plan.base_env, *plan.user_env}
    return tuple(sorted(names))


def _labels(
    r: Recipe, sha: str, tag: str, expected: dict[str, str], platform: str
) -> dict[str, str]:
    labels = {
        "org.opencontainers.image.title": r.image.name,
        "org.opencontainers.image.version": tag,
        # A label is one line: a multi-line description (`description: |`) is joined.
        "org.opencontainers.image.description": " ".join((r.description or r.name).split()),
        f"{LABEL_PREFIX}.recipe": r.name,
        f"{LABEL_PREFIX}.recipe-sha256": sha,
        f"{LABEL_PREFIX}.ssh.port": str(r.ssh.port),  # read by smoke (declared_port)
        f"{LABEL_PREFIX}.ssh.user-keys": r.ssh.user_keys,
        f"{LABEL_PREFIX}.ssh.host-keys": r.ssh.host_keys,
        f"{LABEL_PREFIX}.ssh.user": r.ssh.user,
        f"{LABEL_PREFIX}.mpi.allow-run-as-root": str(r.mpi.allow_run_as_root).lower(),
    }
    labels.update({f"{LABEL_PREFIX}.version.{k}": v for k, v in expected.items()})
    if r.network.fabric == "rdma":  # read by the check's fabric section and by smoke
        labels[FABRIC_LABEL] = "rdma"
        labels[FABRIC_PROVIDERS_LABEL] = ",".join(r.network.providers)
        labels[FABRIC_UCX_LABEL] = str(r.network.ucx).lower()
    if platform != DEFAULT_PLATFORM:
        labels[PLATFORM_LABEL] = platform
    if r.env_not_secret:  # read by check (credentials-in-config), as recipe validation reads it
        labels[f"{LABEL_PREFIX}.env-not-secret"] = ",".join(sorted(r.env_not_secret))
    if r.cuda is not None and r.cuda.source == "wheels":
        labels[f"{LABEL_PREFIX}.cuda.source"] = "wheels"
        # read by check (prebuilt-ops): each must be installed and import
        labels[f"{LABEL_PREFIX}.deepspeed.installed-ops"] = ",".join(r.deepspeed.prebuild_ops)
    return labels
