"""Docker-backed tests. They need a real engine: `./dev test` (and so CI) starts one and sets
IMAGEKIT_REQUIRE_DOCKER=1, which turns a missing engine into a failure, never a skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import docker.errors
import pytest

from imagekit.build.base import BINFMT
from imagekit.build.plan import make_plan
from imagekit.engine.client import Engine
from imagekit.errors import EngineUnavailableError, ImageNotFoundError
from imagekit.platforms import MACHINES
from imagekit.recipe.loader import load_recipe

from ..conftest import RECIPES, ROOT

CPU_RECIPE = RECIPES / "deepspeed-cpu.yaml"
OMPI5_RECIPE = RECIPES / "deepspeed-cpu-ompi5.yaml"
NONROOT_RECIPE = RECIPES / "deepspeed-cpu-nonroot.yaml"
OMPI5_NONROOT_RECIPE = RECIPES / "deepspeed-cpu-ompi5-nonroot.yaml"
RDMA_RECIPE = RECIPES / "deepspeed-cpu-rdma.yaml"
ARM64_RECIPE = RECIPES / "deepspeed-cpu-arm64.yaml"
QEMU_HANDLER = BINFMT / MACHINES["arm64"][1]


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.docker)
    # Tests that stop and restart dockerd run after everything else.
    items.sort(key=lambda item: item.get_closest_marker("engine_restart") is not None)


def pytest_runtest_setup(item):
    """A test that reads the whole engine's state (every container, image and scratch
    directory) or restarts it runs only once no lane is building: a background lane's step
    containers and images would be its "leftovers", and a restart would kill its build."""
    if item.get_closest_marker("quiet_engine") or item.get_closest_marker("engine_restart"):
        PREBUILDS.wait()


@pytest.fixture(scope="session")
def engine():
    try:
        engine = Engine.connect()
    except EngineUnavailableError as exc:
        if os.environ.get("IMAGEKIT_REQUIRE_DOCKER") == "1" or os.environ.get("CI") == "true":
            pytest.fail(f"Docker engine required here: {exc.message}")
        pytest.skip(f"no Docker engine: {exc.message}")
    yield engine
    engine.close()


# Images the session's fixtures hand out: they live until the session ends.
SESSION_IMAGES = {"imagekit-test/mini:latest", "imagekit-test/apt:latest"}


def _kept_refs() -> set[str]:
    """SESSION_IMAGES and every tag of the session builds' recipes (a module's build of one
    of them moves its tags; its cleanup moves them back)."""
    recipes = [LANES[name][1] for name in SESSION_BUILDS if name in LANES]
    plans = [make_plan(load_recipe(recipe)) for recipe in recipes]
    return SESSION_IMAGES | {tag for plan in plans for tag in plan.tags}


# Session fixtures whose builds other modules reuse as cache.
SESSION_BUILDS = ("cpu_image", "nonroot_image", "ompi5_image", "ompi5_nonroot_image", "mini")

# The session's cells, built side by side: each lane in order (a later recipe reuses its
# lane's layers), the lanes at once. One build leaves a core idle much of the time (downloads,
# dpkg's fsyncs, the layer commits), so two or three lanes finish well before their sum.
# Fixture -> (lane, recipe); a lane holds only the fixtures a test uses. The first tests start
# when the foreground lanes are done; a background lane (arm64 under qemu, minutes longer than
# the rest) goes on building beside them, and its fixture waits for it.
LANES = {
    "cpu_image": ("debian12", CPU_RECIPE),
    "nonroot_image": ("debian12", NONROOT_RECIPE),
    "rdma_image": ("debian12", RDMA_RECIPE),
    "ompi5_image": ("debian13", OMPI5_RECIPE),
    "ompi5_nonroot_image": ("debian13", OMPI5_NONROOT_RECIPE),
    "arm64_image": ("arm64", ARM64_RECIPE),  # test_platform's, under qemu: the longest lane
}
BACKGROUND_LANES = {"arm64": "arm64"}  # lane -> the architecture of every image it makes


class Prebuilds:
    """The lanes' builds, each a future of its BuiltImage; `take` waits for one, or builds
    the recipe now when no lane did."""

    def __init__(self) -> None:
        self._futures: dict[Path, Future[BuiltImage]] = {}
        self._lane_of: dict[Path, str] = {}
        self._pool = ThreadPoolExecutor(max_workers=len({lane for lane, _ in LANES.values()}))

    def start(self, engine: Engine, fixtures: set[str]) -> None:
        lanes: dict[str, list[Path]] = {}
        for fixture, (lane, recipe) in LANES.items():
            if fixture in fixtures and recipe not in self._futures:
                if recipe == ARM64_RECIPE and not QEMU_HANDLER.exists():
                    continue  # its module says why (a skip here, a failure in CI)
                lanes.setdefault(lane, []).append(recipe)
        for lane, recipes in lanes.items():
            previous: Future[BuiltImage] | None = None
            for recipe in recipes:
                previous = self._pool.submit(self._after, previous, engine, recipe)
                self._futures[recipe] = previous
                self._lane_of[recipe] = lane

    @staticmethod
    def _after(previous: Future | None, engine: Engine, recipe: Path) -> BuiltImage:
        if previous is not None:
            previous.exception()  # in order; a failed parent fails its own fixture, not this
        return build_for_real(engine, recipe)

    def wait(self, background: bool = True) -> None:
        """Until every lane's builds are done (or only the foreground lanes')."""
        for recipe, future in list(self._futures.items()):
            if background or self._lane_of[recipe] not in BACKGROUND_LANES:
                future.exception()

    def building(self) -> set[str]:
        """The architectures of the background lanes still building (see BACKGROUND_LANES)."""
        return {
            BACKGROUND_LANES[self._lane_of[recipe]]
            for recipe, future in list(self._futures.items())
            if self._lane_of[recipe] in BACKGROUND_LANES and not future.done()
        }

    def take(self, engine: Engine, recipe: Path) -> BuiltImage:
        future = self._futures.get(recipe)
        return future.result() if future is not None else build_for_real(engine, recipe)


PREBUILDS = Prebuilds()


@pytest.fixture(scope="session")
def _session_builds(request, engine):
    """Build the session's images before any module cleans up after itself: their builder
    stages are untagged images, which a module's cleanup would otherwise take for its own
    leftovers, and every later build of those recipes would start over. The lanes run side by
    side; the foreground lanes are done before the first test, and a background lane's images
    are spared by every module's cleanup while it builds (`images_made_since`)."""
    used = {n for item in request.session.items for n in getattr(item, "fixturenames", ())}
    PREBUILDS.start(engine, used)
    PREBUILDS.wait(background=False)
    for name in SESSION_BUILDS:
        if name in used:
            request.getfixturevalue(name)


@pytest.fixture(autouse=True, scope="module")
def _free_disk_after_module(engine, _session_builds):
    """Each module removes the images it made (and the layers only they used), so the suite's
    disk peak is the session's images plus one module's, not the sum of every build. (A CI run
    once ran out of disk with them all kept.) A recipe's tag that a module's build moved goes
    back to the session's image; base images and the session's builds stay."""
    kept = _kept_refs()
    before = image_ids(engine)
    pointed = {ref: engine.inspect_image(ref)["Id"] for ref in kept if engine.image_exists(ref)}
    yield
    for ref, image_id in pointed.items():
        if image_id in {image["Id"] for image in engine.api.images(all=True)}:
            engine.tag(image_id, ref)
    made = images_made_since(engine, before)
    for image in engine.api.images():
        tags = {t for t in image.get("RepoTags") or [] if t != "<none>:<none>"}
        ours = all(t.startswith("imagekit-test/") for t in tags) and not tags & kept
        if image["Id"] in made and ours:
            try:
                engine.api.remove_image(image["Id"], force=True)
            except docker.errors.APIError:  # in use by a container a test still holds
                pass


def image_ids(engine: Engine, all_: bool = False) -> set[str]:
    """The IDs `docker images` lists (with `all_`, intermediate step images too)."""
    return {image["Id"] for image in engine.api.images(all=all_)}


def images_made_since(engine: Engine, before: set[str], all_: bool = False) -> set[str]:
    """The images listed now (see `image_ids`) and not in `before`, less those of a
    background lane still building: the steps of its build in progress, which no test made
    (and whose removal would break that build)."""
    building = PREBUILDS.building()
    made = image_ids(engine, all_) - before
    if not building:
        return made
    return {i for i in made if _architecture(engine, i) not in building}


def _architecture(engine: Engine, image_id: str) -> str | None:
    try:
        return engine.inspect_image(image_id).get("Architecture")
    except ImageNotFoundError:  # removed meanwhile: nothing to spare or remove
        return None


def build_env() -> dict[str, str]:
    """The host CA bundle and the local torch wheelhouse, as ./dev sets them."""
    env = dict(os.environ)
    ca = Path("/etc/ssl/certs/ca-certificates.crt")
    if "IMAGEKIT_CA_BUNDLE" not in env and ca.is_file():
        env["IMAGEKIT_CA_BUNDLE"] = str(ca)
    wheelhouse = ROOT / ".cache" / "wheelhouse"
    if "IMAGEKIT_WHEELHOUSE" not in env and any(wheelhouse.glob("*.whl")):
        env["IMAGEKIT_WHEELHOUSE"] = str(wheelhouse)
    return env


def imagekit(
    *args: str, timeout: int = 1800, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "imagekit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or build_env(),
        cwd=ROOT,
    )


def check_json(
    image: str, tmp_path: Path, *args: str, env: dict | None = None, timeout: int = 900
) -> tuple[int, dict, str]:
    """`imagekit check IMAGE ARGS` with a JSON report in `tmp_path`: (exit code, the report,
    the output)."""
    report = tmp_path / "report.json"
    result = imagekit(
        "check", image, "--report", str(report), "--format", "json", *args, timeout=timeout, env=env
    )
    return result.returncode, json.loads(report.read_text()), result.stdout + result.stderr


def by_id(report: dict) -> dict[str, dict]:
    """A check report's rows by check ID."""
    return {r["id"]: r for r in report["results"]}


@dataclass(frozen=True)
class BuiltImage:
    ref: str
    image_id: str
    output: str


def start(*args: str, **popen) -> subprocess.Popen:
    """`imagekit ARGS` running in the background, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "imagekit", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=build_env(),
        cwd=ROOT,
        **popen,
    )


def labelled(engine: Engine, label: str) -> list[str]:
    """The names of the containers and networks carrying `label` (what a run left)."""
    containers, networks = engine.labelled(label)
    return [c["name"] for c in containers] + [n["name"] for n in networks]


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def build_for_real(engine: Engine, recipe: Path) -> BuiltImage:
    """`imagekit build RECIPE` as a user runs it; the image its plan names. An hour at most:
    a lane's build shares the cores with the other lanes and with tests."""
    result = imagekit("build", str(recipe), "--plain", timeout=3600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ref = make_plan(load_recipe(recipe)).image
    return BuiltImage(ref, engine.inspect_image(ref)["Id"], result.stdout + result.stderr)


@pytest.fixture(scope="session")
def cpu_image(engine) -> BuiltImage:
    """recipes/deepspeed-cpu.yaml, built for real once per session (cache makes reruns fast)."""
    return PREBUILDS.take(engine, CPU_RECIPE)


@pytest.fixture(scope="session")
def ompi5_image(engine) -> BuiltImage:
    """recipes/deepspeed-cpu-ompi5.yaml (Debian 13, Open MPI 5.0.7), built for real once."""
    return PREBUILDS.take(engine, OMPI5_RECIPE)


@pytest.fixture(scope="session")
def rdma_image(engine) -> BuiltImage:
    """recipes/deepspeed-cpu-rdma.yaml (Open MPI 4 + UCX + rdma-core), built for real once."""
    return PREBUILDS.take(engine, RDMA_RECIPE)


@pytest.fixture(scope="session")
def nonroot_image(engine, cpu_image) -> BuiltImage:
    """recipes/deepspeed-cpu-nonroot.yaml: deepspeed-cpu's layers plus the MPI user's (K1);
    built after the CPU image, whose cache it shares."""
    return PREBUILDS.take(engine, NONROOT_RECIPE)


@pytest.fixture(scope="session")
def ompi5_nonroot_image(engine, ompi5_image) -> BuiltImage:
    """recipes/deepspeed-cpu-ompi5-nonroot.yaml: deepspeed-cpu-ompi5's layers plus the MPI
    user's (K1 with Open MPI 5); built after the Open MPI 5 image, whose cache it shares."""
    return PREBUILDS.take(engine, OMPI5_NONROOT_RECIPE)


def slow_profile(tmp_path: Path) -> Path:
    """A check profile whose extra probe sleeps: a check of mini ends in about 2 s, too soon
    for a test that must stop it (a signal, the engine going away) in the middle."""
    slow = tmp_path / "slow.yaml"
    slow.write_text(
        "user_keys: [image, mounted]\n"
        "probes:\n"
        '  - {id: slow, requirement: OPS1, title: t, exec: "sleep 60"}\n'
    )
    return slow


def run_in(engine: Engine, image: str, command: str, **kwargs) -> tuple[int, str]:
    with engine.container(image, command=["sleep", "infinity"], entrypoint=[], **kwargs) as c:
        return c.exec(["bash", "-c", command])


from .images import mini  # noqa: E402,F401  (session fixture shared by check and smoke tests)


def marked(output: str, marker: str) -> list[dict]:
    """The JSON each rank printed after `marker` (IMAGEKIT_PROBE, IMAGEKIT_TRAIN)."""
    return [
        json.loads(line.split(f"{marker} ", 1)[1])
        for line in output.splitlines()
        if f"{marker} " in line
    ]


def assert_e1_trained(output: str) -> None:
    """E1 over 2 workers x 2 slots: four ranks of ZeRO stage 2, each on its worker, each
    with a lower loss at the end than at the start, on the CPU over gloo (no GPU here; the
    GPU run of the same program is tests/gpu_host)."""
    trained = marked(output, "IMAGEKIT_TRAIN")
    assert sorted(t["rank"] for t in trained) == [0, 1, 2, 3]
    for t in trained:
        assert t["world"] == 4 and t["stage"] == 2
        assert t["host"].endswith(f"-worker-{t['rank'] // 2}")
        assert t["last_loss"] < t["first_loss"], t
        assert (t["device"].split(":")[0], t["backend"]) == ("cpu", "gloo"), t
