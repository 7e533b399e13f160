"""What every layer ships, deleted files included, and what the image config carries (SEC):
private keys, build secrets, credentials. Evidence names the place and masks the secret."""

from __future__ import annotations

from imagekit.checks import check
from imagekit.checks.facts import expect
from imagekit.checks.layerscan import (
    CERTIFICATE,
    CREDENTIAL,
    KEY_NAMES,
    PRIVATE_KEY,
    sort_keys,
    where,
)
from imagekit.credentials import build_args, find, mask, secret_name
from imagekit.labels import LABEL_PREFIX

# -- security: what every layer ships -----------------------------------------------------


@check(
    "private-keys-in-layers",
    "SEC",
    "no undeclared private key material in any layer",
    fix="generate keys at run time, or mount them (Secret); declare baked keys in the recipe "
    "(ssh.user_keys: image / ssh.host_keys: build) or the profile",
    varies="keys the profile's `allow_keys_in_layers` lists pass with a warning",
)
def check_private_keys(ctx, note):
    found = [f for f in ctx.layers() if KEY_NAMES.search(f.path) or PRIVATE_KEY in f.findings]
    allowed = set(ctx.profile.allow_keys_in_layers)
    if ctx.declared("host-keys") == "build":
        allowed.add("host")
    if ctx.declared("user-keys") == "image":
        allowed.add("user")
    bad, declared, packaged = sort_keys(found, allowed)
    expect(not bad, "; ".join(bad))
    if declared:
        note("warn", "declared: " + "; ".join(declared))
    if packaged:
        note("info", "inside installed packages (public test fixtures): " + "; ".join(packaged))


@check(
    "build-secrets-in-layers",
    "SEC",
    "no build-only CA bundle, build files or credentials left in any layer",
    fix="pass CAs and credentials to builder stages only (imagekit build --ca-bundle); "
    "deleting a file in a later layer does not remove it from the image",
)
def check_build_secrets(ctx, note):
    bad = []
    for f in ctx.layers():
        if "imagekit-build" in f.path:
            bad.append(f"build file {where(f)}")
        elif CERTIFICATE in f.findings and (
            f.shadowed or f.path.startswith(("tmp/", "var/tmp/", "root/"))
        ):
            bad.append(f"build-only certificate {where(f)}")
    expect(not bad, "; ".join(bad))
    note("info", ctx.layer_source)


@check(
    "credentials-in-layers",
    "SEC",
    "no credentials in any layer: /etc (apt sources and auth, environment, profile.d), "
    "home directories, pip/conda/docker/npm/cloud CLI configs",
    fix="give credentials to the build only (an authenticated --index-url or --apt-mirror stays "
    "in builder stages) and mount them at run time (a Secret); a file deleted in a later layer "
    "still ships",
)
def check_credentials_in_layers(ctx):
    bad = []
    for f in ctx.layers():
        if "imagekit-build" in f.path:
            continue  # build-secrets-in-layers names those
        reasons = [x.removeprefix(CREDENTIAL) for x in f.findings if x.startswith(CREDENTIAL)]
        if reasons:
            bad.append(f"{where(f)}: {'; '.join(reasons)}")
    expect(not bad, "; ".join(bad))


@check(
    "credentials-in-config",
    "SEC",
    "no credentials in the image config: Env, Labels, and each layer's history (build args), "
    "by their shape and, for Env and build args, by a name that says secret",
    fix="never pass secrets as ENV, LABEL or build ARG: the legacy builder records build args "
    "in every RUN's history; mount them at run time (a Secret). A name that only sounds "
    "secret: env_not_secret in the recipe or the profile",
    varies="names in the profile's `env_not_secret` are not judged by name",
)
def check_credentials_in_config(ctx):
    bad = []
    allowed = frozenset(ctx.profile.env_not_secret) | frozenset(
        filter(None, (ctx.labels.get(f"{LABEL_PREFIX}.env-not-secret") or "").split(","))
    )
    for item in ctx.config.get("Env") or []:
        name, _, value = item.partition("=")
        bad += [f"Env {name}: {f.what} ({f.masked})" for f in find(value)]
        if value and not find(value) and secret_name(name, allowed):
            bad.append(f"Env {name}: the name says it holds a secret ({mask(value)})")
    for name, value in (ctx.config.get("Labels") or {}).items():
        for found in find(value):
            bad.append(f"Label {name}: {found.what} ({found.masked})")
    for index, entry in enumerate(reversed(ctx.history())):
        created = entry.get("CreatedBy") or ""
        for found in find(created):
            bad.append(f"history step {index}: {found.what} ({found.masked})")
        for name, value in build_args(created):
            if value and not find(value) and secret_name(name, allowed):
                bad.append(
                    f"history step {index}: build arg {name} says it holds a secret ({mask(value)})"
                )
    expect(not bad, "; ".join(bad))
