"""A testinfra backend that runs the checks' commands through the engine API.

testinfra's own docker backend starts one `docker exec` CLI process per command: a Go binary
that connects, execs and exits, 50-150 ms on a loaded 2-core machine, and a check runs dozens
of commands. This backend sends the same exec over imagekit's one engine connection, and
needs no docker CLI at all. Host specs: `imagekit://USER@CONTAINER_ID`.

A signal stops a command the way it stops everything else (signals.py: an exception in the
main thread, which pytest ends the session on); there is no child process to be killed."""

from __future__ import annotations

import threading
from typing import Any

import testinfra.backend
from testinfra.backend.base import BaseBackend, CommandResult

from imagekit.engine.client import Container, Engine

NAME = "imagekit"
testinfra.backend.BACKENDS[NAME] = f"{__name__}.EngineBackend"

_engine: Engine | None = None
_lock = threading.Lock()


def _connection() -> Engine:
    """One engine connection for every backend of this process (hosts are cached anyway)."""
    global _engine
    with _lock:
        if _engine is None:
            _engine = Engine.connect()
        return _engine


def hostspec(container_id: str, user: str = "root") -> str:
    return f"{NAME}://{user}@{container_id}"


class EngineBackend(BaseBackend):
    NAME = NAME

    def __init__(self, name: str, *args: Any, **kwargs: Any):
        self.name, self.user = self.parse_containerspec(name)
        super().__init__(self.name, *args, **kwargs)
        self._container = Container(_connection(), self.name, self.name[:12])

    def get_encoding(self) -> str:
        """testinfra asks the container's python3 for its locale (one more exec per host);
        checks read UTF-8 text, and ASCII, which a container without LANG reports, is a
        subset of it."""
        return "utf-8"

    def run(self, command: str, *args: str, prints: bool = False, **kwargs: Any) -> CommandResult:
        """`prints=True`: the command prints whenever it succeeds, so a success with no output
        is output the engine lost (Container.read_split asks again). Only for commands that
        can run twice: a login, a report; never one that starts a daemon."""
        cmd = self.get_command(command, *args)
        execute = self._container.read_split if prints else self._container.exec_split
        code, stdout, stderr = execute(["/bin/sh", "-c", cmd], user=self.user)
        return self.result(code, self.encode(cmd), stdout, stderr)
