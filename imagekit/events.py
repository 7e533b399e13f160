"""What long commands report while they work (build steps, log lines, status messages).
Plain data, imported by the engine and by the progress display alike, so that showing
progress never imports docker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    number: int
    total: int
    instruction: str


@dataclass(frozen=True)
class Log:
    line: str


@dataclass(frozen=True)
class Message:
    """A status line from imagekit itself (bootstrapping a base, tagging, ...)."""

    text: str


Event = Step | Log | Message
Reporter = Callable[[Event], None]
