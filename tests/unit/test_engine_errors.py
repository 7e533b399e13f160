"""How the engine module turns a failed build step into imagekit's error (pure logic)."""

from __future__ import annotations

import threading

import docker.errors
import pytest

from imagekit.engine.client import Engine, _step_failed
from imagekit.errors import BuildError, EngineUnavailableError, ImageUnusableError
from imagekit.events import Step


def test_a_failed_run_names_its_step_once_not_the_engines_whole_command():
    command = "imagekit-apt-install " + " ".join(f"pkg{i}=1.0-{i}" for i in range(300))
    step = Step(number=5, total=56, instruction=f"RUN {command}")
    chunk = {
        "error": f"The command '/bin/bash -o pipefail -c {command}' returned a non-zero code: 100",
        "errorDetail": {
            "message": f"The command '/bin/bash -o pipefail -c {command}' returned a non-zero "
            "code: 100"
        },
    }
    error = _step_failed(step, chunk, ["E: Failed to fetch ... 401  Unauthorized"])
    first, second = error.message.splitlines()
    assert first.startswith("step 5/56 failed: RUN imagekit-apt-install") and len(first) < 240
    assert second == "the command exited 100"
    assert "401  Unauthorized" in error.hint


def test_other_engine_errors_pass_through():
    error = _step_failed(None, {"error": "COPY failed: no source files"}, [])
    assert error.message == "build failed\nCOPY failed: no source files"


class _FakeApi:
    """A build stream that ends with a step killed (137); ping answers or not."""

    def __init__(self, engine_up: bool):
        self.engine_up = engine_up

    def build(self, **kwargs):
        self.limits = kwargs["container_limits"]
        yield {"stream": "Step 1/2 : RUN sleep 300\n"}
        yield {"error": "The command '/bin/sh -c sleep 300' returned a non-zero code: 137"}

    def ping(self):
        if not self.engine_up:
            raise ConnectionError("connection refused")
        return True

    def info(self):
        return {"MemTotal": 16 << 30}


class _FakeClient:
    def __init__(self, engine_up: bool):
        self.api = _FakeApi(engine_up)


@pytest.mark.parametrize("engine_up, error", [(True, BuildError), (False, EngineUnavailableError)])
def test_a_killed_step_is_the_engine_going_away_only_when_it_stops_answering(
    monkeypatch, tmp_path, engine_up, error
):
    monkeypatch.setattr("imagekit.engine.client.time.sleep", lambda seconds: None)
    engine = Engine(_FakeClient(engine_up))
    with pytest.raises(error) as info:
        engine.build(tmp_path, report=lambda event: None)
    assert isinstance(info.value, BuildError) is engine_up  # an OOM kill stays a build failure
    if engine_up:  # every step runs under 3/4 of the host's memory, and the kill says so
        assert info.value.message.startswith("step 1/2 was killed (exit 137)")
        assert "memory limit of 12 GiB: RUN sleep 300" in info.value.message
        assert engine.api.limits == {"memory": 12 << 30, "memswap": 12 << 30}  # no swap on top


class _LossyExecApi:
    """An engine that loses the output of the first `lose` execs but reports their exit
    code, as moby#27289 describes."""

    def __init__(self, lose: int, code: int = 0, output: bytes = b"root 755 directory\n"):
        self.lose, self.code, self.output, self.calls = lose, code, output, 0

    def exec_create(self, container, argv, user=""):
        return {"Id": f"exec-{self.calls}"}

    def exec_start(self, exec_id, demux=False):
        self.calls += 1
        output = b"" if self.calls <= self.lose else self.output
        return (output or None, None) if demux else output

    def exec_inspect(self, exec_id):
        return {"ExitCode": self.code}


def _container(api):
    from imagekit.engine.client import Container

    engine = Engine.__new__(Engine)
    engine.api = api
    return Container(engine, "c0ffee", "imagekit-test")


def test_read_asks_again_when_a_success_comes_back_without_its_output():
    api = _LossyExecApi(lose=2)
    assert _container(api).read(["stat", "/run/sshd"]) == (0, "root 755 directory\n")
    assert api.calls == 3
    plain = _LossyExecApi(lose=1)
    assert _container(plain).exec(["stat", "/run/sshd"]) == (0, "")  # what read guards against


def test_read_takes_a_failure_or_a_lasting_silence_at_its_word():
    failed = _LossyExecApi(lose=5, code=1)
    assert _container(failed).read(["false"]) == (1, "") and failed.calls == 1
    silent = _LossyExecApi(lose=99)
    assert _container(silent).read(["true"]) == (0, "") and silent.calls == 3


def test_read_split_asks_again_like_read():
    api = _LossyExecApi(lose=1)
    assert _container(api).read_split(["ssh", "w0", "echo", "ok"]) == (
        0,
        b"root 755 directory\n",
        b"",
    )
    assert api.calls == 2
    failed = _LossyExecApi(lose=5, code=255)
    assert _container(failed).read_split(["ssh", "w0"]) == (255, b"", b"") and failed.calls == 1


def test_a_check_command_that_always_prints_is_asked_again_and_others_are_not(monkeypatch):
    """The checks' testinfra backend: `host.run(cmd, prints=True)` (a login, mpirun's ranks)
    survives a lost output; a plain `host.run` (which may start a daemon) runs once."""
    import testinfra

    from imagekit.checks import backend

    api = _LossyExecApi(lose=1)
    engine = Engine.__new__(Engine)
    engine.api = api
    monkeypatch.setattr(backend, "_engine", engine)
    host = testinfra.get_host(backend.hostspec("lossy-c0ffee"))
    result = host.run("ssh worker-0 echo imagekit-login-ok", prints=True)
    assert (result.rc, result.stdout, api.calls) == (0, "root 755 directory\n", 2)
    api.calls = 0
    assert host.run("/usr/sbin/sshd").stdout == "" and api.calls == 1


class _LabelledApi:
    """Three labelled containers; while more than one is left, each removal waits at a
    barrier for the other two: only removals that run at once get through. The first
    removal of the first container is refused."""

    def __init__(self):
        self.left = {f"{i:064d}" for i in range(3)}
        self.barrier = threading.Barrier(3, timeout=5)
        self.refused = False

    def containers(self, all, filters):
        return [{"Id": cid, "Names": [f"/{cid[:12]}"], "Labels": {}} for cid in sorted(self.left)]

    def networks(self, filters):
        return []

    def remove_container(self, cid, force, v):
        if len(self.left) > 1:
            self.barrier.wait()  # BrokenBarrierError (a failed test) when removals queue
        if cid == f"{0:064d}" and not self.refused:
            self.refused = True
            response = type("R", (), {"status_code": 409, "reason": "Conflict", "url": "/x"})()
            raise docker.errors.APIError("removal already in progress", response=response)
        self.left.discard(cid)


def test_a_runs_containers_are_removed_at_once_and_a_refusal_is_tried_again(monkeypatch):
    monkeypatch.setattr("imagekit.engine.client.time.sleep", lambda seconds: None)
    engine = Engine(type("Client", (), {"api": _LabelledApi()})())
    assert engine.remove_labelled("io.imagekit.check=run") == 3
    assert engine.api.left == set()


class _StuckApi(_LabelledApi):
    """One container the engine refuses to remove, every time it is asked."""

    def __init__(self):
        super().__init__()
        self.left = {f"{0:064d}"}

    def remove_container(self, cid, force, v):
        response = type("R", (), {"status_code": 409, "reason": "Conflict", "url": "/x"})()
        raise docker.errors.APIError("container is stuck", response=response)


def test_a_runs_cleanup_never_raises_but_says_what_is_left_and_how_to_remove_it(monkeypatch):
    monkeypatch.setattr("imagekit.engine.client.time.sleep", lambda seconds: None)
    engine = Engine(type("Client", (), {"api": _StuckApi()})())
    events = []
    assert engine.clean_up_labelled("io.imagekit.check=run", events.append) is False
    (warning,) = [e.text for e in events]
    assert warning.startswith("warning: containers labelled io.imagekit.check=run were not removed")
    assert "cannot remove container 000000000000" in warning and "`imagekit clean`" in warning
    done = []
    engine = Engine(type("Client", (), {"api": _LabelledApi()})())
    assert engine.clean_up_labelled("io.imagekit.check=run", done.append) is True
    assert done == [] and engine.api.left == set()


@pytest.mark.parametrize(
    "said, expected",
    [
        (
            '400 Client Error ...: Bad Request ("failed to create shim task: OCI runtime create '
            'failed: runc create failed: unable to start container process: exec: "/bin/sh": '
            'stat /bin/sh: no such file or directory: unknown")',
            "has no /bin/sh",
        ),
        (
            'unable to start container process: exec: "sshd": executable file not found in $PATH',
            "has no sshd",
        ),
        ("exec /bin/sh: exec format error", "cannot run /bin/sh: exec format error"),
        ("sh: 1: mpirun: not found", None),  # the image ran; a command in it failed
        ("Error response from daemon: conflict", None),
    ],
)
def test_what_the_runtime_says_when_an_image_cannot_run_anything(said, expected):
    """The runtime's long OCI message (at start) or the container's last words (a binary
    it could not execute) -> the one fact; anything else is not this error."""
    from imagekit.engine.client import _cannot_exec

    found = _cannot_exec(said)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found.startswith(expected)


class _StoppedApi(_LossyExecApi):
    """A container that stopped by itself before an exec: the engine answers 409 when the
    exec is created, or 500 when it is started (it stopped in between; seen in CI)."""

    def __init__(self, status: int, last_words: bytes):
        super().__init__(lose=0)
        self.status, self.last_words = status, last_words

    def _not_running(self):
        response = type("R", (), {"status_code": self.status, "reason": "x", "url": "/x"})()
        raise docker.errors.APIError(
            "x", response, explanation="container c0ffee is not running: Exited (1) 1 second ago"
        )

    def exec_create(self, container, argv, user=""):
        if self.status == 409:
            self._not_running()
        return super().exec_create(container, argv, user)

    def exec_start(self, exec_id, demux=False, stream=False):
        self._not_running()

    def logs(self, container):
        return self.last_words


@pytest.mark.parametrize("status", [409, 500])
@pytest.mark.parametrize("method", ["exec", "exec_split", "exec_stream"])
def test_an_exec_into_a_container_that_stopped_says_why(status, method):
    from imagekit.engine.client import Container, EngineError

    def run(container: Container):
        if method == "exec_stream":
            return container.exec_stream(["true"], lambda line: None)
        return getattr(container, method)(["true"])

    unusable = _container(_StoppedApi(status, b"exec /bin/sh: exec format error\n"))
    unusable.image = "foreign:1"
    with pytest.raises(ImageUnusableError) as info:
        run(unusable)
    assert str(info.value).startswith("image foreign:1: cannot run /bin/sh: exec format error")
    crashed = _container(_StoppedApi(status, b"starting\nsegmentation fault\n"))
    with pytest.raises(EngineError, match="stopped: segmentation fault$"):
        run(crashed)


class _StuckRemovalApi:
    """The engine's answer, on every try, for a container whose filesystem a stopped engine
    left mounted (seen in CI after the engine was stopped during a build step)."""

    def remove_container(self, container, force=False, v=False):
        response = type("R", (), {"status_code": 500, "reason": "x", "url": "/x"})()
        raise docker.errors.APIError(
            "x",
            response,
            explanation=f'container {container}: driver "overlay2" failed to remove root '
            "filesystem: unlinkat /var/lib/docker/overlay2/5226a90b/merged: device or resource busy",
        )


def test_a_container_whose_files_the_engine_left_mounted_says_what_frees_it():
    from imagekit.engine.client import EngineError

    engine = Engine.__new__(Engine)
    engine.api = _StuckRemovalApi()
    for remove in (
        lambda: engine.remove_container("bd03583e22303a0f"),
        _container(engine.api).remove,
    ):
        with pytest.raises(EngineError) as info:
            remove()
        assert info.value.message.startswith("cannot remove container ")
        assert "device or resource busy" in info.value.message and "\n" not in info.value.message
        assert "moby/moby#32461" in info.value.hint and "`imagekit clean` again" in info.value.hint
