"""pydantic's validation errors as imagekit's one-line problems (`field.path: what is wrong`),
with "did you mean" for an unknown key: one wording for recipes, profiles and lock files."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from imagekit.grammar import shown as quoted


def problems(exc: ValidationError, model: type[BaseModel]) -> list[str]:
    """One line per error of `exc`, raised validating `model`: unknown keys first, since a
    misspelt key is usually why a field is "missing" too (pydantic lists those later)."""
    errors = sorted(exc.errors(), key=lambda err: err["type"] != "extra_forbidden")
    return [describe(err, model) for err in errors]


def one_line(problems: list[str], shown: int = 3) -> str:
    """Problems joined for a one-line error: the first `shown`, then how many more."""
    line = "; ".join(problems[:shown])
    return line + (f" (and {len(problems) - shown} more)" if len(problems) > shown else "")


def describe(err: dict[str, Any], model: type[BaseModel]) -> str:
    """One line, whatever the input: a key (an env name, say) may hold a newline itself."""
    return _describe(err, model).replace("\r", "\\r").replace("\n", "\\n")


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(err: dict[str, Any], model: type[BaseModel]) -> str:
    loc = [quoted(part) if isinstance(part, str) else str(part) for part in err["loc"]]
    field = ".".join(loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        return f"{field}: unknown key{_did_you_mean(loc, model)}"
    if err["type"] == "missing":
        return f"{field}: required field is missing"
    msg = err["msg"]
    msg = msg.removeprefix("Value error, ")
    value = err.get("input")
    if err["type"] == "string_type" and isinstance(value, int | float):
        # YAML reads 3.10 as the float 3.1: the most common recipe typo of all. A recipe's
        # floats remember how they were written (loader.YamlFloat); others show their value.
        written = getattr(value, "text", str(value))
        read_as = f"YAML reads {written} as the number {value!r}" if written != repr(value) else ""
        msg += f' ({read_as or f"got number {_short_repr(value)}"}; quote it in YAML: "{written}")'
    elif err["type"].endswith("_type"):
        kind = "float" if isinstance(value, float) else type(value).__name__
        msg += f" (got {kind} {_short_repr(value)})"
    return f"{field}: {msg}"


def _did_you_mean(loc: list[str], model: type[BaseModel]) -> str:
    """Suggest the nearest field name of the model that owns the unknown key."""
    for part in loc[:-1]:
        if part.isdigit():  # an item of a list of models: the same model
            continue
        field = model.model_fields.get(part)
        inner = _model_of(field.annotation) if field else None
        if inner is None:
            return ""
        model = inner
    matches = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1, cutoff=0.6)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found:
            return found
    return None
