"""An apt mirror's credentials: split from the URL, written as an apt auth entry, and served
only while a build runs, only to the build's network (imagekit/aptauth.py)."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from importlib import resources

import pytest

from imagekit import aptauth
from imagekit.aptauth import AUTH_PATH, CA_PATH, apt_build_args, parse_mirror
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
