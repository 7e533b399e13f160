"""`imagekit publish`: push a checked image to a registry, version tag first, moving tags
only after it, and write a record of what was pushed (for CI artifacts and digest pins).

Version tags are immutable: a tag that already points at a different image is refused
unless forced. Transient registry errors are retried with backoff; auth errors are not.
The registry itself refuses a manifest whose blobs are missing, and the manifest (the tag)
is written only after every blob is in, so an interrupted push never moves a tag."""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from imagekit.build.plan import LABEL_PREFIX
from imagekit.engine.client import Engine, Message, Reporter, split_ref
from imagekit.engine.registry import RegistryClient
from imagekit.errors import (
    PublishAuthError,
    PublishError,
    PublishRefusedError,
    RegistryError,
    UsageError,
)
from imagekit.files import write_json_atomic
from imagekit.grammar import REF_COMPONENT, REF_TAG

RECORD_SCHEMA = "imagekit.publish-record/v1"


@dataclass(frozen=True)
class PublishOptions:
    registry: str  # host[:port][/namespace]
    tags: tuple[str, ...] = ()  # extra version tags; default: the image's own tag
    moving_tags: tuple[str, ...] = ()
    require_check: bool = False
    check_report: Path | None = None
    force: bool = False
    record: Path | None = None
    retries: int = 3
    backoff: float = 2.0


@dataclass
class PublishRecord:
    schema: str
    repository: str
    version_tags: list[str]
    moving_tags: list[str]
    digest: str
    image_id: str
    recipe: str | None
    recipe_sha256: str | None
    check_report: str | None
    check_passed: bool | None
    pushed_at: str
    references: list[str] = field(default_factory=list)


def check_report_verdict(report: Path | None, image_id: str, required: bool) -> bool | None:
    if report is None:
        if required:
            raise PublishRefusedError(
                "refusing to publish without a check report (--require-check)",
                hint="run `imagekit check IMAGE --report check.json` and pass --check-report",
            )
        return None
    try:
        body = json.loads(report.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--check-report {report}: no such file") from None
    except ValueError:
        raise UsageError(f"--check-report {report}: not a JSON check report") from None
    if body.get("schema") != "imagekit.check-report/v1":
        raise UsageError(f"--check-report {report}: not an imagekit check report")
    if body.get("image_id") != image_id:
        raise PublishRefusedError(
            f"--check-report {report}: it checked {body.get('image_id')}, "
            f"not this image ({image_id})"
        )
    if required and not body.get("passed"):
        raise PublishRefusedError(f"--check-report {report}: the image failed its checks")
    return bool(body.get("passed"))


# host[:port][/namespace...], as a Docker reference spells it: no scheme, no credentials.
_REGISTRY = re.compile(
    r"(?P<host>[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?)(?::(?P<port>[0-9]{1,5}))?"
    rf"(?:/{REF_COMPONENT})*"
)


def check_options(options: PublishOptions) -> str:
    """The registry without a trailing slash, once every flag is one the push can use:
    bad input is one line and exit 2 before the engine or the registry is asked anything."""
    registry = options.registry.rstrip("/")
    match = _REGISTRY.fullmatch(registry)
    if match is None or (match["port"] and not 0 < int(match["port"]) < 65536):
        scheme = " (no scheme: imagekit speaks https, and http to a registry on this machine)"
        raise UsageError(
            f"--registry {options.registry!r}: expected HOST[:PORT][/NAMESPACE]"
            + (scheme if "://" in options.registry else "")
        )
    for flag, tags in (("--tag", options.tags), ("--moving-tag", options.moving_tags)):
        for tag in tags:
            if not re.fullmatch(REF_TAG, tag):
                raise UsageError(
                    f"{flag} {tag!r}: not a valid tag (letters, digits, '_', '.', '-'; "
                    "at most 128, not starting with '.' or '-')"
                )
    return registry


def publish(image: str, options: PublishOptions, report: Reporter) -> PublishRecord:
    registry = check_options(options)
    engine = Engine.connect()
    info = engine.inspect_image(image)
    labels = info["Config"].get("Labels") or {}
    passed = check_report_verdict(options.check_report, info["Id"], options.require_check)
    name, own_tag = split_ref(image)
    repository = f"{registry}/{name.rsplit('/', 1)[-1]}"
    version_tags = list(options.tags or (own_tag,))
    client = RegistryClient.for_repository(repository)

    for tag in version_tags:  # immutability first: nothing is pushed if a tag would move
        existing = _existing_config(client, repository, tag)
        if existing is not None and existing != info["Id"] and not options.force:
            raise PublishRefusedError(
                f"{repository}:{tag} already points at another image ({existing[:19]}); "
                "version tags are immutable (use --force to overwrite)"
            )
    digest = ""
    # `docker push` pushes a local tag: the ones made for it here go again on the way out
    # (success, failure or a signal), so publishing leaves the engine's tags as it found them.
    made = [f"{repository}:{t}" for t in (*version_tags, *options.moving_tags)]
    made = [ref for ref in made if not engine.image_exists(ref)]
    try:
        for tag in version_tags:
            digest = _push_with_retries(engine, info["Id"], repository, tag, options, report)
        for tag in options.moving_tags:  # moved only once every version tag is in
            _push_with_retries(engine, info["Id"], repository, tag, options, report)
    finally:
        for ref in made:
            engine.remove_image_tag(ref)
    record = PublishRecord(
        schema=RECORD_SCHEMA,
        repository=repository,
        version_tags=version_tags,
        moving_tags=list(options.moving_tags),
        digest=digest,
        image_id=info["Id"],
        recipe=labels.get(f"{LABEL_PREFIX}.recipe"),
        recipe_sha256=labels.get(f"{LABEL_PREFIX}.recipe-sha256"),
        check_report=str(options.check_report) if options.check_report else None,
        check_passed=passed,
        pushed_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        references=[f"{repository}@{digest}"]
        + [f"{repository}:{t}" for t in version_tags + list(options.moving_tags)],
    )
    if options.record is not None:
        write_record(record, options.record)
    return record


def _existing_config(client: RegistryClient, repository: str, tag: str) -> str | None:
    try:
        return client.config_digest(tag)
    except RegistryError as exc:
        raise _classify(exc, f"{repository}:{tag}") from None


def _push_with_retries(
    engine: Engine,
    image_id: str,
    repository: str,
    tag: str,
    options: PublishOptions,
    report: Reporter,
) -> str:
    engine.tag(image_id, f"{repository}:{tag}")
    for attempt in range(1, options.retries + 1):
        try:
            digest = engine.push(repository, tag, report)
            report(Message(f"pushed {repository}:{tag} ({digest})"))
            return digest
        except RegistryError as exc:
            error = _classify(exc, f"{repository}:{tag}")
            if isinstance(error, PublishAuthError) or attempt == options.retries:
                raise error from None
            wait = options.backoff * 2 ** (attempt - 1)
            report(
                Message(
                    f"push of {repository}:{tag} failed ({exc}); retry {attempt} in {wait:.0f}s"
                )
            )
            time.sleep(wait)
    raise AssertionError("unreachable")


def _classify(exc: RegistryError, ref: str) -> PublishError:
    if exc.auth:
        return PublishAuthError(
            f"{ref}: the registry refused the credentials: {exc}",
            hint="docker login REGISTRY (credentials are read from "
            "~/.docker/config.json, or DOCKER_CONFIG)",
        )
    return PublishError(f"{ref}: push failed: {exc}")


def write_record(record: PublishRecord, path: Path) -> Path:
    return write_json_atomic(path, asdict(record))
