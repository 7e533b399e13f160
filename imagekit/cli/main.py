"""The command line's entry point: every command registered on one group, and every
ImagekitError caught once, here, as one red line per problem plus an exit code;
`imagekit --debug CMD` (or IMAGEKIT_DEBUG=1) shows the traceback instead. Commands live
in one module per group (recipes, building, verify, launching, images); each parses, makes
one call and prints. Nothing below imagekit.cli prints."""

from __future__ import annotations

import os
import sys

import click

from imagekit import signals

# Importing a group's module registers its commands on `cli`.
from imagekit.cli import building, display, images, launching, recipes, verify  # noqa: F401
from imagekit.cli.base import cli, echo_lines, err
from imagekit.cli.console import escape
from imagekit.errors import (
    ImagekitError,
)

# -- entry point -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    # Only `imagekit --debug CMD` is the global flag (`imagekit mpirun --debug` is not).
    first_word = next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))
    debug = "--debug" in args[:first_word] or os.environ.get("IMAGEKIT_DEBUG") == "1"
    previous = signals.install()
    try:
        cli.main(args=args, prog_name="imagekit", standalone_mode=False)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: cleanup has run on the way
        stopped = signals.interruption(exc)
        err.print(f"[bold red]ERROR[/] interrupted by {stopped.name}; removed what this run made")
        sys.exit(stopped.exit_code)
    except ImagekitError as exc:
        if debug:
            raise
        for line in exc.message.splitlines():
            err.print(f"[bold red]ERROR[/] {escape(line)}")
        if exc.hint:
            echo_lines([f"[dim]  {escape(line)}[/]" for line in exc.hint.splitlines()], err)
        if exc.debug_tip:  # not for plain bad input or verdicts: the message says it all
            err.print("[dim]TIP run `imagekit --debug ...` for a traceback[/]")
        sys.exit(exc.exit_code)
    except click.exceptions.Abort as exc:  # click's own wrapping of a KeyboardInterrupt
        stopped = signals.interruption(exc.__cause__ or KeyboardInterrupt())
        err.print(f"[bold red]ERROR[/] interrupted by {stopped.name}; removed what this run made")
        sys.exit(stopped.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:  # one the modules did not expect: still one line, not a traceback
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        err.print(f"[bold red]ERROR[/] {escape(where + (exc.strerror or str(exc)))}")
        err.print("[dim]TIP run `imagekit --debug ...` for a traceback[/]")
        sys.exit(ImagekitError.exit_code)
    finally:
        signals.restore(previous)
