"""imagekit's data files (imagekit/data/: rules, profiles, probes), one fast YAML reader, and
the strict one that reads what users write (recipes, profile files).

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


class DuplicateKeyError(yaml.YAMLError):
    """YAML's last-one-wins would silently drop the first value of a repeated key."""


class YamlFloat(float):
    """A float read from a recipe, with the text it was written as: YAML reads an unquoted
    3.10 as the number 3.1, and the fix to suggest is "3.10", not "3.1"."""

    text: str


class StrictLoader(SafeLoader):
    """yaml.safe_load, but a key given twice in one mapping is an error naming both lines,
    and floats remember how they were written (YamlFloat)."""

    def construct_yaml_float(self, node):
        value = YamlFloat(super().construct_yaml_float(node))
        value.text = str(node.value)
        return value

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[object, int] = {}
            for key_node, _ in node.value:  # before `<<` merges, which may be overridden
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the schema reports it
                    continue
                if first is not None:
                    raise DuplicateKeyError(
                        f"line {line}: key {key!r} given twice (first on line {first}); "
                        "YAML would silently keep only the last one"
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)


def load_yaml(text: str) -> Any:
    """yaml.safe_load with libyaml's parser."""
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 (a safe loader)


def data_text(name: str) -> str:
    return (DATA_DIR / name).read_text("utf-8")


def data_yaml(name: str) -> Any:
    return load_yaml(data_text(name))
