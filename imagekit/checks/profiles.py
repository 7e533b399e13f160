"""Profiles are data (data/profiles.yaml, or a user's YAML file), validated here."""

from __future__ import annotations

import difflib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from imagekit.errors import UsageError


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    description: str = ""
    port: int = Field(22, ge=1, le=65535)
    user_keys: tuple[Literal["image", "mounted"], ...] = ("image", "mounted")
    run_as_root: Literal["flag", "env"] = "flag"
    allow_keys_in_layers: tuple[Literal["host", "user"], ...] = ()


@cache
def builtin_profiles() -> dict[str, Profile]:
    text = resources.files("imagekit").joinpath("data/profiles.yaml").read_text("utf-8")
    return {name: Profile(name=name, **body) for name, body in yaml.safe_load(text).items()}


def load_profile(name_or_path: str) -> Profile:
    profiles = builtin_profiles()
    if name_or_path in profiles:
        return profiles[name_or_path]
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        near = difflib.get_close_matches(name_or_path, list(profiles), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UsageError(
            f"--profile {name_or_path}: no such profile{hint}; "
            f"built in: {', '.join(profiles)}, or a .yaml file"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return Profile(name=data.pop("name", path.stem), **data)
    except FileNotFoundError:
        raise UsageError(f"--profile {path}: no such file") from None
    except (yaml.YAMLError, TypeError) as exc:
        raise UsageError(f"--profile {path}: not a profile mapping: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"--profile {path}: {field}: {first['msg']}") from None
