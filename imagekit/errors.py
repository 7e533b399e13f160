"""One error hierarchy and every exit code, in one place (the docs' exit-code page is generated from this file).

The CLI catches ImagekitError once and exits with its code. Verdicts (a check that failed,
a smoke run whose ranks landed wrong, a lint error) are errors too, so CI can gate on the
exit code alone.
"""

from __future__ import annotations

# Exit codes of signals, as shells report them (128 + signal number).
EXIT_SIGHUP = 129
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class ImagekitError(Exception):
    """Any other error: one line, never a traceback (`imagekit --debug` shows one). Base of
    every error a user can cause or fix."""

    exit_code = 1
    # Whether a traceback could help (engine/build trouble), or the message says it all.
    debug_tip = True

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class RecipeError(ImagekitError):
    """A recipe (or a flag standing in for one) is invalid: one line per problem (file, field,
    what is wrong). At most MAX_SHOWN are shown, then a count of the rest."""

    exit_code = 2
    debug_tip = False
    MAX_SHOWN = 10

    def __init__(self, problems: list[str]):
        shown = problems[: self.MAX_SHOWN]
        if len(problems) > self.MAX_SHOWN:
            shown = [*shown, f"... and {len(problems) - self.MAX_SHOWN} more"]
        super().__init__("\n".join(shown))
        self.problems = problems


class UsageError(ImagekitError):
    """A command-line flag or argument is wrong."""

    exit_code = 2
    debug_tip = False


class StaleRenderError(ImagekitError):
    """A committed render differs from what the recipe renders to now."""

    exit_code = 3
    debug_tip = False


class EngineError(ImagekitError):
    """The Docker engine failed or went away in the middle of a command: no verdict, and
    `imagekit clean` removes what the run left."""

    exit_code = 4


class EngineUnavailableError(EngineError):
    """The Docker engine cannot be reached."""


class BuildError(ImagekitError):
    """A build step failed; no tag was created or moved."""

    exit_code = 5


class ImageNotFoundError(ImagekitError):
    """The image asked for does not exist in the engine."""

    exit_code = 6
    debug_tip = False


class ImageUnusableError(ImagekitError):
    """The image exists but cannot run a command at all: no /bin/sh (distroless, scratch),
    or built for another CPU architecture. Nothing an MPIJob or a check does can start."""

    exit_code = 6
    debug_tip = False

    def __init__(self, image: str, reason: str):
        super().__init__(f"image {image}: {reason}")
        self.reason = reason


class CheckFailedError(ImagekitError):
    """An image failed at least one required compliance check."""

    exit_code = 7
    debug_tip = False


class BootstrapError(ImagekitError):
    """A local base image could not be bootstrapped."""

    exit_code = 8


class SmokeFailedError(ImagekitError):
    """The MPIJob did not run as the hostfile says (smoke prints its diagnosis)."""

    exit_code = 9
    debug_tip = False


class LintFailedError(ImagekitError):
    """`imagekit lint-cmd` found an error-level problem in a launch line."""

    exit_code = 10
    debug_tip = False


class PublishError(ImagekitError):
    """The push failed; the registry may hold blobs but no tag moved."""

    exit_code = 11


class PublishAuthError(PublishError):
    """The registry refused our credentials; never retried."""

    exit_code = 12
    debug_tip = False


class PublishRefusedError(PublishError):
    """Publishing was refused before anything was pushed: no passing check report, or an
    immutable tag would move."""

    exit_code = 13
    debug_tip = False


class LockError(ImagekitError):
    """A lock file is missing, stale, malformed, or pins something that no longer exists."""

    exit_code = 14
    debug_tip = False


class RegistryError(PublishError):
    """What a registry (or the engine pushing to it) said. `publish` classifies it into
    PublishAuthError or a retried PublishError; anywhere else it is a PublishError."""

    def __init__(self, message: str, *, auth: bool = False, transient: bool = True):
        super().__init__(message)
        self.auth = auth
        self.transient = transient


class OutputError(ImagekitError):
    """A file or directory the user asked for (-o, --report, --report-dir, --record, a lock
    file) could not be written, named with its path; what was there before is kept (the
    writes are atomic). A missing or read-only directory, a file where a directory must be,
    a full disk."""

    exit_code = 15
    debug_tip = False


class Interrupted(ImagekitError):
    """A signal (Ctrl-C, SIGTERM, SIGHUP) stopped the command; what it made is removed."""

    debug_tip = False

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


# name -> exit code, for the exit-code reference and its test.
EXIT_CODES = {
    "ok": 0,
    "error": ImagekitError.exit_code,
    "bad input": RecipeError.exit_code,
    "stale render": StaleRenderError.exit_code,
    "engine": EngineError.exit_code,
    "build": BuildError.exit_code,
    "image not found": ImageNotFoundError.exit_code,
    "check failed": CheckFailedError.exit_code,
    "bootstrap": BootstrapError.exit_code,
    "smoke failed": SmokeFailedError.exit_code,
    "lint": LintFailedError.exit_code,
    "publish": PublishError.exit_code,
    "publish auth": PublishAuthError.exit_code,
    "publish refused": PublishRefusedError.exit_code,
    "lock": LockError.exit_code,
    "cannot write": OutputError.exit_code,
    "SIGHUP": EXIT_SIGHUP,
    "SIGINT": EXIT_SIGINT,
    "SIGTERM": EXIT_SIGTERM,
}
