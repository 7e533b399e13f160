"""Plan -> build context: the Dockerfile and the files it copies, rendered from templates.

`render_context` is pure (returns a mapping of relative path -> content); `write_context`
puts it on disk atomically, so an interrupted render never leaves half a context behind.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from imagekit.build.lockfile import lock_path
from imagekit.build.plan import (
    BUILD_DIR,
    STAGE_ROOT,
    TORCH_EXTENSIONS_DIR,
    Plan,
    session_env_names,
)
from imagekit.build.validate import validate
from imagekit.errors import RecipeError, StaleRenderError
from imagekit.files import TREE_MARKER, write_tree
from imagekit.grammar import control_characters
from imagekit.ompi import OPERATOR_HOSTFILE
from imagekit.paths import cache_dir

BUILD_SUBDIR = "imagekit-build"
KEYS_SUBDIR = "imagekit-keys"


@dataclass(frozen=True)
class ContextOptions:
    """Build-time inputs that shape the build context but never the final image."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    wheelhouse: Path | None = None
    ca_bundle: Path | None = None
    # `--ssh-keys DIR`, read: relative path (host/..., user/...) -> key text. Baked keys
    # come from outside instead of ssh-keygen at build time, so rebuilds are identical.
    ssh_keys: dict[str, str] | None = None
    # `--final-apt-sources public`: undo the `--apt-mirror` rewrite in the image's last layer.
    public_apt_sources: bool = False


@dataclass(frozen=True)
class Context:
    """Rendered text files plus files/directories to copy in, by relative path."""

    files: dict[str, str]
    copies: dict[str, Path] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)  # files that must not be 0644

    @property
    def dockerfile(self) -> str:
        return self.files["Dockerfile"]


# -- escaping by context ----------------------------------------------------------------------
# The models check every value's grammar (grammar.py); the template layer escapes each value for
# where it lands, and refuses, as a last line, any raw value that would start a new line. Values
# an escaping filter made are Escaped and pass as they are.


class Escaped(str):
    """Text an escaping filter made for where it lands."""


class UnsafeValueError(RecipeError):
    """A value with a control character reached a template unescaped: it would add a line to
    a Dockerfile, a script or a config file. The models' grammars should have refused it."""


def _refuse_control(value: object) -> object:
    """Jinja2's `finalize`: every `{{ ... }}` passes here before it is written."""
    if isinstance(value, Escaped) or value is None:
        return value
    text = value if isinstance(value, str) else str(value)
    if control_characters(text):
        raise UnsafeValueError(
            [
                f"refusing to write {text[:60]!r}: a control character would add a line to a build file"
            ]
        )
    return value


def _unsafe(value: object) -> str:
    text = str(value)
    if control_characters(text):
        raise UnsafeValueError(
            [
                f"refusing to write {text[:60]!r}: a control character would add a line to a build file"
            ]
        )
    return text


def _dquote(value: object) -> Escaped:
    """A double-quoted Dockerfile word (ENV/LABEL values): `\\`, `"` and `$` escaped, so
    Docker neither ends the word nor substitutes build arguments into it."""
    text = _unsafe(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return Escaped(f'"{text}"')


_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./~-]+")


def _shell_word(value: object) -> Escaped:
    """One shell word: as it is when it holds nothing the shell reads, else single-quoted."""
    text = _unsafe(value)
    return Escaped(text if _PLAIN_WORD.fullmatch(text) else shlex.quote(text))


def _continued(words: object) -> Escaped:
    """Shell words after a command, one per continued line (apt installs: one diff line a
    package)."""
    return Escaped("".join(f" \\\n      {_shell_word(word)}" for word in words))


# What the compiled code depends on besides a template's source: Jinja2 compiles `finalize`
# and the block options into it, and keys its cache by the source alone. Bump the version when
# the environment's compile options change, or code compiled without them would be reused.
_COMPILED_WITH = "finalize-v1"


def _bytecode_cache(trim_blocks: bool) -> jinja2.BytecodeCache | None:
    """Compiled templates under $XDG_CACHE_HOME/imagekit/templates: compiling them is most of a
    render's time. Jinja2 keys each entry by the template's source checksum, so an entry from
    another imagekit version is never used for a changed template."""
    directory = cache_dir("templates")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a read-only home: compile every time, as without a cache
    options = f"{_COMPILED_WITH}-{'trim' if trim_blocks else 'keep'}"
    return jinja2.FileSystemBytecodeCache(str(directory), f"__jinja2_{options}_%s.cache")


def template_environment(trim_blocks: bool = False) -> jinja2.Environment:
    """The package's templates. `trim_blocks` for templates that branch on nearly every line
    (templates/adapt/): block tags then leave no blank lines behind."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("imagekit", "templates"),
        bytecode_cache=_bytecode_cache(trim_blocks),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=trim_blocks,
        lstrip_blocks=trim_blocks,
        autoescape=False,  # noqa: S701 - Dockerfiles and config files, not HTML
        finalize=_refuse_control,
    )
    env.filters["dquote"] = _dquote
    env.filters["sh"] = _shell_word
    env.filters["continued"] = _continued
    return env


def render_context(
    plan: Plan,
    options: ContextOptions | None = None,
    pip_resolver_report: str | None = None,
    pip_constraints: tuple[str, ...] = (),
) -> Context:
    """`pip_resolver_report`: instead of the image, end the Dockerfile with a stage (target
    `imagekit-pip-resolver`) where pip resolves every pip stage into that JSON report,
    held to `pip_constraints` (the earlier lock's pins, `name==version`)."""
    options = options or ContextOptions()
    env = template_environment()
    values = {
        "plan": plan,
        "options": options,
        "build_dir": BUILD_DIR,
        "stage_root": STAGE_ROOT,
        "stage_names": [step.stage for step in plan.pip_steps],
        # A stage that builds against torch (CUDA ops) starts from torch in the image's own
        # lineage, as the image does: one COPY of torch, not one per stage.
        "torch_lineage": any("torch" in step.needs for step in plan.pip_steps),
        "compile_bytecode": (
            "import compileall, py_compile; compileall.compile_dir("
            f"'{STAGE_ROOT}', quiet=2, workers=0, stripdir='{STAGE_ROOT}', prependdir='/', "
            "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)"
        ),
        "session_env": session_env_names(plan),
        "operator_hostfile": OPERATOR_HOSTFILE,
        "pip_env": f"PIP_CONFIG_FILE={BUILD_DIR}/pip.conf PIP_BREAK_SYSTEM_PACKAGES=1 PYTHONHASHSEED=0",
        "torch_extensions_dir": TORCH_EXTENSIONS_DIR,
        # apt's caches are rebuilt by every `apt-get update`: removing them in the same layer
        # keeps each apt layer from shipping ~80 MB the next one replaces (dive counts it).
        "apt_cleanup": "rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old",
        "extra_index_urls": _extra_index_urls(plan, options),
        "pip_resolver": pip_resolver_report
        and {
            "report": pip_resolver_report,
            "requirements": [r for step in plan.pip_steps for r in step.requirements],
            "constraints": bool(pip_constraints),
        },
    }
    files = {
        "Dockerfile": "Dockerfile.j2",
        "imagekit/sshd_config": "sshd_config.j2",
        "imagekit/ssh_config": "ssh_config.j2",
        "imagekit/openmpi-mca-params.conf": "openmpi-mca-params.conf.j2",
        "imagekit/entrypoint.sh": "entrypoint.sh",
        "imagekit/apt-install.sh": "apt-install.sh",
        "imagekit/apt-mirror.sh": "apt-mirror.sh",
        f"{BUILD_SUBDIR}/pip.conf": "pip.conf.j2",
        f"{BUILD_SUBDIR}/README.md": "build-README.md.j2",
    }
    rendered = {path: env.get_template(name).render(values) for path, name in files.items()}
    if plan.ssh_user != "root":
        rendered["imagekit/user-sshd_config"] = env.get_template("user-sshd_config.j2").render(
            values
        )
    if plan.prebuild_ops:
        rendered["imagekit/ninja-normalize.py"] = env.get_template("ninja-normalize.py").render()
    if plan.fabric_packages:  # the rdma file: the same template over the fabric's parameters
        rendered["imagekit/openmpi-mca-params.fabric.conf"] = env.get_template(
            "openmpi-mca-params.conf.j2"
        ).render({**values, "mca": plan.fabric_mca})
    if plan.prte_conf_path:
        rendered["imagekit/prte-mca-params.conf"] = env.get_template(
            "prte-mca-params.conf.j2"
        ).render(values)
        rendered["imagekit/hostfile-placeholder"] = env.get_template(
            "hostfile-placeholder"
        ).render()
    if plan.pip_over_distro:
        rendered[f"{BUILD_SUBDIR}/pip-pins.py"] = env.get_template("pip-pins.py").render()
    if pip_resolver_report and pip_constraints:
        rendered[f"{BUILD_SUBDIR}/constraints.txt"] = "".join(f"{c}\n" for c in pip_constraints)
    for stage, requirements in plan.pip_locks.items():
        rendered[f"imagekit-lock/{stage}.txt"] = requirements
    modes = {}
    for rel, text in (options.ssh_keys or {}).items():
        rendered[f"{KEYS_SUBDIR}/{rel}"] = text
        if not rel.endswith(".pub"):
            modes[f"{KEYS_SUBDIR}/{rel}"] = 0o600  # sshd refuses readable private keys
    copies: dict[str, Path] = {}
    if options.wheelhouse:
        copies[f"{BUILD_SUBDIR}/wheelhouse"] = options.wheelhouse
    if options.ca_bundle:
        copies[f"{BUILD_SUBDIR}/ca.pem"] = options.ca_bundle
    return Context(files=rendered, copies=copies, modes=modes)


def _extra_index_urls(plan: Plan, options: ContextOptions) -> list[str]:
    """The recipe's torch index, unless a wheelhouse stands in for it (air-gapped builds)."""
    urls = list(options.extra_index_urls)
    if plan.torch_index_url and options.wheelhouse is None:
        urls.insert(0, plan.torch_index_url)
    return urls


def write_context(context: Context, out_dir: Path) -> Path:
    """Write atomically: render into a sibling temp dir, then swap it into place."""

    def copy_in(tmp: Path) -> None:
        for rel, source in context.copies.items():
            _copy_in(source, tmp / rel)

    return write_tree(context.files, context.modes, out_dir, fill=copy_in)


def _copy_in(source: Path, target: Path) -> None:
    """Hard-link where possible: a wheelhouse can be gigabytes. The first file that cannot be
    read stops the copy with its own OSError, naming it (shutil.copytree would gather every
    failure into one shutil.Error without a file name)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if not source.is_dir():
        _link_or_copy(source, target)
        return
    for directory, _subdirs, names in os.walk(source, onerror=_raise, followlinks=True):
        into = target / Path(directory).relative_to(source)
        into.mkdir(parents=True, exist_ok=True)
        for name in names:
            _link_or_copy(Path(directory) / name, into / name)


def _raise(error: OSError) -> None:
    raise error


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    # The file a symlink names, not the link: the build context must not hold links to
    # paths on this machine (os.link links the symlink itself on Linux). os.stat first, so a
    # link to nothing fails naming the wheelhouse entry rather than its target.
    os.stat(src)
    real = os.path.realpath(src)
    try:
        os.link(real, dst)
    except OSError:
        shutil.copy2(real, dst)


def stale_files(context: Context, committed: Path) -> list[str]:
    """Relative paths whose committed render differs from `context` (or is missing/extra)."""
    stale = []
    for rel, text in context.files.items():
        path = committed / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    if committed.is_dir():
        on_disk = {
            p.relative_to(committed).as_posix()
            for p in committed.rglob("*")
            if p.is_file() and p.name != TREE_MARKER
        }
        stale.extend(sorted(on_disk - set(context.files)))
    return stale


# -- recipes -> committed renders (`imagekit render`) ------------------------------------------

from imagekit.paths import DEFAULT_RENDERS_DIR  # noqa: E402  (re-exported)


def render_recipes(
    paths: list[Path],
    out: Path | None,
    renders_dir: Path = DEFAULT_RENDERS_DIR,
    record: Callable[[Path, list[Path], str, Context], None] | None = None,
) -> list[Path]:
    """Write each recipe's build context (to `out`, or dockerfiles/<name>/). `record(recipe,
    inputs, name, context)` is told of each render written (rendercache records them: passed
    in, so this module does not import its caller)."""
    if out is not None and len(paths) != 1:
        raise RecipeError([f"-o {out}: give exactly one recipe with -o"])
    rendered = [(v, render_context(v.plan)) for v in validate(paths)]
    written = []
    for v, ctx in rendered:
        written.append(write_context(ctx, out or renders_dir / v.plan.name))
        if record is not None:
            record(
                v.loaded.path,
                [*v.loaded.sources, lock_path(v.loaded.path, v.plan.platform)],
                v.plan.name,
                ctx,
            )
    return written


def check_renders(paths: list[Path], renders_dir: Path = DEFAULT_RENDERS_DIR) -> list[Path]:
    """Raise StaleRenderError naming every recipe whose committed render is stale."""
    checked, stale = [], []
    for v in validate(paths):
        committed = renders_dir / v.plan.name
        files = stale_files(render_context(v.plan), committed)
        if files:
            stale.append(
                f"{v.loaded.path}: committed render {committed}/ is stale ({', '.join(files)})"
            )
        checked.append(committed)
    if stale:
        raise StaleRenderError("\n".join(stale), hint="run `imagekit render` and commit the result")
    return checked
