"""Signals held across engine calls that create things, and cleanup that retries (pure logic:
real signals to this process, a fake Docker API)."""

from __future__ import annotations

import os
import signal

import docker.errors
import pytest

from imagekit import signals
from imagekit.engine.client import Engine


@pytest.fixture
def handled():
    """imagekit's handlers, whatever this process inherited: a test run started in the
    background of a non-interactive shell (CI) inherits SIGINT ignored, and `install` rightly
    leaves an ignored signal ignored."""
    inherited = {signum: signal.getsignal(signum) for signum in signals.HANDLED}
    for signum in signals.HANDLED:
        signal.signal(signum, signal.SIG_DFL)
    signals.install()
    yield
    for signum, handler in inherited.items():
        signal.signal(signum, handler)


def test_a_signal_inside_deferred_is_raised_when_the_block_ends(handled):
    finished = []
    with pytest.raises(signals.Signalled) as stopped:
        with signals.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            finished.append("the call")  # not cut short
    assert finished == ["the call"]
    assert stopped.value.signum == signal.SIGTERM and stopped.value.exit_code == 143


def test_without_deferred_the_signal_stops_the_code_where_it_is(handled):
    finished = []
    with pytest.raises(signals.Signalled):
        os.kill(os.getpid(), signal.SIGINT)
        finished.append("the call")
    assert finished == []


class _Api:
    """Creates containers (a signal arrives mid-request) and refuses the first removal."""

    def __init__(self):
        self.containers_made: dict[str, dict] = {}
        self.refusals = 1

    def create_host_config(self, **kwargs):
        return {}

    def create_container(self, image, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the engine creates it
        cid = f"{len(self.containers_made):064d}"
        self.containers_made[cid] = kwargs["labels"]
        return {"Id": cid}

    def containers(self, all, filters):
        key, value = filters["label"].split("=")
        return [
            {"Id": cid, "Names": [f"/{cid[:12]}"], "Labels": labels}
            for cid, labels in self.containers_made.items()
            if labels.get(key) == value
        ]

    def networks(self, filters):
        return []

    def remove_container(self, cid, force, v):
        if self.refusals:
            self.refusals -= 1
            response = type("R", (), {"status_code": 409, "reason": "Conflict", "url": "/x"})()
            raise docker.errors.APIError("removal already in progress", response=response)
        del self.containers_made[cid]


class _Client:
    def __init__(self):
        self.api = _Api()


def test_ctrl_c_during_a_create_leaves_a_container_cleanup_finds_and_removes(handled, monkeypatch):
    monkeypatch.setattr("imagekit.engine.client.time.sleep", lambda seconds: None)
    engine = Engine(_Client())
    with pytest.raises(signals.Signalled):
        engine.create_container("mini", labels={"io.imagekit.smoke": "job"})
    assert len(engine.api.containers_made) == 1  # the engine made it
    assert engine.remove_labelled("io.imagekit.smoke=job") == 1  # after one refusal
    assert engine.api.containers_made == {}
