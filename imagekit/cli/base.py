"""What every command shares: the two consoles, argument types and options, the group
that commands register on, and the way a bad value from the environment is named."""

from __future__ import annotations

import functools
from pathlib import Path

import click
from click.core import ParameterSource

from imagekit import __version__
from imagekit.cli.console import LazyConsole, escape
from imagekit.errors import (
    UsageError,
)
from imagekit.platforms import PLATFORMS

# command imports what it needs (recipes and pydantic, templates, docker, pytest) itself.

out = LazyConsole(highlight=False, soft_wrap=True)
err = LazyConsole(stderr=True, highlight=False, soft_wrap=True)

RecipeArg = click.Path(path_type=Path, dir_okay=False)
FileOut = click.Path(path_type=Path, dir_okay=False)


def echo_lines(lines: list[str], console: LazyConsole = out) -> None:
    for line in lines:
        console.print(line)


def _gpus(ctx, param, value: str | None) -> str | None:
    if value is None or value == "all" or (value.isdigit() and int(value) > 0):
        return value
    raise click.BadParameter(f"{value!r} is not 'all' or a number of GPUs", ctx=ctx, param=param)


# Runs on hosts with the NVIDIA container runtime; without it the engine refuses the request.
GPUS_OPTION = click.option(
    "--gpus",
    callback=_gpus,
    metavar="all|N",
    help="GPUs for the containers, as docker run --gpus (hosts with the NVIDIA runtime).",
)


# check, smoke and publish: which platform's image of a RECIPE target (build and lock have
# their own wording among the build inputs).
PLATFORM_OPTION = click.option(
    "--platform",
    type=click.Choice(PLATFORMS),
    help="With a RECIPE: its image for this one of its platforms (default: its first).",
)


class Command(click.Command):
    """A bad value that came from an environment variable (IMAGEKIT_WHEELHOUSE...) is named
    as such: '--wheelhouse (from $IMAGEKIT_WHEELHOUSE) X: ...', since the user may not have
    typed any flag at all."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            flag = exc.message.split(" ", 1)[0]
            for param in self.params:
                source = ctx.get_parameter_source(param.name)
                if flag in param.opts and param.envvar and source is ParameterSource.ENVIRONMENT:
                    rest = exc.message[len(flag) :]
                    raise UsageError(f"{flag} (from ${param.envvar}){rest}") from None
            raise


class Group(click.Group):
    command_class = Command


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="imagekit")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """Build, verify and publish MPI + NCCL + DeepSpeed training images for MPIJobs."""


def command_words(ctx, param, words: tuple[str, ...]) -> tuple[str, ...]:
    """COMMAND keeps its own flags (`python train.py --lr 3`), but no program starts with
    '-': a first word that does is a mistyped option of ours, not something to run."""
    if words and words[0].startswith("-"):
        options = [o for p in ctx.command.params for o in p.opts if o.startswith("-")]
        raise click.NoSuchOption(words[0], possibilities=options, ctx=ctx)
    return words


def key_value(ctx, param, values: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", ctx=ctx, param=param)
        pairs[key] = value
    return pairs


def build_inputs(command):
    """Where packages come from during a build or a lock's resolution; never in the image.
    The options arrive in the command as one `inputs` argument (a build.BuildInputs)."""

    @functools.wraps(command)
    def with_inputs(**kw):
        from imagekit.build.builder import BuildInputs

        fields = {name: kw.pop(name) for name in _BUILD_INPUT_NAMES if name in kw}
        return command(inputs=BuildInputs(**fields), **kw)

    for option in reversed(_BUILD_INPUT_OPTIONS):
        with_inputs = option(with_inputs)
    return with_inputs


_BUILD_INPUT_NAMES = (
    "ca_bundle",
    "wheelhouse",
    "index_url",
    "extra_index_urls",
    "apt_mirror",
    "final_apt_sources",
    "memory",
    "platform",
)

# Below this a RUN step cannot start a shell and apt (and the engine refuses under 6 MB).
MIN_BUILD_MEMORY = 64 << 20


def _memory_size(ctx, param, value: str | None) -> int | None:
    from imagekit.grammar import human_size, shown, size_in_bytes

    if value is None:
        return None
    size = size_in_bytes(value)
    if size is None or not MIN_BUILD_MEMORY <= size <= 1 << 50:
        raise click.BadParameter(
            f"{shown(value)}: not a size of at least {human_size(MIN_BUILD_MEMORY)} "
            "(e.g. 16g, 512m)",
            ctx=ctx,
            param=param,
        )
    return size


_BUILD_INPUT_OPTIONS = [
    click.option(
        "--platform",
        type=click.Choice(PLATFORMS),
        help="Which of the recipe's platforms (its `platforms`) to build or lock; default: "
        "its first. A platform other than the host's runs under qemu emulation (A1).",
    ),
    click.option(
        "--ca-bundle",
        type=FileOut,
        envvar="IMAGEKIT_CA_BUNDLE",
        help="PEM CA bundle trusted by pip and curl during the build only; never in the image.",
    ),
    click.option(
        "--wheelhouse",
        type=click.Path(path_type=Path, file_okay=False),
        envvar="IMAGEKIT_WHEELHOUSE",
        help="Directory of wheels pip may install from (stands in for the torch index).",
    ),
    click.option("--index-url", envvar="IMAGEKIT_INDEX_URL", help="pip index (a PyPI mirror)."),
    click.option(
        "--extra-index-url", "extra_index_urls", multiple=True, help="Extra pip index (repeatable)."
    ),
    click.option(
        "--apt-mirror",
        envvar="IMAGEKIT_APT_MIRROR",
        help="Debian/Ubuntu mirror URL replacing deb.debian.org / archive.ubuntu.com. "
        "Credentials in it (http://user:TOKEN@host/...) reach apt during the build only.",
    ),
    click.option(
        "--final-apt-sources",
        type=click.Choice(["mirror", "public"]),
        default="mirror",
        show_default=True,
        help="With --apt-mirror: the image's apt sources name the mirror (never its "
        "credentials) or go back to the public archive.",
    ),
    click.option(
        "--memory",
        envvar="IMAGEKIT_BUILD_MEMORY",
        callback=_memory_size,
        metavar="SIZE",
        help="Memory each build step may use (e.g. 16g); a step over it is stopped and named. "
        "Default: 3/4 of the engine host's memory.",
    ),
]


def emit(text: str, output: Path | None) -> None:
    """Standard output, or the whole file at once (never half of it)."""
    if output is None:
        click.echo(text, nl=False)
        return
    from imagekit.files import write_text_atomic

    write_text_atomic(output, text)
    out.print(f"[green]wrote[/] {escape(str(output))}")


def net_devices(ctx, param, value: str | None) -> str | None:
    if value is None:
        return None
    from imagekit.grammar import check_net_devices

    try:
        return check_net_devices(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def rdma_resources(ctx, param, values: tuple[str, ...]) -> dict[str, int]:
    """`--rdma RESOURCE=N`: Kubernetes extended resources, each a positive count."""
    from imagekit.grammar import check_k8s_resource, shown

    found: dict[str, int] = {}
    for item in values:
        name, sep, count = item.partition("=")
        try:
            check_k8s_resource(name)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
        if not sep or not count.isdigit() or not 1 <= int(count) <= 1_000_000:
            raise click.BadParameter(
                f"{shown(item)}: expected RESOURCE=N with N from 1 to 1000000", ctx=ctx, param=param
            )
        found[name] = int(count)
    return found
