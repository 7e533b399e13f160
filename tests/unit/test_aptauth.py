"""An apt mirror's credentials: split from the URL, written as an apt auth entry, and served
only while a build runs, only to the build's network (imagekit/aptauth.py)."""

from __future__ import annotations

import shlex
import subprocess
import urllib.error
import urllib.request
from importlib import resources

import pytest

from imagekit.build import aptauth
from imagekit.build.aptauth import AUTH_PATH, CA_PATH, apt_build_args, parse_mirror
from imagekit.errors import UsageError

PASSWORD = "s3cr3t" + "T0ken"


class LoopbackEngine:
    """Stands in for the engine's one answer here: where build containers come from."""

    def __init__(self, subnet: str = "127.0.0.0/8"):
        self.subnet = subnet

    def bridge_gateway(self):
        return "127.0.0.1", self.subnet


def test_credentials_are_taken_out_of_the_mirror_url():
    mirror = parse_mirror(f"http://ci%40corp:{PASSWORD}@apt.internal:8080/debian/")
    assert mirror.url == "http://apt.internal:8080/debian/"
    assert (mirror.login, mirror.password) == ("ci@corp", PASSWORD)
    # apt applies an entry without a scheme to https only: the scheme is written out.
    assert mirror.auth_conf() == (
        f"machine http://apt.internal:8080/debian\nlogin ci@corp\npassword {PASSWORD}\n"
    )


def test_a_mirror_without_credentials_is_kept_as_given():
    mirror = parse_mirror("https://apt.internal/debian")
    assert mirror == aptauth.AptMirror("https://apt.internal/debian")
    assert not mirror.has_credentials


def test_ipv6_mirror_keeps_its_brackets():
    assert parse_mirror(f"http://u:{PASSWORD}@[fd00::1]:80/debian").url == (
        "http://[fd00::1]:80/debian"
    )


def test_a_bad_mirror_url_names_the_flag_and_masks_the_password():
    with pytest.raises(UsageError) as err:
        parse_mirror(f"ftp://u:{PASSWORD}@apt.internal/debian")
    assert err.value.message.startswith("--apt-mirror ftp://u:********@apt.internal")
    assert PASSWORD not in err.value.message


def test_no_mirror_and_a_plain_mirror_need_no_server():
    with apt_build_args(None, LoopbackEngine(), print) as args:
        assert args == {}
    with apt_build_args("http://apt.internal/debian", LoopbackEngine(), print) as args:
        assert args == {"APT_MIRROR": "http://apt.internal/debian"}


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def test_credentials_are_served_during_the_block_and_never_after(monkeypatch):
    monkeypatch.setenv("IMAGEKIT_APT_AUTH_PORT", "0")
    said = []
    with apt_build_args(
        f"http://ci:{PASSWORD}@apt.internal/debian", LoopbackEngine(), said.append
    ) as args:
        assert args["APT_MIRROR"] == "http://apt.internal/debian"
        assert PASSWORD not in "".join(args.values())  # build args land in the history
        assert args["APT_AUTH_URL"].endswith(AUTH_PATH)
        status, body = fetch(args["APT_AUTH_URL"])
        assert status == 200
        assert (
            body.decode() == f"machine http://apt.internal/debian\nlogin ci\npassword {PASSWORD}\n"
        )
        assert fetch(args["APT_AUTH_URL"].replace(AUTH_PATH, "/"))[0] == 404
    assert all(PASSWORD not in getattr(m, "text", "") for m in said)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(args["APT_AUTH_URL"], timeout=5)


def test_an_https_mirror_gets_the_ca_bundle_served_and_a_plain_one_does_not(monkeypatch, tmp_path):
    monkeypatch.setenv("IMAGEKIT_APT_AUTH_PORT", "0")
    bundle = tmp_path / "corp-ca.pem"
    bundle.write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    said = []
    with apt_build_args(
        "https://apt.internal/debian", LoopbackEngine(), said.append, bundle
    ) as args:
        assert set(args) == {"APT_MIRROR", "APT_CA_URL"}  # no credentials: no auth entry
        assert args["APT_CA_URL"].endswith(CA_PATH)
        assert fetch(args["APT_CA_URL"]) == (200, bundle.read_bytes())
        assert fetch(args["APT_CA_URL"].replace(CA_PATH, AUTH_PATH))[0] == 404
    assert [m.text for m in said] == [
        "apt: CA bundle for https://apt.internal/debian served to the build only (never a layer)"
    ]
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(args["APT_CA_URL"], timeout=5)
    with apt_build_args(
        f"https://ci:{PASSWORD}@apt.internal/debian", LoopbackEngine(), print, bundle
    ) as args:
        assert fetch(args["APT_CA_URL"])[0] == 200 and fetch(args["APT_AUTH_URL"])[0] == 200
    # plain http is verified by apt's signatures, not TLS: the bundle is not needed there
    with apt_build_args("http://apt.internal/debian", LoopbackEngine(), print, bundle) as args:
        assert args == {"APT_MIRROR": "http://apt.internal/debian"}


def test_clients_outside_the_build_network_get_nothing(monkeypatch):
    monkeypatch.setenv("IMAGEKIT_APT_AUTH_PORT", "0")
    engine = LoopbackEngine(subnet="172.31.0.0/16")  # the build network; we ask from 127.0.0.1
    with apt_build_args(f"http://ci:{PASSWORD}@apt.internal/debian", engine, print) as args:
        assert fetch(args["APT_AUTH_URL"]) == (404, b"")


def test_a_busy_port_falls_back_and_says_what_it_costs(monkeypatch):
    monkeypatch.setenv("IMAGEKIT_APT_AUTH_PORT", "0")
    url = f"http://ci:{PASSWORD}@apt.internal/debian"
    with apt_build_args(url, LoopbackEngine(), print) as first:
        port = first["APT_AUTH_URL"].split(":")[2].split("/")[0]
        monkeypatch.setenv("IMAGEKIT_APT_AUTH_PORT", port)
        said = []
        with apt_build_args(url, LoopbackEngine(), said.append) as second:
            assert second["APT_AUTH_URL"] != first["APT_AUTH_URL"]
            assert fetch(second["APT_AUTH_URL"])[0] == 200
        assert any("busy" in m.text and "cache" in m.text for m in said)


def test_a_gateway_not_on_this_machine_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("IMAGEKIT_APT_AUTH_PORT", "0")

    class Remote(LoopbackEngine):
        def bridge_gateway(self):
            return "192.0.2.1", "192.0.2.0/24"  # TEST-NET-1: never a local address

    with pytest.raises(UsageError, match="--apt-mirror: cannot serve its credentials or CA"):
        with apt_build_args(f"http://ci:{PASSWORD}@apt.internal/debian", Remote(), print):
            pass


def test_public_sources_undo_the_mirror_rewrite(tmp_path):
    script = resources.files("imagekit").joinpath("templates/apt-mirror.sh").read_text()
    original = "deb http://deb.debian.org/debian bookworm main\n"
    (tmp_path / "sources.list").write_text(original)
    (tmp_path / "os-release").write_text("ID=debian\n")
    env = {
        "IMAGEKIT_APT_DIR": str(tmp_path),
        "IMAGEKIT_OS_RELEASE": str(tmp_path / "os-release"),
        "PATH": "/usr/bin:/bin",
    }
    run = ["sh", "-c", script, "-"]
    subprocess.run([*run, "http://apt.internal/debian"], env=env, check=True)
    assert "apt.internal" in (tmp_path / "sources.list").read_text()
    subprocess.run([*run, "--public", "http://apt.internal/debian"], env=env, check=True)
    assert (tmp_path / "sources.list").read_text() == (
        "deb http://deb.debian.org/debian/ bookworm main\n"
    )


UNVERIFIED = (
    "W: Failed to fetch https://apt.internal:8443/debian/dists/bookworm/InRelease  Certificate "
    "verification failed: The certificate is NOT trusted. The certificate issuer is unknown.  "
    "Could not handshake: Error in the certificate verification. [IP: 10.0.0.5 8443]"
)


def run_apt_install(tmp_path, update_output: str, *args: str) -> subprocess.CompletedProcess:
    """templates/apt-install.sh with a stand-in apt-get that answers `update` as apt 2.6 does
    (warnings on stderr, exit 0) and records any other call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "apt-get"
    fake.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = update ]; then printf "%s\\n" {shlex.quote(update_output)} >&2; exit 0; fi\n'
        f'echo "$@" >> {tmp_path}/calls; exit 1\n'
    )
    fake.chmod(0o755)
    script = resources.files("imagekit").joinpath("templates/apt-install.sh").read_text()
    return subprocess.run(
        ["sh", "-c", script, "-", *args],  # POSIX sh: adapt runs it where bash may lack
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


def test_an_https_source_apt_cannot_verify_stops_the_install_with_a_marker(tmp_path):
    """apt-get update only warns (exit 0); the script must stop before installing."""
    result = run_apt_install(tmp_path, UNVERIFIED, "openssh-server")
    assert result.returncode == 100, result.stderr
    assert aptauth.untrusted_source(result.stderr) == "https://apt.internal:8443/debian"
    assert not (tmp_path / "calls").exists()  # no install attempted


def test_update_only_stops_after_the_update_and_other_warnings_pass(tmp_path):
    result = run_apt_install(tmp_path, "W: Some index files failed to download.", "--update-only")
    assert result.returncode == 0, result.stderr
    assert aptauth.untrusted_source(result.stdout + result.stderr) is None
    assert not (tmp_path / "calls").exists()
    unverified = run_apt_install(tmp_path / "again", UNVERIFIED, "--update-only")
    assert unverified.returncode == 100


def test_the_untrusted_message_names_the_flag_that_fixes_it(tmp_path):
    source = "https://apt.internal:8443/debian"
    mirror = f"https://ci:{PASSWORD}@apt.internal:8443/debian"
    without = aptauth.untrusted_message(source, mirror, None)
    assert without.startswith("--apt-mirror https://apt.internal:8443/debian: ")
    assert "--ca-bundle FILE" in without and PASSWORD not in without
    bundle = tmp_path / "ca.pem"
    wrong = aptauth.untrusted_message(source, mirror, bundle)
    assert f"--ca-bundle {bundle}" in wrong and "lacks the CA" in wrong
    # a source of the base, not the mirror: --ca-bundle would not reach it, so not offered
    other = aptauth.untrusted_message("https://repo.vendor.example/apt", mirror, bundle)
    assert other.startswith("apt cannot verify the https certificate of https://repo.vendor")
    assert "does not reach it" in other
    assert "\n" not in without + wrong + other
    # the marker is a URL: the script's own text (echo "...: $untrusted") is not one
    assert aptauth.untrusted_source('echo "imagekit-apt-untrusted: $untrusted" >&2') is None
