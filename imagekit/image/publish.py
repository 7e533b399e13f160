"""`imagekit publish`: push a checked image to a registry, version tag first, moving tags
only after it, and write a record of what was pushed (for CI artifacts and digest pins).

Version tags are immutable: a tag that already points at a different image is refused
unless forced. Transient registry errors are retried with backoff; auth errors are not.
The registry itself refuses a manifest whose blobs are missing, and the manifest (the tag)
is written only after every blob is in, so an interrupted push never moves a tag.

Several images, one per platform (linux/amd64, linux/arm64), are published as one image
index: each image under a platform tag (`TAG-amd64`, `TAG-arm64`), then the index, written
through the registry API, under the version and moving tags, so a pull on either
architecture gets its own image. The record lists every platform's digest."""

from __future__ import annotations

import json
import re
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from imagekit.build.plan import LABEL_PREFIX
from imagekit.engine.client import Engine, Message, Reporter, split_ref
from imagekit.engine.registry import INDEX_FOR, RegistryClient
from imagekit.errors import (
    PublishAuthError,
    PublishError,
    PublishRefusedError,
    RegistryError,
    UsageError,
)
from imagekit.files import write_json_atomic
from imagekit.grammar import REF_COMPONENT, REF_TAG
from imagekit.platforms import PLATFORMS, architecture, without_tag_suffix

RECORD_SCHEMA = "imagekit.publish-record/v1"


@dataclass(frozen=True)
class PublishOptions:
    registry: str  # host[:port][/namespace]
    tags: tuple[str, ...] = ()  # extra version tags; default: the image's own tag
    moving_tags: tuple[str, ...] = ()
    require_check: bool = False
    check_reports: tuple[Path, ...] = ()  # one per image (matched by image ID)
    force: bool = False
    record: Path | None = None
    retries: int = 3
    backoff: float = 2.0


@dataclass
class PlatformRecord:
    """One image of a multi-platform publish: its platform tag and manifest digest."""

    platform: str
    tag: str
    digest: str
    image_id: str
    check_passed: bool | None


@dataclass
class PublishRecord:
    schema: str
    repository: str
    version_tags: list[str]
    moving_tags: list[str]
    digest: str  # the manifest's, or for several platforms the index's
    image_id: str | None  # None for an index: each platform's is in `platforms`
    recipe: str | None
    recipe_sha256: str | None
    check_report: str | None
    check_passed: bool | None
    pushed_at: str
    references: list[str] = field(default_factory=list)
    platforms: list[PlatformRecord] = field(default_factory=list)


@dataclass(frozen=True)
class _Image:
    ref: str
    info: dict

    @property
    def id(self) -> str:
        return self.info["Id"]

    @property
    def platform(self) -> str:
        return f"{self.info.get('Os')}/{self.info.get('Architecture')}"


@dataclass(frozen=True)
class _Push:
    """Where one publish goes and how: what every step below takes."""

    engine: Engine
    client: RegistryClient
    repository: str
    options: PublishOptions
    report: Reporter


def check_verdicts(
    reports: tuple[Path, ...], image_ids: list[str], required: bool
) -> dict[str, bool | None]:
    """Each image's verdict from the check reports given (matched by image ID): None where
    none was given. With `required`, every image needs a report, and a passing one."""
    if not reports and required:
        raise PublishRefusedError(
            "refusing to publish without a check report (--require-check)",
            hint="run `imagekit check IMAGE --report check.json` and pass --check-report",
        )
    verdicts: dict[str, bool | None] = dict.fromkeys(image_ids)
    for report in reports:
        image_id, passed = _read_report(report)
        if image_id not in verdicts:
            which = "this image" if len(image_ids) == 1 else "any of these images"
            raise PublishRefusedError(
                f"--check-report {report}: it checked {image_id}, not {which} "
                f"({', '.join(i[:19] for i in image_ids)})"
            )
        verdicts[image_id] = passed
        if required and not passed:
            raise PublishRefusedError(f"--check-report {report}: the image failed its checks")
    missing = [i for i, v in verdicts.items() if v is None]
    if required and missing:
        raise PublishRefusedError(
            f"refusing to publish without a check report for {missing[0][:19]} (--require-check)",
            hint="pass one --check-report per image",
        )
    return verdicts


def _read_report(report: Path) -> tuple[str, bool]:
    try:
        body = json.loads(report.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--check-report {report}: no such file") from None
    except (OSError, ValueError):
        raise UsageError(f"--check-report {report}: not a JSON check report") from None
    if not isinstance(body, dict) or body.get("schema") != "imagekit.check-report/v1":
        raise UsageError(f"--check-report {report}: not an imagekit check report")
    return str(body.get("image_id")), bool(body.get("passed"))


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


def publish(images: tuple[str, ...], options: PublishOptions, report: Reporter) -> PublishRecord:
    """One image: pushed under its tags. Several (one per platform): each pushed under a
    platform tag, then one image index under the version and moving tags."""
    registry = check_options(options)
    engine = Engine.connect()
    found = [_Image(ref, engine.inspect_image(ref)) for ref in images]
    if len(found) > 1:
        _one_image_per_known_platform(found)
    verdicts = check_verdicts(
        options.check_reports, [image.id for image in found], options.require_check
    )
    name, _ = split_ref(found[0].ref)
    repository = f"{registry}/{name.rsplit('/', 1)[-1]}"
    push = _Push(engine, RegistryClient.for_repository(repository), repository, options, report)
    if len(found) == 1:
        record = _publish_image(push, found[0], verdicts)
    else:
        record = _publish_index(push, found, verdicts)
    if options.record is not None:
        write_record(record, options.record)
    return record


def _one_image_per_known_platform(found: list[_Image]) -> None:
    seen: dict[str, str] = {}
    for image in found:
        if image.platform not in PLATFORMS:
            raise UsageError(
                f"{image.ref}: its config says {image.platform!r}; an index here "
                f"holds {', '.join(PLATFORMS)}"
            )
        if image.platform in seen:
            raise UsageError(
                f"{seen[image.platform]} and {image.ref} are both {image.platform}: "
                "an index holds one image per platform"
            )
        seen[image.platform] = image.ref


def _publish_image(push: _Push, image: _Image, verdicts: dict) -> PublishRecord:
    options = push.options
    version_tags = list(options.tags or (split_ref(image.ref)[1],))
    for tag in version_tags:  # immutability first: nothing is pushed if a tag would move
        _refuse_to_move(push, tag, image.id)
    digest = ""
    with _local_tags(push, (*version_tags, *options.moving_tags)):
        for tag in version_tags:
            digest = _push_with_retries(push, image.id, tag)
        for tag in options.moving_tags:  # moved only once every version tag is in
            _push_with_retries(push, image.id, tag)
    return _record(
        push,
        version_tags,
        digest=digest,
        image_id=image.id,
        labels=image.info["Config"].get("Labels") or {},
        check_passed=verdicts[image.id],
    )


def _publish_index(push: _Push, found: list[_Image], verdicts: dict) -> PublishRecord:
    options, repository = push.options, push.repository
    version_tags = list(options.tags or (_common_tag(found),))
    platform_tags = {i.platform: f"{version_tags[0]}-{architecture(i.platform)}" for i in found}
    wanted = {image.platform: image.id for image in found}
    for image in found:  # immutability first, for the platform tags and the index tags
        _refuse_to_move(push, platform_tags[image.platform], image.id)
    for tag in version_tags:
        _refuse_to_move(push, tag, wanted)
    entries: list[PlatformRecord] = []
    with _local_tags(push, tuple(platform_tags.values())):
        for image in sorted(found, key=lambda i: PLATFORMS.index(i.platform)):
            tag = platform_tags[image.platform]
            digest = _push_with_retries(push, image.id, tag)
            entries.append(
                PlatformRecord(image.platform, tag, digest, image.id, verdicts[image.id])
            )
    media_type, body = _index_body(push.client, repository, entries)
    digest = ""
    for tag in (*version_tags, *options.moving_tags):  # moving tags after every version tag
        digest = _put_index(push, tag, media_type, body)
        push.report(
            Message(f"pushed {repository}:{tag} (index of {len(entries)} platforms, {digest})")
        )
    passed = [e.check_passed for e in entries]
    return _record(
        push,
        version_tags,
        digest=digest,
        image_id=None,
        labels=found[0].info["Config"].get("Labels") or {},
        check_passed=None if None in passed else all(passed),
        platforms=entries,
    )


def _common_tag(found: list[_Image]) -> str:
    """The version tag the images share once each one's platform suffix is taken off."""
    tags = set()
    for image in found:
        tags.add(without_tag_suffix(split_ref(image.ref)[1], image.platform))
    if len(tags) != 1:
        raise UsageError(
            f"the images' tags differ ({', '.join(sorted(tags))}): name the index's with --tag"
        )
    return tags.pop()


def _index_body(client, repository: str, entries: list[PlatformRecord]) -> tuple[str, bytes]:
    manifests, types = [], set()
    for entry in entries:
        try:
            descriptor = client.descriptor(entry.digest)
        except RegistryError as exc:
            raise _classify(exc, f"{repository}@{entry.digest}") from None
        if descriptor is None or descriptor.media_type not in INDEX_FOR:
            raise PublishError(f"{repository}@{entry.digest}: the pushed manifest is not there")
        types.add(descriptor.media_type)
        os_name, arch = entry.platform.split("/", 1)
        manifests.append(
            {
                "mediaType": descriptor.media_type,
                "digest": descriptor.digest,
                "size": descriptor.size,
                "platform": {"architecture": arch, "os": os_name},
            }
        )
    if len(types) != 1:
        raise PublishError(f"{repository}: the pushed manifests mix media types {sorted(types)}")
    media_type = INDEX_FOR[types.pop()]
    index = {"schemaVersion": 2, "mediaType": media_type, "manifests": manifests}
    return media_type, json.dumps(index, indent=3).encode()


def _put_index(push: _Push, tag: str, media_type: str, body: bytes) -> str:
    try:
        return push.client.put_manifest(tag, media_type, body)
    except RegistryError as exc:
        raise _classify(exc, f"{push.repository}:{tag}") from None


def _refuse_to_move(push: _Push, tag: str, wanted: str | dict[str, str]) -> None:
    """Version tags are immutable: one that points elsewhere (another image, an index where
    an image goes, or the reverse) is refused before anything is pushed, unless forced."""
    existing = _existing(push, tag)
    if existing is not None and existing != wanted and not push.options.force:
        if isinstance(existing, str):
            what = f"another image ({existing[:19]})"
        elif isinstance(wanted, str):
            what = f"an index ({', '.join(sorted(existing))})"
        else:
            what = "an index of other images"
        raise PublishRefusedError(
            f"{push.repository}:{tag} already points at {what}; "
            "version tags are immutable (use --force to overwrite)"
        )


def _existing(push: _Push, tag: str) -> str | dict[str, str] | None:
    """What `tag` points at: None, an image ID, or an index's image ID per platform."""
    try:
        configs = push.client.index_configs(tag)
        if configs == {}:  # one image's manifest
            return push.client.config_digest(tag)
        return configs
    except RegistryError as exc:
        raise _classify(exc, f"{push.repository}:{tag}") from None


@contextmanager
def _local_tags(push: _Push, tags: tuple[str, ...]):
    """`docker push` pushes a local tag: the ones made for it here go again on the way out
    (success, failure or a signal), so publishing leaves the engine's tags as it found them."""
    made = [f"{push.repository}:{t}" for t in tags]
    made = [ref for ref in made if not push.engine.image_exists(ref)]
    try:
        yield
    finally:
        for ref in made:
            push.engine.remove_image_tag(ref)


def _record(push: _Push, version_tags: list[str], **found) -> PublishRecord:
    labels = found.pop("labels")
    repository, options = push.repository, push.options
    reports = options.check_reports
    return PublishRecord(
        schema=RECORD_SCHEMA,
        repository=repository,
        version_tags=version_tags,
        moving_tags=list(options.moving_tags),
        recipe=labels.get(f"{LABEL_PREFIX}.recipe"),
        recipe_sha256=labels.get(f"{LABEL_PREFIX}.recipe-sha256"),
        check_report=", ".join(str(r) for r in reports) if reports else None,
        pushed_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        references=[f"{repository}@{found['digest']}"]
        + [f"{repository}:{t}" for t in version_tags + list(options.moving_tags)],
        **found,
    )


def _push_with_retries(push: _Push, image_id: str, tag: str) -> str:
    engine, repository, options, report = push.engine, push.repository, push.options, push.report
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
