"""Reference tables generated from the code, for `imagekit requirements` and the docs site
(docs/hooks.py puts them into their pages at build time): no hand copy can drift."""

from __future__ import annotations

import inspect
import json
from typing import Any


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def checks_table() -> str:
    """Every check: ID, requirement, what it proves, how profiles change it, its fix."""
    from imagekit.checks.catalog import catalog

    rows = [
        "| check | req | what is proven | under which profiles | fix |",
        "| --- | --- | --- | --- | --- |",
    ]
    rows += [
        f"| `{e.id}` | {e.requirement} | {_cell(e.title)} | {_cell(e.varies)} | {_cell(e.fix)} |"
        for e in catalog()
    ]
    return "\n".join(rows) + "\n"


def recipe_fields_table() -> str:
    """Every recipe field from the JSON Schema: path, type, default, description."""
    from imagekit.recipe.model import json_schema

    schema = json_schema()
    rows = ["| field | type | default | description |", "| --- | --- | --- | --- |"]
    for path, spec, required in _fields(schema, schema, ""):
        default = "required" if required else _shown_default(spec)
        rows.append(
            f"| `{path}` | {_cell(_type(spec, schema))} | {_cell(default)} | "
            f"{_cell(spec.get('description', ''))} |"
        )
    return "\n".join(rows) + "\n"


def _resolve(spec: dict, schema: dict) -> dict:
    if "$ref" in spec:
        return schema["$defs"][spec["$ref"].rsplit("/", 1)[1]]
    for key in ("anyOf", "allOf"):
        for option in spec.get(key, []):
            if "$ref" in option:
                return schema["$defs"][option["$ref"].rsplit("/", 1)[1]]
    return spec


def _fields(node: dict, schema: dict, prefix: str):
    required = set(node.get("required", []))
    for name, spec in node.get("properties", {}).items():
        path = f"{prefix}{name}"
        target = _resolve(spec, schema)
        if target.get("properties"):
            yield path, {**target, **spec}, name in required
            yield from _fields(target, schema, f"{path}.")
        else:
            yield path, spec, name in required


def _type(spec: dict, schema: dict) -> str:
    if "enum" in spec:
        return ", ".join(json.dumps(v) for v in spec["enum"])
    if "const" in spec:
        return json.dumps(spec["const"])
    options = spec.get("anyOf")
    if options:
        return " or ".join(
            _type(_resolve(o, schema) if "$ref" in o else o, schema) for o in options
        )
    kind = spec.get("type", "object" if "$ref" in spec or "properties" in spec else "")
    if kind == "array" and "items" in spec:
        return f"list of {_type(_resolve(spec['items'], schema), schema)}"
    return kind or "value"


def _shown_default(spec: dict) -> str:
    if "default" not in spec:
        return ""
    value = spec["default"]
    if isinstance(value, dict) and len(json.dumps(value)) > 60:
        return "(see its fields)"
    return f"`{json.dumps(value)}`"


def profiles_table() -> str:
    """Every built-in profile: its description and the fields it sets."""
    from imagekit.profiles import builtin_profiles

    rows = ["| profile | what it is | fields |", "| --- | --- | --- |"]
    for name, profile in builtin_profiles().items():
        fields = profile.model_dump(
            mode="json", exclude_defaults=True, exclude={"name", "description"}
        )
        shown = ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in fields.items()) or "defaults"
        rows.append(f"| `{name}` | {_cell(profile.description)} | {_cell(shown)} |")
    return "\n".join(rows) + "\n"


def exit_codes_table() -> str:
    """Each exit code and the errors that end with it, from imagekit/errors.py."""
    from imagekit import errors

    by_code: dict[int, list[str]] = {0: ["success"]}
    for name, cls in vars(errors).items():
        if inspect.isclass(cls) and issubclass(cls, errors.ImagekitError) and cls.__doc__:
            if name in ("Interrupted", "RegistryError"):  # a signal's code (below); publish's
                continue  # own wording of a registry's answer, always raised as another
            code = cls.exit_code
            if isinstance(code, int):
                doc = " ".join((cls.__doc__ or "").split()).split(". ")[0].rstrip(".")
                by_code.setdefault(code, []).append(f"`{name}`: {doc}")
    for signal in ("SIGHUP", "SIGINT", "SIGTERM"):
        by_code.setdefault(errors.EXIT_CODES[signal], []).append(
            f"stopped by {signal}; what the run made is removed"
        )
    rows = ["| code | meaning |", "| --- | --- |"]
    rows += [
        f"| {code} | {_cell('; '.join(meanings))} |" for code, meanings in sorted(by_code.items())
    ]
    return "\n".join(rows) + "\n"


TABLES = {
    "checks": checks_table,
    "recipe-fields": recipe_fields_table,
    "profiles": profiles_table,
    "exit-codes": exit_codes_table,
}
