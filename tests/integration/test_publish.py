"""`imagekit publish` against real registries: Debian's docker-registry on loopback, plain
and with htpasswd auth over TLS (a throwaway CA); faults: registry down, killed mid-push."""

from __future__ import annotations

import base64
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from imagekit.engine.registry import RegistryClient

from .conftest import ROOT, build_env, imagekit
from .images import build


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """A real registry (CNCF distribution, from Debian) on 127.0.0.1, its data kept on disk
    across restarts."""

    def __init__(
        self, root: Path, tls: tuple[Path, Path] | None = None, htpasswd: Path | None = None
    ):
        if shutil.which("docker-registry") is None:
            pytest.fail("docker-registry is not installed (./dev installs it)")
        self.root, self.port = root, free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        config = [
            "version: 0.1",
            f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}, delete: {{enabled: true}}}}",
            f"http: {{addr: '{self.host}'"
            + (f", tls: {{certificate: {tls[0]}, key: {tls[1]}}}" if tls else "")
            + "}",
        ]
        if htpasswd:
            config.append(f"auth: {{htpasswd: {{realm: imagekit-test, path: {htpasswd}}}}}")
        self.config = root / "config.yml"
        self.config.write_text("\n".join(config) + "\n")
        self.scheme = "https" if tls else "http"
        self.verify = str(tls[0].parent / "ca.crt") if tls else True

    def start(self) -> Registry:
        self.proc = subprocess.Popen(
            ["docker-registry", "serve", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                requests.get(f"{self.scheme}://{self.host}/v2/", timeout=1, verify=self.verify)
                return self
            except requests.exceptions.ConnectionError:
                time.sleep(0.2)
        raise RuntimeError("registry did not start")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)


@contextmanager
def running(registry: Registry):
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()


def publish(*args: str, env: dict | None = None, timeout: int = 900):
    """CI=true turns --require-check on; tests about other things say so explicitly."""
    if "--require-check" not in args:
        args = (*args, "--no-require-check")
    return imagekit("publish", *args, env=env, timeout=timeout)


def check_report(image: str, tmp_path: Path) -> Path:
    report = tmp_path / "check.json"
    result = imagekit("check", image, "--report", str(report), timeout=600)
    assert result.returncode == 0, result.stdout[-2000:]
    return report


def test_publish_then_pull_by_digest(engine, mini, tmp_path):
    with running(Registry(tmp_path)) as reg:
        record_path = tmp_path / "record.json"
        report = check_report(mini, tmp_path)
        result = publish(
            mini,
            "--registry",
            f"{reg.host}/team",
            "--moving-tag",
            "stable",
            "--require-check",
            "--check-report",
            str(report),
            "--record",
            str(record_path),
        )
        assert result.returncode == 0, result.stderr[-2000:]
        record = json.loads(record_path.read_text())
        assert record["schema"] == "imagekit.publish-record/v1"
        assert record["repository"] == f"{reg.host}/team/mini"
        assert record["version_tags"] == ["latest"] and record["moving_tags"] == ["stable"]
        assert record["check_passed"] is True and record["digest"].startswith("sha256:")
        pinned = f"{record['repository']}@{record['digest']}"
        engine.remove_image(pinned)
        engine.client.images.pull(pinned)
        assert engine.inspect_image(pinned)["Id"] == engine.inspect_image(mini)["Id"]
        # the moving tag points at the same manifest as the version tag
        client = RegistryClient.for_repository(record["repository"])
        assert client.config_digest("stable") == client.config_digest("latest")


def test_version_tags_are_immutable(engine, mini, tmp_path):
    other = build(
        engine,
        tmp_path / "other",
        "imagekit-test/mini:other",
        f"FROM {mini}\nLABEL io.imagekit.test=other\n",
        {},
    )
    with running(Registry(tmp_path)) as reg:
        assert publish(mini, "--registry", reg.host, "--tag", "1.0").returncode == 0
        again = publish(mini, "--registry", reg.host, "--tag", "1.0")
        assert again.returncode == 0  # the same image again: idempotent
        moved = publish("imagekit-test/mini:other", "--registry", reg.host, "--tag", "1.0")
        assert moved.returncode == 13
        assert "version tags are immutable" in moved.stderr
        client = RegistryClient.for_repository(f"{reg.host}/mini")
        assert client.config_digest("1.0") == engine.inspect_image(mini)["Id"]
        forced = publish(
            "imagekit-test/mini:other", "--registry", reg.host, "--tag", "1.0", "--force"
        )
        assert forced.returncode == 0
        assert client.config_digest("1.0") == engine.inspect_image(other)["Id"]


def test_require_check_refuses_without_a_passing_report(mini, tmp_path):
    missing = publish(mini, "--registry", "127.0.0.1:1", "--require-check")
    assert missing.returncode == 13 and "without a check report" in missing.stderr
    failed = tmp_path / "failed.json"
    body = json.loads(check_report(mini, tmp_path).read_text())
    body["passed"] = False
    failed.write_text(json.dumps(body))
    refused = publish(
        mini, "--registry", "127.0.0.1:1", "--require-check", "--check-report", str(failed)
    )
    assert refused.returncode == 13 and "failed its checks" in refused.stderr


def test_registry_down_is_one_clear_line(mini, tmp_path):
    reg = Registry(tmp_path)  # never started
    result = publish(mini, "--registry", reg.host, "--retries", "1", timeout=120)
    assert result.returncode == 11
    assert f"cannot reach registry {reg.host}: connection refused" in result.stderr
    assert "Traceback" not in result.stderr


def _tls_and_htpasswd(tmp_path: Path, host: str) -> tuple[tuple[Path, Path], Path]:
    certs = tmp_path / "certs"
    certs.mkdir()
    run = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True)  # noqa: E731
    run(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=imagekit test CA",
        "-keyout",
        str(certs / "ca.key"),
        "-out",
        str(certs / "ca.crt"),
    )
    run(
        "openssl",
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(certs / "key.pem"),
        "-out",
        str(certs / "req.csr"),
    )
    ext = certs / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    run(
        "openssl",
        "x509",
        "-req",
        "-in",
        str(certs / "req.csr"),
        "-CA",
        str(certs / "ca.crt"),
        "-CAkey",
        str(certs / "ca.key"),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        str(ext),
        "-out",
        str(certs / "cert.pem"),
    )
    htpasswd = tmp_path / "htpasswd"
    out = subprocess.run(
        ["htpasswd", "-Bbn", "imagekit", "s3cret"], check=True, capture_output=True, text=True
    ).stdout
    htpasswd.write_text(out)
    return (certs / "cert.pem", certs / "key.pem"), htpasswd


def _docker_config(tmp_path: Path, host: str, password: str) -> dict:
    directory = tmp_path / f"docker-config-{password}"
    directory.mkdir()
    auth = base64.b64encode(f"imagekit:{password}".encode()).decode()
    (directory / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return {**build_env(), "DOCKER_CONFIG": str(directory)}


def test_auth_over_tls(engine, mini, tmp_path):
    probe = Registry(tmp_path)  # only for the port
    tls, htpasswd = _tls_and_htpasswd(tmp_path, probe.host)
    reg = Registry(tmp_path, tls=tls, htpasswd=htpasswd)
    trust = Path("/etc/docker/certs.d") / reg.host  # how dockerd trusts a registry's CA
    trust.mkdir(parents=True, exist_ok=True)
    shutil.copy(tls[0].parent / "ca.crt", trust / "ca.crt")
    try:
        with running(reg):
            started = time.monotonic()
            wrong = publish(
                mini, "--registry", reg.host, env=_docker_config(tmp_path, reg.host, "wrong")
            )
            assert wrong.returncode == 12, wrong.stderr
            assert "refused the credentials" in wrong.stderr
            assert time.monotonic() - started < 60  # auth errors are not retried
            right = publish(
                mini, "--registry", reg.host, env=_docker_config(tmp_path, reg.host, "s3cret")
            )
            assert right.returncode == 0, right.stderr[-2000:]
    finally:
        shutil.rmtree(trust, ignore_errors=True)


def test_registry_killed_mid_push_never_leaves_a_broken_tag(engine, cpu_image, tmp_path):
    reg = Registry(tmp_path).start()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "imagekit",
            "publish",
            cpu_image.ref,
            "--registry",
            reg.host,
            "--retries",
            "4",
            "--no-require-check",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=build_env(),
        cwd=ROOT,
    )
    try:
        for line in proc.stdout:
            if "Pushing" in line:
                break
        reg.stop(signal.SIGKILL)
        time.sleep(1)
        reg.start()
        output = proc.stdout.read()
        proc.wait(timeout=900)
        repository = f"{reg.host}/{cpu_image.ref.split(':')[0]}"
        client = RegistryClient.for_repository(repository)
        tag = cpu_image.ref.rsplit(":", 1)[1]
        config = client.config_digest(tag)
        if proc.returncode == 0:  # retried through: the tag is complete
            assert config == cpu_image.image_id, output
            manifest = requests.get(
                f"http://{reg.host}/v2/{client.path}/manifests/{tag}",
                headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
            ).json()
            for layer in manifest["layers"]:
                assert client.blob_exists(layer["digest"]), layer
        else:  # a clean failure: one line, and no tag at all
            assert proc.returncode == 11, output
            assert config is None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        reg.stop()
