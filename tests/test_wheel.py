"""The package as a pool gets it: built, installed away from this checkout, used.

A clean clone is the whole product only if what it ships works without the
clone: the wheel holds every module, template and scaffold file; a new pool
made by the installed ``dreampool init`` builds; and the requirement ``init``
writes installs, through the very install steps of the workflows it wrote,
the same dreampool. All of it offline:

* The wheel is built once, from a copy of what it is made of (``pip wheel
  --no-deps --no-build-isolation``, with this environment's setuptools when
  it is one pyproject.toml's build-system asks for; otherwise pip builds it
  as everywhere else, isolated, fetching setuptools from the index: see
  :func:`offline_build`).
* Each "fresh" environment is a venv without pip whose site-packages holds a
  ``.pth`` line naming this environment's site-packages: dreampool's
  dependencies (and pip, setuptools) resolve there, after the venv's own
  folder, while dreampool itself resolves to what was installed into the
  venv (the editable install here is a finder that a ``.pth`` line does not
  start, so this checkout is never on the path; pip is told to ignore its
  record, ``PIP_IGNORE_INSTALLED``, as a runner has none).
* Installed from a folder of wheels with no index, dreampool records no
  ``direct_url.json``, as from PyPI: ``init`` writes ``dreampool==VERSION``,
  which the workflows' steps then install from the same folder.
* Installed from git, ``init`` writes ``dreampool @ git+URL@COMMIT`` from the
  install's ``direct_url.json``. ``https://github.com/example/dreampool`` is
  served by a local repository through git's ``url.<base>.insteadOf``, so pip
  clones the commit for real, and the workflow step installs that commit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from builder import __version__
from tests.conftest import REPO, draft, write_json
from tests.test_workflows import run_step

GIT_URL = "https://github.com/example/dreampool"
ORIGIN = "wheel.example/pool"
# What the wheel is made of (pyproject.toml: packages builder and builder.templates).
SOURCES = ("pyproject.toml", "README.md", "builder", "templates")


def offline_build() -> bool:
    """Whether this environment's setuptools is one that pyproject.toml's build-system
    requires, so a build needs no index (``--no-build-isolation``). If it is not (a
    venv's own setuptools 65), a build is isolated and fetches setuptools, as pip
    does everywhere; with ``setuptools>=N`` in the test extra it never is."""
    requires = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    specs = [r.replace(" ", "") for r in requires["build-system"]["requires"]]
    need = [m for r in specs if (m := re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", r))]
    have = int(metadata.version("setuptools").split(".")[0])
    return len(need) == 1 and have >= int(need[0][1])


def build_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a step that builds dreampool from its sources (module doc)."""
    if offline_build():
        return {**env, "PIP_NO_BUILD_ISOLATION": "0"}  # pip reads 0 as "do not isolate"
    return {k: v for k, v in env.items() if k not in ("PIP_CONFIG_FILE", "PIP_NO_INDEX")}


def _run(
    args: list[str | Path], env: dict[str, str], cwd: Path, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sources (a git repository of one commit) and the wheel built from them."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(
                REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(REPO / name, source / name)
    home = root / "home"
    home.mkdir()
    (home / "gitconfig").write_text(
        f'[url "{source.as_uri()}"]\n\tinsteadOf = {GIT_URL}\n'
        "[user]\n\tname = T\n\temail = t@example.invalid\n",
        encoding="utf-8",
    )
    env = base_env(root)
    _run(["git", "init", "-q", "-b", "main"], env, source)
    _run(["git", "add", "-A"], env, source)
    _run(["git", "commit", "-q", "-m", "dreampool as released"], env, source)
    wheels = root / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, source],
        build_env(env), root,
    )  # fmt: skip
    (built,) = wheels.glob("*.whl")
    assert built.name == f"dreampool-{__version__}-py3-none-any.whl"
    # Building wrote build/ and *.egg-info into the copy: put it back as committed.
    _run(["git", "clean", "-qfdx"], env, source)
    return {"root": root, "source": source, "wheels": wheels}


def base_env(root: Path) -> dict[str, str]:
    """No pip configuration, index or PYTHON* variable of this machine; git's only config
    is the one the world fixture writes."""
    home = root / "home"
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "DREAMPOOL_HOME": str(home / "dreampool"),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_NO_INPUT": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # This environment's dreampool (the editable install) is visible through the
        # .pth line: pip must install, as into a runner's empty environment.
        "PIP_IGNORE_INSTALLED": "1",
    }


def fresh_venv(path: Path) -> Path:
    """A venv without pip whose dependencies come from this environment (module doc)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "zz-test-environment.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8"
    )
    return python


def installed(python: Path, env: dict[str, str], cwd: Path) -> dict[str, str | None]:
    """Where ``import builder`` comes from in ``python``, and the dist-info's records;
    ``files``: each file the package installed, with its hash (its RECORD without the
    console script, whose first line names the interpreter). The install renders
    with the compiled templates it carries (builder.site.templates_compiled)."""
    code = (
        "import builder, json, importlib.metadata as m\n"
        "from builder.site import render\n"
        "d = m.distribution('dreampool')\n"
        "print(json.dumps({'file': builder.__file__, 'version': d.version,"
        " 'direct_url': d.read_text('direct_url.json'), 'record': d.read_text('RECORD'),"
        " 'compiled': str(render.TEMPLATES_COMPILED)}))"
    )
    found: dict[str, str | None] = json.loads(_run([python, "-I", "-c", code], env, cwd).stdout)
    lines = str(found["record"]).splitlines()
    found["files"] = "\n".join(sorted(line for line in lines if not line.startswith("../")))
    for template in ("dream.html", "feed.xml", "_entry.xml", "urlset.xml", "robots.txt"):
        assert f"builder/templates/{template}," in found["files"]
    assert "builder/site/templates_compiled/__init__.py," in found["files"]
    assert found.pop("compiled") == "True"
    return found


def new_pool(dreampool: Path, root: Path, env: dict[str, str]) -> tuple[Path, str]:
    """`dreampool init`, as a new pool's operator runs it, in a git repository whose
    HEAD^1 holds the scaffold (what check.yml reads requirements.txt from)."""
    pool = root / "pool"
    result = _run([dreampool, "init", pool, "--origin", ORIGIN, "--title", "Wheel pool"], env, root)
    _run(["git", "init", "-q", "-b", "main"], env, pool)
    _run(["git", "add", "-A"], env, pool)
    _run(["git", "commit", "-q", "-m", "Start the pool"], env, pool)
    _run(["git", "commit", "-q", "--allow-empty", "-m", "Merge pull request"], env, pool)
    return pool, result.stderr


def install_as_the_workflow_does(
    pool: Path, workflow: str, root: Path, env: dict[str, str]
) -> dict[str, str | None]:
    """Run the "Install dreampool" step of the pool's workflow, as written, into a fresh
    runner environment (`python` on PATH is its interpreter); what it installed."""
    runner = root / f"runner-{workflow}"
    python = fresh_venv(runner / "venv")
    temp = runner / "temp"
    temp.mkdir()
    text = (pool / ".github" / "workflows" / workflow).read_text(encoding="utf-8")
    step_env = {**env, "PATH": f"{python.parent}{os.pathsep}{env['PATH']}", "PIP_NO_DEPS": "1"}
    result = run_step(text, "Install dreampool", pool, temp, step_env)
    assert result.returncode == 0, result.stdout + result.stderr
    return installed(python, env, temp)


def test_the_wheel_installs_inits_and_builds_a_pool_whose_workflows_install_it(
    world: dict[str, Path], tmp_path: Path
) -> None:
    env = {**base_env(world["root"]), "PIP_FIND_LINKS": str(world["wheels"])}
    python = fresh_venv(tmp_path / "venv")
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "dreampool"], env, tmp_path)
    mine = installed(python, env, tmp_path)
    assert Path(str(mine["file"])).is_relative_to(tmp_path / "venv"), mine["file"]
    assert mine["direct_url"] is None  # from an index (a folder of wheels), as from PyPI
    dreampool = tmp_path / "venv" / "bin" / "dreampool"

    pool, said = new_pool(dreampool, tmp_path, env)
    line = f"dreampool=={__version__}"
    assert (pool / "requirements.txt").read_text(encoding="utf-8").splitlines()[-1] == line
    assert f"dreampool: requirements.txt installs {line}: dreampool {__version__} was " in said

    # The installed package runs a contributor's steps and builds the new pool with
    # its first dream: every module, template and static file is in the wheel.
    keygen = _run([dreampool, "keygen", "--author", "ada"], env, tmp_path).stdout
    key_id = re.search(r"keyId\s+(\S+)", keygen)
    assert key_id, keygen
    write_json(tmp_path / "draft.json", draft(author="ada"))
    _run([dreampool, "sign", "draft.json", "--key", key_id[1], "-o", "signed.json"], env, tmp_path)
    _run([dreampool, "submit", tmp_path / "signed.json"], env, pool)
    _run([dreampool, "log-keygen", "--origin", ORIGIN], env, tmp_path)
    (key,) = (Path(env["DREAMPOOL_HOME"]) / "keys").glob("log-*.key")
    built = _run([dreampool, "build", "--log-key", key, "--quiet"], env, pool)
    assert built.stdout.startswith("built site: 1 admitted"), built.stdout
    (page,) = (pool / "site" / "dreams").glob("*/index.html")
    assert (page.parent / "proof.tlog-proof").is_file()
    assert (pool / "site" / "log" / "checkpoint").is_file()
    _run([dreampool, "check"], env, pool)

    # Both workflows install exactly this wheel from what requirements.txt names.
    for workflow in ("check.yml", "publish.yml"):
        theirs = install_as_the_workflow_does(pool, workflow, tmp_path, env)
        assert theirs["version"] == __version__, workflow
        assert theirs["files"] == mine["files"], workflow  # every file, by its hash


def test_a_git_install_makes_init_write_that_commit_and_the_workflows_install_it(
    world: dict[str, Path], tmp_path: Path
) -> None:
    env = build_env(base_env(world["root"]))
    commit = _run(["git", "rev-parse", "HEAD"], env, world["source"]).stdout.strip()
    python = fresh_venv(tmp_path / "venv")
    requirement = f"dreampool @ git+{GIT_URL}@{commit}"
    _run([python, "-m", "pip", "install", "-q", "--no-deps", requirement], env, tmp_path)
    mine = installed(python, env, tmp_path)
    assert Path(str(mine["file"])).is_relative_to(tmp_path / "venv"), mine["file"]
    record = json.loads(str(mine["direct_url"]))
    assert (record["url"], record["vcs_info"]["commit_id"]) == (GIT_URL, commit)

    pool, said = new_pool(tmp_path / "venv" / "bin" / "dreampool", tmp_path, env)
    assert (pool / "requirements.txt").read_text(encoding="utf-8").splitlines()[-1] == (
        f"dreampool @ git+{record['url']}@{record['vcs_info']['commit_id']}"
    )
    assert f"installed from {GIT_URL} at commit {commit}" in said

    theirs = install_as_the_workflow_does(pool, "publish.yml", tmp_path, env)
    assert json.loads(str(theirs["direct_url"]))["vcs_info"]["commit_id"] == commit
    assert theirs["files"] == mine["files"]
