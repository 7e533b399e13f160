"""The documentation site as a reader gets it: built with `mkdocs build --strict`, served over
HTTP, opened in headless Chromium (Debian's; ./dev installs it). The home page, the CLI
reference and the requirements page render with their headings and generated tables, the
search index is there, and the browser's console shows no error."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

from .conftest import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("IMAGEKIT_REQUIRE_DOCKER") != "1",
    reason="Debian's chromium is not installed (./dev installs it)",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield out, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def open_page(url: str, profile) -> tuple[str, list[str]]:
    """The DOM after the page's scripts ran, and what the console said."""
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    return result.stdout, console


@pytest.mark.parametrize(
    "path, heading, content",
    [
        ("/", "imagekit", "tutorial"),
        ("/reference/cli/", "Command line", "imagekit build"),
        ("/reference/requirements/", "Requirements and checks", "fabric-not-turned-off"),
    ],
)
def test_a_page_renders_with_its_heading_and_no_console_error(
    site, tmp_path, path, heading, content
):
    out, base = site
    dom, console = open_page(base + path, tmp_path / "profile")
    assert (
        f">{heading}<" in dom or f">{heading} <" in dom or heading in dom.split("<h1", 1)[1][:300]
    )
    assert content in dom
    assert "<table" in dom or path == "/"
    # Chromium logs every console message at one level: the site's pages print none at all.
    assert console == [], console


def test_the_search_index_covers_the_generated_pages(site):
    out, _ = site
    index = json.loads((out / "search" / "search_index.json").read_text())
    locations = {doc["location"] for doc in index["docs"]}
    assert {"reference/cli/", "reference/requirements/", ""} <= locations
    assert any("locked-memory" in doc["text"] for doc in index["docs"])


def test_every_command_and_flag_is_in_the_cli_reference(site):
    import click

    from imagekit.cli.main import cli

    out, _ = site
    page = (out / "reference" / "cli" / "index.html").read_text()
    missing = []
    for name, command in cli.commands.items():
        if f"imagekit {name}" not in page:
            missing.append(name)
        for param in command.params:
            if isinstance(param, click.Option):
                flag = max(param.opts, key=len)
                if flag not in page:
                    missing.append(f"{name} {flag}")
    assert missing == []
