"""imagekit's data files (imagekit/data/: rules, profiles, probes), one fast YAML reader, and
the strict one that reads what users write (recipes, profile files).

Standard library and PyYAML only: `imagekit mpirun` reads the profiles on its start-up path.
The files are read from next to this module, where a wheel installs them (importlib.resources
would cost a few milliseconds of imports for the same file).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from imagekit.grammar import MAX_INPUT_FILE_BYTES

# Users' YAML (recipes, locks, profile files): at most this many bytes, and this many nodes
# once aliases are expanded. A "billion laughs" file is a few hundred bytes whose aliases
# expand to 10^9 nodes: the objects are shared, but whatever walks or prints the value
# (validation, an error's repr, the recipe hash) would never finish.
MAX_YAML_BYTES = MAX_INPUT_FILE_BYTES
MAX_YAML_NODES = 200_000

DATA_DIR = Path(__file__).parent / "data"

# libyaml's parser when PyYAML has it (5-10x faster; the constructor stays Python's).
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DuplicateKeyError(yaml.YAMLError):
    """YAML's last-one-wins would silently drop the first value of a repeated key."""


class YamlFloat(float):
    """A float read from a recipe, with the text it was written as: YAML reads an unquoted
    3.10 as the number 3.1, and the fix to suggest is "3.10", not "3.1"."""

    text: str


class UserYamlError(Exception):
    """A user's YAML file that cannot be read; the message names no file (callers add it)."""


class StrictLoader(SafeLoader):
    """yaml.safe_load, but a key given twice in one mapping is an error naming both lines,
    floats remember how they were written (YamlFloat), and aliases may not expand past
    MAX_YAML_NODES nodes, nor refer to themselves."""

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _check_expanded_size(node)
        return node

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


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded_size(root: yaml.Node) -> None:
    """Count the nodes `root` stands for with every alias expanded, without expanding them
    (each node is sized once), iteratively (no recursion limit for deep nesting)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > MAX_YAML_NODES:
                raise UserYamlError(
                    f"line {node.start_mark.line + 1}: its aliases expand to more than "
                    f"{MAX_YAML_NODES} values (an alias bomb?)"
                )
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise UserYamlError(f"line {node.start_mark.line + 1}: an alias refers to itself")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def read_user_text(path: Path, max_bytes: int = MAX_YAML_BYTES) -> str:
    """A file a user names, as UTF-8 text: a regular file (not /dev/zero, a FIFO that would
    block, a directory) of at most `max_bytes`. UserYamlError says what is wrong."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UserYamlError("no such file") from None
    except OSError as exc:
        raise UserYamlError(f"cannot read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserYamlError("not a regular file")
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise UserYamlError(f"cannot read: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise UserYamlError(f"larger than {max_bytes // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserYamlError(f"not UTF-8 text (byte {exc.start})") from None


def read_user_yaml(path: Path) -> Any:
    """A user's YAML file, read strictly (StrictLoader) within the size limits. Every way it
    can fail is one UserYamlError, its message naming the line where YAML gives one."""
    text = read_user_text(path)
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except (DuplicateKeyError, UserYamlError) as exc:
        raise UserYamlError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserYamlError(f"{where}malformed YAML: {problem}") from None
    except (ValueError, OverflowError) as exc:  # an integer of more than 4300 digits, ...
        raise UserYamlError(f"a value YAML cannot hold: {str(exc).splitlines()[0][:120]}") from None
    except RecursionError:
        raise UserYamlError("nested too deeply") from None


def load_yaml(text: str) -> Any:
    """yaml.safe_load with libyaml's parser."""
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 (a safe loader)


def data_text(name: str) -> str:
    return (DATA_DIR / name).read_text("utf-8")


def data_yaml(name: str) -> Any:
    return load_yaml(data_text(name))
