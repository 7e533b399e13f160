"""Cross-field compatibility rules. The facts live in data/compat.yaml; each function here
reads one table and reports findings with the table's `source` attached."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from imagekit.datafiles import data_yaml
from imagekit.ompi import OMPI5_MCA_RENAMES
from imagekit.recipe.model import Recipe


@dataclass(frozen=True)
class Finding:
    level: Literal["error", "warning"]
    field: str
    message: str
    source: str

    def line(self) -> str:
        return f"{self.field}: {self.message} [{self.source}]"


@cache
def rules_data() -> dict[str, Any]:
    return data_yaml("compat.yaml")


def findings(recipe: Recipe) -> list[Finding]:
    data = rules_data()
    found: list[Finding] = []
    for key, rule in RULES.items():
        found.extend(rule(recipe, data[key]))
    return found


def errors(recipe: Recipe) -> list[str]:
    return [f.line() for f in findings(recipe) if f.level == "error"]


def warnings(recipe: Recipe) -> list[str]:
    return [f.line() for f in findings(recipe) if f.level == "warning"]


# ---------------------------------------------------------------------------
# Helpers


def minor(version: str) -> str:
    """'2.1.2+cu121' -> '2.1'"""
    v = Version(version)
    return f"{v.major}.{v.minor}"


def distro_key(recipe: Recipe) -> str:
    return f"{recipe.distro.name}-{recipe.distro.version}"


def _variant_cuda(variant: str) -> tuple[int, int] | None:
    """'cu121' -> (12, 1); 'cu130' -> (13, 0); 'cpu' -> None"""
    if variant == "cpu":
        return None
    digits = variant[2:]
    return int(digits[:-1]), int(digits[-1])


Rule = Callable[[Recipe, dict[str, Any]], Iterator[Finding]]


def _err(field: str, message: str, rule: dict[str, Any]) -> Finding:
    return Finding("error", field, message, rule["source"])


def _warn(field: str, message: str, rule: dict[str, Any]) -> Finding:
    return Finding("warning", field, message, rule["source"])


# ---------------------------------------------------------------------------
# Rules, one per table in compat.yaml


def torch_python(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    supported = rule["table"].get(minor(r.torch.version))
    if supported is None:
        yield _warn(
            "torch.version", f"no Python rule for torch {r.torch.version}; not checked", rule
        )
    elif r.python.version not in supported:
        yield _err(
            "python.version",
            f"torch {r.torch.version} has no wheels for Python {r.python.version}"
            f" (supported: {', '.join(supported)})",
            rule,
        )


def torch_cuda_variants(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if r.torch.variant == "cpu":
        return
    published = rule["table"].get(minor(r.torch.version))
    if published is None:
        yield _warn("torch.variant", f"no CUDA build rule for torch {r.torch.version}", rule)
    elif r.torch.variant not in published:
        yield _err(
            "torch.variant",
            f"torch {r.torch.version} is not published for {r.torch.variant}"
            f" (published: {', '.join(published)})",
            rule,
        )


def cuda_variant(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    wheel = _variant_cuda(r.torch.variant)
    if r.cuda is None:
        if wheel is not None:
            yield _err(
                "torch.variant", f"{r.torch.variant} on an image without CUDA; use cpu", rule
            )
        return
    if wheel is None:
        yield _warn("torch.variant", "cpu torch on a CUDA image: the GPU will not be used", rule)
        return
    image = Version(r.cuda.version)
    if wheel[0] != image.major:
        yield _err(
            "torch.variant",
            f"torch built for CUDA {wheel[0]}.{wheel[1]} on a CUDA {r.cuda.version} image:"
            " majors differ",
            rule,
        )
    elif wheel[1] > image.minor:
        yield _warn(
            "torch.variant",
            f"torch built for CUDA {wheel[0]}.{wheel[1]} is newer than the image's"
            f" CUDA {r.cuda.version}",
            rule,
        )


def nccl_min_for_cuda_major(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if r.nccl.version == "from-torch":
        return
    if r.cuda is None:
        yield _err("nccl.version", "an NCCL version needs a CUDA image (cuda.version)", rule)
        return
    major = str(Version(r.cuda.version).major)
    needed = rule["table"].get(major)
    if needed is None:
        yield _warn("nccl.version", f"no NCCL rule for CUDA {major}; not checked", rule)
    elif Version(r.nccl.version) < Version(needed):
        yield _err(
            "nccl.version",
            f"NCCL {r.nccl.version} predates CUDA {major} support (needs >= {needed})",
            rule,
        )


def nccl_pinned_with_pip_torch(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if _cuda_from_wheels(r):
        return  # nccl.version then names the wheel's NCCL, which cuda_wheels checks
    if r.nccl.version != "from-torch" and r.torch.variant != "cpu":
        yield _warn(
            "nccl.version",
            f"NCCL {r.nccl.version} is installed, but torch {r.torch.version} loads its own",
            rule,
        )


def distro_python(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if r.python.source != "distro":
        return
    shipped = rule["table"].get(distro_key(r))
    if shipped is None:
        yield _err("distro", f"unknown distro release {distro_key(r)}", rule)
    elif shipped != r.python.version:
        yield _err(
            "python.version",
            f"{distro_key(r)} ships Python {shipped}, not {r.python.version}"
            " (change the version, or python.source)",
            rule,
        )


def deadsnakes_distros(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if r.python.source == "deadsnakes" and r.distro.name not in rule["distros"]:
        yield _err("python.source", f"deadsnakes is not available on {r.distro.name}", rule)


def distro_openmpi(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if r.openmpi.source != "distro":
        return
    shipped = rule["table"].get(distro_key(r))
    if shipped is not None and shipped != r.openmpi.version:
        yield _err(
            "openmpi.version",
            f"{distro_key(r)} ships Open MPI {shipped}, not {r.openmpi.version}"
            " (change the version, or use source: tarball)",
            rule,
        )


def bootstrap_suites(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if r.base.bootstrap is None:
        return
    expected = rule["table"][r.base.bootstrap.suite]
    if expected != distro_key(r):
        yield _err("distro", f"base.bootstrap.suite {r.base.bootstrap.suite} is {expected}", rule)


def openmpi5(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if Version(r.openmpi.version).major < 5:
        return
    # plm_rsh_* (in the defaults) imagekit renames itself; the orte_* ones are errors
    prefixes = tuple(rule["removed_mca_prefixes"])
    renamed = {k: v for k, v in OMPI5_MCA_RENAMES.items() if k.startswith(prefixes)}
    for key in r.mpi.mca:
        if key in renamed:
            yield _err(f"mpi.mca.{key}", f"is {renamed[key]} in Open MPI 5", rule)
        elif key.startswith(tuple(rule["removed_mca_prefixes"])):
            yield _err(f"mpi.mca.{key}", "does not exist in Open MPI 5", rule)


def deepspeed_torch(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    ds, torch = Version(r.deepspeed.version), Version(r.torch.version)
    for row in rule["table"]:
        if ds in SpecifierSet(row["deepspeed"]) and torch not in SpecifierSet(row["torch"]):
            yield _err(
                "torch.version",
                f"deepspeed {ds} needs torch {row['torch']}, recipe has {torch}",
                rule,
            )


_CUDA_TAG = re.compile(r"^(?:docker\.io/)?nvidia/cuda:(\d+)\.(\d+)\.(\d+)-(.*)$")


def nvidia_cuda_tags(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    match = _CUDA_TAG.match(r.base.image or "")
    if not match:
        return
    major, minor_, patch, rest = match.groups()
    tag_version = f"{major}.{minor_}.{patch}"
    kept = rule["kept_patch"].get(f"{major}.{minor_}")
    if kept is not None and kept != tag_version:
        yield _err(
            "base.image",
            f"nvidia/cuda:{tag_version}-{rest} is no longer published (did you mean {kept}?)",
            rule,
        )
    if r.cuda is None or r.cuda.version != tag_version:
        declared = r.cuda.version if r.cuda else "none"
        yield _err("cuda.version", f"is {declared}, but base.image is CUDA {tag_version}", rule)
    os_tag = f"{r.distro.name}{r.distro.version}"
    if not rest.endswith(os_tag):
        yield _err("distro", f"base.image is not {os_tag} ({rest})", rule)


def _cuda_from_wheels(r: Recipe) -> bool:
    return r.cuda is not None and r.cuda.source == "wheels"


def cuda_wheels(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if r.cuda is None or r.cuda.source != "wheels":
        return
    row = rule["torch"].get(minor(r.torch.version))
    if row is None:
        known = ", ".join(rule["torch"])
        yield _err(
            "torch.version",
            f"no CUDA wheel rule for torch {r.torch.version} (known: {known})",
            rule,
        )
        return
    if r.torch.variant != row["variant"]:
        yield _err(
            "torch.variant",
            f"PyPI's torch {r.torch.version} is the {row['variant']} build, not {r.torch.variant}",
            rule,
        )
    if minor(r.cuda.version) != row["cuda"]:
        yield _err(
            "cuda.version",
            f"is {r.cuda.version}, but torch {r.torch.version}'s wheels carry CUDA {row['cuda']}",
            rule,
        )
    if r.nccl.version not in ("from-torch", row["nccl"]):
        yield _err(
            "nccl.version",
            f"is {r.nccl.version}, but torch {r.torch.version}'s wheels carry NCCL {row['nccl']}",
            rule,
        )
    if not r.deepspeed.prebuild_ops:
        return  # nothing compiles at build time: no distro nvcc is installed
    suite = r.base.bootstrap.suite if r.base.bootstrap else None
    toolkit = rule["toolkit"].get(suite)
    if toolkit is None:
        yield _err(
            "base.bootstrap.suite",
            f"Debian {suite} has no CUDA toolkit imagekit knows (known: {', '.join(rule['toolkit'])})",
            rule,
        )
    elif Version(toolkit["cuda"]).major != Version(row["cuda"]).major:
        yield _err(
            "cuda.version",
            f"Debian {suite}'s nvcc is CUDA {toolkit['cuda']}, torch's wheels CUDA {row['cuda']}:"
            " majors differ",
            rule,
        )


def deepspeed_install_ops(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    if not _cuda_from_wheels(r):
        return
    known = list(rule["table"])
    for i, op in enumerate(r.deepspeed.prebuild_ops):
        if op not in rule["table"]:
            near = difflib.get_close_matches(op, known, n=1, cutoff=0.6)
            hint = f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(known)})"
            yield _err(
                f"deepspeed.prebuild_ops[{i}]",
                f"{op} cannot be prebuilt at install time{hint}",
                rule,
            )


def pypi_torch(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    """A recipe taking torch from PyPI (source pip, no index_url) gets the build PyPI has for
    each of its platforms: CUDA on x86-64; CPU, then CUDA 13, on aarch64."""
    if r.torch.source != "pip" or r.torch.index_url:
        return
    if "linux/amd64" in r.platforms and r.torch.variant == "cpu":
        yield _warn(  # a --wheelhouse holding the +cpu wheel stands in for the index
            "torch.index_url",
            "PyPI's torch for linux/amd64 is a CUDA build: a CPU torch needs PyTorch's CPU "
            "index (https://download.pytorch.org/whl/cpu) or a --wheelhouse with its wheel",
            rule,
        )
    if "linux/arm64" in r.platforms:
        yield from _pypi_torch_aarch64(r, rule)


def _pypi_torch_aarch64(r: Recipe, rule: dict[str, Any]) -> Iterator[Finding]:
    facts = rule["aarch64"]
    version = Version(minor(r.torch.version))
    if version < Version(facts["first"]):
        yield _warn("torch.version", f"no aarch64 rule for torch {r.torch.version}", rule)
    elif r.torch.variant == "cpu" and version >= Version(facts["cuda_from"]):
        yield _err(
            "torch.variant",
            f"PyPI's torch {r.torch.version} for linux/arm64 is a CUDA build "
            f"({facts['cuda_variant']}); its CPU builds end at {facts['cpu_through']}",
            rule,
        )
    elif r.torch.variant != "cpu" and version <= Version(facts["cpu_through"]):
        yield _err(
            "torch.variant",
            f"PyPI's torch {r.torch.version} for linux/arm64 is a CPU build; use cpu, or "
            f"torch >= {facts['cuda_from']} ({facts['cuda_variant']})",
            rule,
        )
    elif r.torch.variant not in ("cpu", facts["cuda_variant"]):
        yield _err(
            "torch.variant",
            f"PyPI's torch {r.torch.version} for linux/arm64 is {facts['cuda_variant']}, "
            f"not {r.torch.variant}",
            rule,
        )


RULES: dict[str, Rule] = {
    "torch_python": torch_python,
    "torch_cuda_variants": torch_cuda_variants,
    "cuda_variant": cuda_variant,
    "nccl_min_for_cuda_major": nccl_min_for_cuda_major,
    "nccl_pinned_with_pip_torch": nccl_pinned_with_pip_torch,
    "distro_python": distro_python,
    "deadsnakes_distros": deadsnakes_distros,
    "distro_openmpi": distro_openmpi,
    "bootstrap_suites": bootstrap_suites,
    "openmpi5": openmpi5,
    "deepspeed_torch": deepspeed_torch,
    "nvidia_cuda_tags": nvidia_cuda_tags,
    "cuda_wheels": cuda_wheels,
    "deepspeed_install_ops": deepspeed_install_ops,
    "pypi_torch": pypi_torch,
}
