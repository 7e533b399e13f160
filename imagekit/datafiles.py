"""imagekit's data files (imagekit/data/: rules, profiles, probes) and one fast YAML reader.

Standard library and PyYAML only: `imagekit mpirun` reads the profiles on its start-up path.
The files are read from next to this module, where a wheel installs them (importlib.resources
would cost a few milliseconds of imports for the same file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).parent / "data"

# libyaml's parser when PyYAML has it (5-10x faster; the constructor stays Python's).
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """yaml.safe_load with libyaml's parser."""
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 (a safe loader)


def data_text(name: str) -> str:
    return (DATA_DIR / name).read_text("utf-8")


def data_yaml(name: str) -> Any:
    return load_yaml(data_text(name))
