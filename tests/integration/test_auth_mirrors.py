"""A build behind an apt mirror and a pip index that both want credentials: it builds through
them (they refuse anything else), and no layer, history line, label or env of the image
holds the credentials (issue: credentials never reach an image)."""

from __future__ import annotations

import json
import shutil

import pytest

from imagekit.build.lockfile import lock_path

from .authmirror import AuthMirror, leaks
from .conftest import CPU_RECIPE, build_env, imagekit

# Built from pieces so this file holds no credential-shaped string of its own.
APT_PASSWORD = "apt" + "-s3cr3t-" + "T0ken"
PIP_PASSWORD = "pip" + "-s3cr3t-" + "T0ken"
REF = "imagekit-test/auth-mirrors:1"


@pytest.fixture
def mirrors(engine, tmp_path):
    gateway, _ = engine.bridge_gateway()
    apt = AuthMirror(gateway, "http://deb.debian.org/debian", "/debian", "builder", APT_PASSWORD)
    pip = AuthMirror(gateway, "https://pypi.org/simple", "/simple", "builder", PIP_PASSWORD)
    bundle = pip.use_tls(tmp_path)  # pip ignores a plain-http index it is not told to trust
    with apt, pip:
        yield apt, pip, bundle


@pytest.fixture
def tls_mirrors(engine, tmp_path):
    """Both mirrors on https with certificates of their own (a private CA's, as far as the
    build can tell), and one bundle that trusts the host's CAs and both of them."""
    gateway, _ = engine.bridge_gateway()
    apt = AuthMirror(gateway, "http://deb.debian.org/debian", "/debian", "builder", APT_PASSWORD)
    pip = AuthMirror(gateway, "https://pypi.org/simple", "/simple", "builder", PIP_PASSWORD)
    (tmp_path / "apt").mkdir()
    (tmp_path / "pip").mkdir()
    apt.use_tls(tmp_path / "apt")
    bundle = pip.use_tls(tmp_path / "pip")
    certificate = (tmp_path / "apt" / "mirror.pem").read_bytes()
    with bundle.open("ab") as out:
        out.write(certificate)
    with apt, pip:
        yield apt, pip, bundle, certificate


def test_a_build_through_authenticated_mirrors_leaves_no_credential(
    engine, cpu_image, tls_mirrors, tmp_path
):
    """The apt mirror is https, signed by a certificate only --ca-bundle trusts: the build
    trusts it for apt too, and no layer keeps the bundle or apt's setting for it."""
    apt, pip, bundle, certificate = tls_mirrors
    apt_only = certificate.split(b"\n")[5]  # a line of the mirror's own certificate
    env = {**build_env(), "IMAGEKIT_CA_BUNDLE": str(bundle)}
    try:
        result = imagekit(
            "build", str(CPU_RECIPE), "--plain", "--tag", REF,
            "--apt-mirror", apt.url(), "--index-url", pip.url(),
            env=env,
        )  # fmt: skip
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-4000:]
        # The mirrors answered only with credentials, so the build used them...
        assert apt.authorized > 0 and pip.authorized > 0, (apt.authorized, pip.authorized)
        # ...and never printed them.
        assert APT_PASSWORD not in output and PIP_PASSWORD not in output

        assert leaks(engine, REF, [APT_PASSWORD.encode(), PIP_PASSWORD.encode(), apt_only]) == []
        assert apt.url(with_credentials=False).startswith("https://")
        history = json.dumps(engine.history(REF))
        assert "APT_MIRROR=" + apt.url(with_credentials=False) in history  # the mirror, bare
        config = json.dumps(engine.inspect_image(REF)["Config"])
        assert APT_PASSWORD not in history + config and PIP_PASSWORD not in history + config

        sources = engine.run_once(REF, ["cat", "/etc/apt/sources.list"])
        assert apt.url(with_credentials=False) in sources  # default: the mirror, bare
        auth = engine.run_once(REF, ["ls", "-A", "/etc/apt/auth.conf.d"])
        assert auth.strip() == ""
        apt_conf = engine.run_once(REF, ["ls", "-A", "/etc/apt", "/etc/apt/apt.conf.d"])
        assert "imagekit-build-ca" not in apt_conf, apt_conf

        report = tmp_path / "check.json"
        checked = imagekit("check", REF, "--report", str(report), env=env)
        verdicts = {r["id"]: r["status"] for r in json.loads(report.read_text())["results"]}
        assert verdicts["credentials-in-layers"] == "pass", checked.stdout[-2000:]
        assert verdicts["credentials-in-config"] == "pass", checked.stdout[-2000:]

        # --final-apt-sources public: the same build (cached up to its last layer) names
        # the public archive again in the image's sources
        public = imagekit(
            "build", str(CPU_RECIPE), "--plain", "--tag", REF, "--apt-mirror", apt.url(),
            "--index-url", pip.url(), "--final-apt-sources", "public",
            env=env,
        )  # fmt: skip
        assert public.returncode == 0, (public.stdout + public.stderr)[-4000:]
        sources = engine.run_once(REF, ["cat", "/etc/apt/sources.list"])
        assert "http://deb.debian.org/debian/" in sources
        assert apt.url(with_credentials=False) not in sources
        assert leaks(engine, REF, [APT_PASSWORD.encode(), PIP_PASSWORD.encode()]) == []
    finally:
        engine.tag(cpu_image.image_id, cpu_image.ref)  # the build moved the recipe's own tag
        engine.remove_image(REF)


def test_a_wrong_apt_password_fails_the_build_in_one_line_and_keeps_the_tag(
    engine, cpu_image, mirrors
):
    apt, _, _ = mirrors
    wrong = apt.url().replace(APT_PASSWORD, "wrong-password")
    result = imagekit(
        "build", str(CPU_RECIPE), "--plain", "--tag", REF, "--apt-mirror", wrong, "--no-cache"
    )
    output = result.stdout + result.stderr
    print(output[-3000:])
    assert result.returncode == 5, output[-3000:]  # BuildError
    assert "401" in output and "Unauthorized" in output  # apt's own words, in the step's tail
    assert "wrong-password" not in output
    assert engine.inspect_image(cpu_image.ref)["Id"] == cpu_image.image_id  # no tag moved
    assert not engine.image_exists(REF)


def test_an_https_apt_mirror_the_build_does_not_trust_is_one_line_naming_ca_bundle(
    engine, cpu_image, tls_mirrors, tmp_path
):
    """apt-get update only warns about a certificate it cannot verify; without the marker
    the build died later in "Unable to locate package". Build and lock both say, in one
    line, which mirror and which flag; no tag moves and no lock is written."""
    apt, _, _, _ = tls_mirrors
    bare = apt.url(with_credentials=False)
    env = {k: v for k, v in build_env().items() if k != "IMAGEKIT_CA_BUNDLE"}
    result = imagekit(
        "build", str(CPU_RECIPE), "--plain", "--tag", REF, "--apt-mirror", apt.url(), env=env
    )
    output = result.stdout + result.stderr
    assert result.returncode == 5, output[-3000:]  # BuildError
    error = [line for line in result.stderr.splitlines() if line.startswith("ERROR ")]
    assert error == [
        f"ERROR --apt-mirror {bare}: apt cannot verify its https certificate; pass --ca-bundle "
        "FILE (or IMAGEKIT_CA_BUNDLE) holding the CA that signed it"
    ], output[-3000:]
    assert "Traceback" not in output and APT_PASSWORD not in output
    assert apt.authorized == 0  # apt never got past the handshake
    assert engine.inspect_image(cpu_image.ref)["Id"] == cpu_image.image_id  # no tag moved
    assert not engine.image_exists(REF)

    recipe = tmp_path / CPU_RECIPE.name
    shutil.copy(CPU_RECIPE, recipe)
    host_only = "/etc/ssl/certs/ca-certificates.crt"  # trusts PyPI, not this mirror
    locked = imagekit(
        "lock", str(recipe), "--plain", "--apt-mirror", apt.url(), "--ca-bundle", host_only,
        env=env,
    )  # fmt: skip
    assert locked.returncode == 14, (locked.stdout + locked.stderr)[-3000:]  # LockError
    last = locked.stderr.strip().splitlines()[-1]
    assert last.startswith("ERROR apt resolution on ") and " failed: --apt-mirror " in last, last
    assert last.endswith(
        f"--apt-mirror {bare}: apt cannot verify its https certificate with --ca-bundle "
        f"{host_only}: the bundle lacks the CA that signed it, or the certificate does not "
        "name this host"
    ), last
    assert not lock_path(recipe).exists()
