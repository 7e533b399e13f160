"""One error hierarchy; the CLI catches ImagekitError once and exits with its code."""

from __future__ import annotations


class ImagekitError(Exception):
    """Base of every error a user can cause or fix. Never shown with a traceback."""

    exit_code = 1
    # Whether a traceback could help (engine/build trouble), or the message says it all.
    debug_tip = True

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class RecipeError(ImagekitError):
    """A recipe (or a flag standing in for one) is invalid. Carries one line per problem."""

    exit_code = 2
    debug_tip = False

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


class UsageError(ImagekitError):
    """A command-line flag or argument is wrong."""

    exit_code = 2
    debug_tip = False


class StaleRenderError(ImagekitError):
    """A committed render differs from what the recipe renders to now."""

    exit_code = 3
    debug_tip = False


class EngineUnavailableError(ImagekitError):
    """The Docker engine cannot be reached."""

    exit_code = 4


class BuildError(ImagekitError):
    """A build step failed; no tag was created or moved."""

    exit_code = 5


class ImageNotFoundError(ImagekitError):
    """The image asked for does not exist in the engine."""

    exit_code = 6
    debug_tip = False


class CheckFailedError(ImagekitError):
    """An image failed at least one required compliance check."""

    exit_code = 7
    debug_tip = False


class BootstrapError(ImagekitError):
    """A local base image could not be bootstrapped."""

    exit_code = 8


class LintFailedError(ImagekitError):
    """`imagekit lint-cmd` found an error-level problem in a launch line."""

    exit_code = 10
    debug_tip = False
