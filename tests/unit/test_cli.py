"""The CLI through click's runner: exit codes, one line per problem, no tracebacks."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from imagekit.cli.main import main

from ..conftest import RECIPES, ROOT


def run(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(list(args))
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def test_validate_ok(capsys):
    code, out, err = run(capsys, "validate", *map(str, sorted(RECIPES.glob("*.yaml"))))
    assert code == 0
    assert "deepspeed-training:23.08-gpu-py310-cu122-ubuntu22.04" in out


def test_validate_bad_recipe_exit_2_one_line_each(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\npyhton: {version: '3.11'}\n")
    code, out, err = run(capsys, "validate", str(bad), str(tmp_path / "missing.yaml"))
    assert code == 2
    lines = err.strip().splitlines()
    assert f"ERROR {bad}: pyhton: unknown key (did you mean 'python'?)" in lines
    assert f"ERROR {tmp_path / 'missing.yaml'}: no such file" in lines
    assert "Traceback" not in err


def test_a_misspelt_key_comes_before_the_field_it_leaves_missing(capsys, tmp_path):
    """pydantic lists `name: required field is missing` before `nmae: unknown key`; the typo
    is the cause, so it is the first line a user reads."""
    bad = tmp_path / "typo.yaml"
    bad.write_text('nmae: x\npython: {version: "3.11"}\n')
    code, out, err = run(capsys, "validate", str(bad))
    lines = err.strip().splitlines()
    assert code == 2 and lines[0] == f"ERROR {bad}: nmae: unknown key (did you mean 'name'?)"
    assert f"ERROR {bad}: name: required field is missing" in lines[1:]


def test_debug_shows_traceback(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("")
    from imagekit.errors import RecipeError

    with pytest.raises(RecipeError):
        main(["--debug", "validate", str(bad)])


def test_unknown_flag_is_a_usage_error(capsys):
    code, out, err = run(capsys, "render", "--chek")
    assert code == 2 and "No such option '--chek'" in err and "--check" in err


def test_render_writes_context_and_check_detects_staleness(capsys, tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    renders = tmp_path / "dockerfiles"
    code, out, _ = run(
        capsys, "render", "--recipes-dir", str(recipes), "--renders-dir", str(renders)
    )
    assert code == 0 and (renders / "deepspeed-cpu" / "Dockerfile").is_file()
    code, out, _ = run(
        capsys, "render", "--check", "--recipes-dir", str(recipes), "--renders-dir", str(renders)
    )
    assert code == 0
    cpu = recipes / "deepspeed-cpu.yaml"
    cpu.write_text(cpu.read_text().replace('version: "0.19.8"', 'version: "0.19.9"'))
    code, out, err = run(
        capsys, "render", "--check", "--recipes-dir", str(recipes), "--renders-dir", str(renders)
    )
    assert code == 3
    assert "deepspeed-cpu.yaml: committed render" in err and "Dockerfile" in err
    assert "deepspeed-cu122" not in err


def test_render_check_of_the_repository(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = run(capsys, "render", "--check")
    assert code == 0, err


def test_bad_recipe_writes_nothing(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [\n")
    out_dir = tmp_path / "out"
    code, _, err = run(capsys, "render", str(bad), "-o", str(out_dir))
    assert code == 2 and "malformed YAML" in err
    assert not out_dir.exists()
    assert list(tmp_path.iterdir()) == [bad]


def test_schema_is_json(capsys, tmp_path):
    code, out, _ = run(capsys, "schema")
    assert code == 0 and json.loads(out)["title"] == "imagekit recipe"
    target = tmp_path / "schema.json"
    code, _, _ = run(capsys, "schema", "-o", str(target))
    assert json.loads(target.read_text())["properties"]["ssh"]


def test_shipped_schema_validates_shipped_recipes():
    import jsonschema
    import yaml

    from imagekit.recipe.model import json_schema

    schema = json_schema()
    for path in RECIPES.glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        if "extends" in data:
            continue  # partial by design; validated after merging
        jsonschema.validate(data, schema)


def test_unreachable_engine_is_one_clear_line(capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    code, _, err = run(capsys, "build", str(RECIPES / "deepspeed-cpu.yaml"))
    assert code == 4
    assert "cannot reach the Docker engine at tcp://127.0.0.1:1" in err
    assert "Traceback" not in err


def test_bad_build_inputs_are_rejected_before_building(capsys, tmp_path):
    recipe = str(RECIPES / "deepspeed-cpu.yaml")
    code, _, err = run(capsys, "build", recipe, "--ca-bundle", "/no/such/ca.pem")
    assert code == 2 and err.strip() == "ERROR --ca-bundle /no/such/ca.pem: no such file"
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("hello")
    code, _, err = run(capsys, "build", recipe, "--ca-bundle", str(not_pem))
    assert code == 2 and "not a PEM certificate bundle" in err
    code, _, err = run(capsys, "build", recipe, "--wheelhouse", str(tmp_path))
    assert code == 2 and "contains no .whl files" in err
    code, _, err = run(capsys, "build", recipe, "--ssh-keys", "/no/such/keys", "--dry-run")
    assert code == 2 and err.strip() == "ERROR --ssh-keys /no/such/keys: no such directory"
    code, _, err = run(capsys, "build", recipe, "--tag", "Bad Tag")
    assert code == 2 and "--tag 'Bad Tag': not a valid image reference" in err
    code, _, err = run(capsys, "build", recipe, "--build-arg", "NOEQUALS")
    assert code == 2 and "is not KEY=VALUE" in err


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--index-url", "pypi.internal/simple"], "--index-url pypi.internal/simple: not an"),
        (["--index-url", "file:///srv/simple"], "--index-url file:///srv/simple: not an http(s)"),
        (
            ["--extra-index-url", "https://pypi.org/simple", "--extra-index-url", "/srv/wheels"],
            "--extra-index-url /srv/wheels: not an http(s) URL (local wheels: --wheelhouse)",
        ),
        (  # the token is not repeated
            ["--index-url", "htps://__token__:s3cret@pypi.internal/simple"],
            "--index-url htps://__token__:********@pypi.internal/simple: not an http(s) URL",
        ),
    ],
)
def test_a_pip_index_that_is_not_a_url_is_refused_before_building(capsys, flags, line):
    """pip would fail on it inside the build, minutes in, with its own words."""
    recipe = str(RECIPES / "deepspeed-cpu.yaml")
    code, out, err = run(capsys, "build", recipe, "--dry-run", *flags)
    assert code == 2 and out == ""
    assert err.startswith(f"ERROR {line}") and "s3cret" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["mpirun", "--workers", "2", "--slots", "2", "--", "python3", "train.py"],
        ["mpijob", "img:1", "--name", "j", "--workers", "1", "--slots", "1", "--", "true"],
        ["lint-cmd", "mpirun -np 2 --hostfile /etc/mpi/hostfile python3 t.py"],
    ],
)
def test_launch_commands_import_neither_docker_nor_pytest(argv):
    """Profiles and launch lines are data: these commands must start without the engine
    client or the check suite's test framework (start-up time, bench/bench_startup.py)."""
    lines, shown = _modules_after(argv, ("pytest", "docker", "testinfra"))
    assert lines[-1] == "[]", shown


def _modules_after(
    argv: list[str], modules: tuple[str, ...], env: dict[str, str] | None = None
) -> tuple[list[str], str]:
    """The output lines of `imagekit ARGV` in a fresh interpreter, the last one listing which
    of `modules` it imported; and everything it printed, for assertion messages."""
    import os
    import subprocess
    import sys

    probe = (
        "import sys\nfrom imagekit.cli.main import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {modules!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    return result.stdout.strip().splitlines(), result.stdout + result.stderr


def test_check_of_an_image_loads_no_recipe_machinery():
    """`imagekit check IMAGE` reads labels, not recipes: the recipe models and compat rules
    (a tenth of a second of imports) load only when a recipe is named. Here the engine is
    unreachable, so the run stops at its first engine call, after every import it needs."""
    env = {"DOCKER_HOST": "tcp://127.0.0.1:1"}
    lines, shown = _modules_after(
        ["check", "img:1"],
        (
            "imagekit.checks.runner",
            "imagekit.recipe.model",
            "imagekit.recipe.loader",
            "imagekit.recipe.compat",
        ),
        env,
    )
    assert "cannot reach the Docker engine" in shown, shown
    assert lines[-1] == "['imagekit.checks.runner']", shown


FAST_PATH_MODULES = ("rich", "pydantic", "jinja2")


def test_mpirun_prints_its_line_without_rich_or_the_recipe_model():
    """`imagekit mpirun` runs in job scripts and prints one plain line: the consoles are made
    on first use (imagekit/console.py), so neither rich nor pydantic is imported for it."""
    argv = ["mpirun", "--workers", "2", "--slots", "8", "--gpu", "--", "python3", "train.py"]
    lines, shown = _modules_after(argv, FAST_PATH_MODULES)
    assert lines[0].startswith("mpirun -np 16 -npernode 8 "), shown
    assert lines[-1] == "[]", shown


def test_an_unchanged_render_loads_neither_rich_nor_the_recipe_machinery(tmp_path):
    argv = ["render", str(ROOT / "recipes/deepspeed-cu122.yaml"), "-o", str(tmp_path / "out")]
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "NO_COLOR": "1"}
    lines, shown = _modules_after(argv, FAST_PATH_MODULES, env)
    assert lines == [f"rendered {tmp_path / 'out'}/", "['jinja2', 'pydantic']"], shown
    lines, shown = _modules_after(argv, FAST_PATH_MODULES, env)  # written from the record
    assert lines == [f"rendered {tmp_path / 'out'}/", "[]"], shown


def test_lazy_console_prints_markup_once_asked():
    from imagekit.cli.console import LazyConsole, escape

    console = LazyConsole(record=True, width=80, force_terminal=False)
    console.print(f"[green]ok[/] {escape('[not markup]')}")
    assert console.real is console.real
    assert console.export_text() == "ok [not markup]\n"


def test_the_exit_code_reference_lists_every_code_errors_py_produces():
    """The exit-code page is generated from errors.py: every code an error class (or a
    signal) can produce is a row, and no row names a code nothing produces."""
    import re

    from imagekit import errors
    from imagekit.cli.reference import exit_codes_table

    listed = {int(code) for code in re.findall(r"^\| (\d+) \|", exit_codes_table(), flags=re.M)}
    produced = set(errors.EXIT_CODES.values())
    produced.update(
        cls.exit_code
        for cls in vars(errors).values()
        if isinstance(cls, type)
        and issubclass(cls, errors.ImagekitError)
        and isinstance(cls.exit_code, int)
    )
    assert listed == produced


def test_the_docs_reference_pages_take_their_tables_from_the_code(capsys):
    """Each generated page holds only its marker (docs/hooks.py fills it at build time), every
    check of the suite is in the checks table, and `imagekit requirements` prints that table."""
    from imagekit.checks.catalog import catalog
    from imagekit.cli.reference import TABLES, checks_table

    pages = {
        "requirements.md": "checks",
        "exit-codes.md": "exit-codes",
        "profiles.md": "profiles",
        "recipes.md": "recipe-fields",
    }
    for page, table in pages.items():
        text = (ROOT / "docs" / "reference" / page).read_text()
        assert f"<!-- generated: {table} -->" in text, page
        if page != "recipes.md":  # that page also lists the shipped recipes by hand
            assert "| --- |" not in text, f"{page} holds a hand-written table"
    entries = catalog()
    assert len(entries) > 20
    generated = checks_table()
    for check_id in ("strictmodes", "fabric-not-turned-off", "locked-memory", "verbs-library"):
        assert f"| `{check_id}` |" in generated
    assert {e.id for e in entries} <= {
        line.split("`")[1] for line in generated.splitlines() if line.startswith("| `")
    }
    code, out, _ = run(capsys, "requirements")
    assert (code, out) == (0, generated)
    assert "| `network.fabric` |" in TABLES["recipe-fields"]()
    assert "| `seed-rdma` |" in TABLES["profiles"]()


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ["--apt-mirror", "ftp://apt.internal/debian"],
            "--apt-mirror ftp://apt.internal/debian: not an http(s) URL",
        ),
        (
            ["--apt-mirror", "https://apt.internal/debian", "--ca-bundle", "/nonexistent/ca.pem"],
            "--ca-bundle /nonexistent/ca.pem: no such file",
        ),
    ],
)
def test_adapt_bad_mirror_input_is_one_line_before_the_engine(capsys, monkeypatch, flags, line):
    """Checked before anything talks to Docker: no engine is needed to get the error."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.delenv("IMAGEKIT_CA_BUNDLE", raising=False)
    code, out, err = run(capsys, "adapt", "example/train:1", *flags)
    assert code == 2
    assert err.strip().splitlines() == [f"ERROR {line}"]


def test_an_output_that_cannot_be_written_is_one_line_and_keeps_what_was_there(capsys, tmp_path):
    """-o under a file (or anywhere unwritable): exit 15, the path named, no traceback, no
    temporary sibling left behind; the file in the way is untouched."""
    in_the_way = tmp_path / "afile"
    in_the_way.write_text("mine\n")
    recipe = str(RECIPES / "deepspeed-cpu.yaml")
    for args in (
        ("render", recipe, "-o", str(in_the_way / "ctx")),
        ("schema", "-o", str(in_the_way / "schema.json")),
    ):
        code, out, err = run(capsys, *args)
        target = args[-1]
        assert code == 15, err
        assert err.strip() == f"ERROR cannot write {target}: File exists ({in_the_way})"
        assert "Traceback" not in err and out == ""
    assert in_the_way.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_an_unexpected_os_error_is_still_one_line(capsys, monkeypatch):
    """The last net in cli.main: an OSError no module turned into an ImagekitError."""

    def broken(*_args):
        raise PermissionError(13, "Permission denied", "/somewhere/recipe.yaml")

    monkeypatch.setattr("imagekit.paths.recipe_paths", broken)
    code, _, err = run(capsys, "render", str(RECIPES / "deepspeed-cpu.yaml"))
    assert code == 1
    assert err.splitlines()[0] == "ERROR /somewhere/recipe.yaml: Permission denied"
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--registry", "http://localhost:5000"],
            "ERROR --registry 'http://localhost:5000': expected HOST[:PORT][/NAMESPACE] "
            "(no scheme: imagekit speaks https, and http to a registry on this machine)",
        ),
        (
            ["--registry", "localhost:99999"],
            "ERROR --registry 'localhost:99999': expected HOST[:PORT][/NAMESPACE]",
        ),
        (
            ["--registry", "localhost:5000/Team"],
            "ERROR --registry 'localhost:5000/Team': expected HOST[:PORT][/NAMESPACE]",
        ),
        (
            ["--registry", "localhost:5000/team", "--moving-tag", "la test"],
            "ERROR --moving-tag 'la test': not a valid tag (letters, digits, '_', '.', '-'; "
            "at most 128, not starting with '.' or '-')",
        ),
    ],
)
def test_bad_publish_flags_are_rejected_before_the_engine(capsys, monkeypatch, flags, message):
    """Exit 2 and the flag named, not a push that fails later (or a traceback from the HTTP
    library): with no engine at all, a check that ran after connecting would exit 4."""
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    code, _, err = run(capsys, "publish", "some/image:1", *flags)
    assert code == 2, err
    assert err.strip() == message


def test_a_negative_source_date_epoch_is_a_flag_error(capsys):
    code, _, err = run(
        capsys, "build", str(RECIPES / "deepspeed-cpu.yaml"), "--source-date-epoch", "-5"
    )
    assert code == 2 and "--source-date-epoch" in err and "-5 is not in the range" in err


def test_a_report_under_a_file_fails_before_the_check_runs(capsys, monkeypatch, tmp_path):
    """A --report the check could not write is exit 15 at once, not after minutes of checks:
    with no engine reachable, a check that had started would have ended with exit 4."""
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    in_the_way = tmp_path / "afile"
    in_the_way.write_text("")
    report = in_the_way / "reports" / "r.json"
    code, _, err = run(capsys, "check", "some/image:1", "--report", str(report))
    assert code == 15, err
    assert err.strip() == f"ERROR cannot write {report}: {in_the_way} is not a directory"


def test_a_build_sbom_or_diff_report_it_could_not_write_fails_before_any_work(
    capsys, monkeypatch, tmp_path
):
    """`build --sbom` wrote its SBOM after the whole build, `diff --report-dir` after reading
    both images: a path under a file failed only then. Now exit 15 first (no engine here:
    work that had started would have ended with exit 4)."""
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    in_the_way = tmp_path / "afile"
    in_the_way.write_text("")
    sbom, report_dir = in_the_way / "sbom.json", in_the_way / "diff"
    recipe = str(RECIPES / "deepspeed-cpu.yaml")
    code, _, err = run(capsys, "build", recipe, "--sbom", str(sbom))
    assert code == 15, err
    assert err.strip() == f"ERROR cannot write {sbom}: {in_the_way} is not a directory"
    code, _, err = run(capsys, "diff", "a/image:1", "b/image:1", "--report-dir", str(report_dir))
    assert code == 15, err
    assert err.strip() == f"ERROR cannot write {report_dir}: {in_the_way} is not a directory"


def test_a_report_in_a_directory_the_user_cannot_write_fails_before_the_check(
    capsys, monkeypatch, tmp_path
):
    """Root may write anywhere, so the directory's mode cannot show it under CI's root: the
    user's lack of write access is what os.access answers, faked here for the one path."""
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != locked and real_access(p, mode))
    report = locked / "reports" / "r.json"
    code, _, err = run(capsys, "check", "some/image:1", "--report", str(report))
    assert code == 15, err
    assert err.strip() == f"ERROR cannot write {report}: {locked} is not writable"


def test_a_report_under_a_directory_the_user_cannot_search_is_one_line(
    capsys, monkeypatch, tmp_path
):
    """stat() of a path under a directory without search permission fails with EACCES: that
    was a traceback; now exit 15 naming the path. (Root searches anything: faked here.)"""
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    hidden = tmp_path / "hidden"
    real_exists = Path.exists

    def exists(self, *args, **kwargs):
        if self.parent == hidden:
            raise PermissionError(13, "Permission denied", str(self))
        return real_exists(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists)
    report = hidden / "reports" / "r.json"
    code, _, err = run(capsys, "check", "some/image:1", "--report", str(report))
    assert code == 15, err
    assert err.strip() == f"ERROR cannot write {report}: Permission denied ({hidden / 'reports'})"


@pytest.mark.parametrize(
    "args, wrong, hint",
    [
        (["mpirun", "--workers", "2", "--slots", "2", "--np", "3", "python3", "x.py"], "--np", ""),
        (["smoke", "some/image:1", "--worker", "3"], "--worker", "'--workers'"),
        (
            ["mpijob", str(RECIPES / "deepspeed-cpu.yaml"), "--name", "j", "--workers", "2"]
            + ["--slots", "1", "--shm", "1G", "python3", "x.py"],
            "--shm",
            "'--shm-size'",
        ),
    ],
)
def test_a_mistyped_flag_is_not_taken_for_the_command(capsys, args, wrong, hint):
    """COMMAND passes unknown flags through (`python x.py --lr 3`), but a first word that is a
    flag is our option mistyped: it was printed into the mpirun line, or run in the launcher."""
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert f"No such option '{wrong}'" in err and hint in err


def test_the_command_keeps_its_own_flags(capsys):
    code, out, _ = run(
        capsys, "mpirun", "--workers", "2", "--slots", "2", "python3", "x.py", "--lr", "3"
    )
    assert code == 0 and out.rstrip().endswith("python3 x.py --lr 3")


def test_a_bad_value_from_an_environment_variable_names_the_variable(capsys, monkeypatch):
    """IMAGEKIT_WHEELHOUSE set in a shell profile and forgotten: the flag alone would name
    something the user never typed."""
    recipe = str(RECIPES / "deepspeed-cpu.yaml")
    monkeypatch.setenv("IMAGEKIT_WHEELHOUSE", "/no/such/wheels")
    code, _, err = run(capsys, "build", recipe, "--dry-run")
    assert code == 2
    assert err.strip() == (
        "ERROR --wheelhouse (from $IMAGEKIT_WHEELHOUSE) /no/such/wheels: no such directory"
    )
    code, _, err = run(capsys, "build", recipe, "--dry-run", "--wheelhouse", "/typed/here")
    assert code == 2 and err.strip() == "ERROR --wheelhouse /typed/here: no such directory"


def test_every_recipe_field_has_its_reference_row():
    """Walked from the pydantic models themselves (not the JSON Schema the table is made
    from): a field the table leaves out fails here."""
    import typing

    from pydantic import BaseModel

    from imagekit.cli.reference import recipe_fields_table
    from imagekit.recipe.model import Recipe

    def models_in(annotation):
        for arg in (annotation, *typing.get_args(annotation)):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                yield arg

    def paths(model, prefix=""):
        for name, field in model.model_fields.items():
            yield prefix + name
            for inner in models_in(field.annotation):
                yield from paths(inner, f"{prefix}{name}.")

    table = recipe_fields_table()
    missing = [path for path in paths(Recipe) if f"| `{path}` |" not in table]
    assert missing == []
    assert len(list(paths(Recipe))) > 40
