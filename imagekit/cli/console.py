"""The command line's two consoles and rich's markup escape, loaded on first use.

Importing rich's console costs more than the rest of `imagekit mpirun` (a command job scripts
run, which prints one plain line); commands that print rich output pay for it when they print.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


class LazyConsole:
    """A rich Console made the first time anything asks it for something."""

    def __init__(self, **options: Any):
        self._options = options
        self._console: Console | None = None

    @property
    def real(self) -> Console:
        """The Console itself, for code that keeps it (progress reporters, rich's Live)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def line(self, word: str, color: str, text: str) -> None:
        """One `WORD text` line with the word in `color`, printed through click so that a
        command whose only output is such lines (render) never loads rich. Colour only on a
        terminal, and never with NO_COLOR set, as rich does it."""
        import click

        colour = False if os.environ.get("NO_COLOR") else None  # None: click decides by tty
        styled = f"{click.style(word, fg=color)} {text}"
        click.echo(styled, err=bool(self._options.get("stderr")), color=colour)


def escape(text: str) -> str:
    """rich.markup.escape, imported when some text is first escaped."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)
