"""Terminal display of engine events. Used only by the command line (imagekit.cli, the only package that prints):
a live "step N/M, elapsed" line on a TTY, or the plain build log otherwise."""

from __future__ import annotations

import time
from collections import deque

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from imagekit.events import Event, Log, Message, Step


class PlainReporter:
    """Every line, prefixed with the step; for CI logs and `--plain`."""

    def __init__(self, console: Console):
        self.console = console
        self.started = time.monotonic()

    def __call__(self, event: Event) -> None:
        elapsed = time.monotonic() - self.started
        if isinstance(event, Step):
            self.console.print(
                f"[{elapsed:6.1f}s] step {event.number}/{event.total}: {event.instruction}",
                markup=False,
            )
        elif isinstance(event, Log):
            self.console.print(f"  {event.line}", markup=False)
        elif isinstance(event, Message):
            self.console.print(f"[{elapsed:6.1f}s] {event.text}", markup=False)

    def close(self) -> None:
        pass


class LiveReporter:
    """A progress bar over build steps plus the last few log lines."""

    def __init__(self, console: Console):
        self.console = console
        self.recent: deque[str] = deque(maxlen=3)
        self.progress = Progress(
            TextColumn("[bold]{task.fields[step]}"),
            BarColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("starting", total=None, step="")
        self.progress.start()

    def __call__(self, event: Event) -> None:
        if isinstance(event, Step):
            self.progress.update(
                self.task,
                total=event.total,
                completed=event.number - 1,
                step=f"step {event.number}/{event.total}",
                description=escape(event.instruction[:70]),
            )
        elif isinstance(event, Message):
            self.progress.console.print(f"[dim]{escape(event.text)}[/]")
        elif isinstance(event, Log) and event.line.strip():
            self.recent.append(event.line)

    def close(self) -> None:
        self.progress.stop()


def reporter_for(console: Console, plain: bool) -> PlainReporter | LiveReporter:
    if plain or not console.is_terminal:
        return PlainReporter(console)
    return LiveReporter(console)
