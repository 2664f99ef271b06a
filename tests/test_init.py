"""`dreampool init`: the scaffold of a pool repository, and the workflows it holds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from builder.content import init, pool
from builder.errors import InputError, PoolError
from tests.conftest import REPO
from tests.test_publish_flow import require_wiring

ORIGIN = "dreams.example.org/pool"
# What a pool installs when dreampool came from git (see test_requirement_*).
REQUIREMENT = "dreampool @ git+https://github.com/example/dreampool@" + "0123456789" * 4
SCAFFOLD = {
    "README.md",
    "requirements.txt",
    ".gitignore",
    ".github/CODEOWNERS",
    ".github/workflows/check.yml",
    ".github/workflows/publish.yml",
    "content/pool.yaml",
    "content/dreams/.gitkeep",
    "content/keys/.gitkeep",
}
# owner/repo, then an action in a folder of it (actions/cache/restore), if any
_PINNED = re.compile(
    r"^\s*(?:- )?uses: ([\w.-]+/[\w.-]+)(?:/[\w.-]+)*@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$"
)


def files_of(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_scaffold_is_a_valid_empty_pool(tmp_path: Path) -> None:
    root = tmp_path / "pool"
    written = init.init_pool(root, ORIGIN, 'Dreams of "agents": 梦', requirement=REQUIREMENT)
    assert {p.relative_to(root).as_posix() for p in written} == SCAFFOLD
    assert files_of(root) == SCAFFOLD
    config = pool.load_config(root / "content")
    assert (config.origin, config.title) == (ORIGIN, 'Dreams of "agents": 梦')
    problems, _ = pool.check(root / "content")
    assert problems == []
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert readme.startswith('# Dreams of "agents": 梦\n') and f"`{ORIGIN}`" in readme
    for step in ("dreampool keygen", "dreampool sign", "dreampool submit", "dreampool check"):
        assert step in readme
    requirements = (root / "requirements.txt").read_text(encoding="utf-8")
    assert requirements.splitlines()[-1] == REQUIREMENT


def test_no_placeholder_or_key_material_is_left(tmp_path: Path) -> None:
    init.init_pool(tmp_path, ORIGIN, "Pool", owners=["@alice"], requirement="dreampool==9.9")
    for path in tmp_path.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"__[A-Z]+__", text), path
            assert "PRIVATE+KEY" not in text or path.name == ".gitignore", path
    assert (tmp_path / "requirements.txt").read_text().splitlines()[-1] == "dreampool==9.9"


def test_refuses_an_existing_pool_and_writes_nothing(tmp_path: Path) -> None:
    init.init_pool(tmp_path, ORIGIN, "Pool", requirement=REQUIREMENT)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(PoolError, match="already a pool"):
        init.init_pool(tmp_path, "other.example/pool", "Other", requirement=REQUIREMENT)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_refuses_to_overwrite_any_file_listing_them_all(tmp_path: Path) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "publish.yml").write_text("mine\n")
    (tmp_path / "requirements.txt").write_text("mine\n")
    with pytest.raises(PoolError) as caught:
        init.init_pool(tmp_path, ORIGIN, "Pool", requirement=REQUIREMENT)
    assert "publish.yml" in caught.value.message and "requirements.txt" in caught.value.message
    assert files_of(tmp_path) == {".github/workflows/publish.yml", "requirements.txt"}
    assert (tmp_path / "requirements.txt").read_text() == "mine\n"


def test_keeps_an_existing_readme_and_gitignore(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Our repo\n")
    (tmp_path / ".gitignore").write_text("/notes/\n/site/")
    written = init.init_pool(tmp_path, ORIGIN, "Pool", requirement=REQUIREMENT)
    assert (tmp_path / "README.md").read_text() == "# Our repo\n"
    assert "dreampool keygen" in (tmp_path / "CONTRIBUTING.md").read_text(encoding="utf-8")
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["/notes/", "/site/"] and lines.count("/site/") == 1
    assert "*.key" in lines
    assert tmp_path / "README.md" not in written


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_keeps_keys_and_site_out_but_not_the_pool(tmp_path: Path) -> None:
    init.init_pool(tmp_path, ORIGIN, "Pool", requirement=REQUIREMENT)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=tmp_path).returncode == 0

    for path in (
        "site",  # a symlink to the live generation: not a folder to git
        "site/index.html",
        ".site.builds/a/index.html",
        ".site.builds/cache/scan",
        "me.key",
        "keys/ab.key",
        "PRIVATE+KEY+x+1+AA",
        "a.private",
    ):
        assert ignored(path), path
    for path in (
        "content/dreams/0123456789abcdef.json",
        "content/log/policy",
        "content/keys/x.yaml",
    ):
        assert not ignored(path), path


@pytest.mark.parametrize(
    ("origin", "title", "owners", "field"),
    [
        ("has space.example/x", "Pool", [], "--origin"),
        ("a+b.example", "Pool", [], "--origin"),
        ("/leading.example", "Pool", [], "--origin"),
        ("https://dreams.example.org/pool", "Pool", [], "--origin"),
        ("http://dreams.example.org", "Pool", [], "--origin"),
        ("git+ssh://dreams.example.org", "Pool", [], "--origin"),
        (ORIGIN, "", [], "--title"),
        (ORIGIN, "two\nlines", [], "--title"),
        (ORIGIN, "x" * 121, [], "--title"),
        (ORIGIN, "Pool", ["alice"], "--owner"),
        (ORIGIN, "Pool", ["@bad owner"], "--owner"),
    ],
)
def test_refuses_bad_settings_before_writing(
    tmp_path: Path, origin: str, title: str, owners: list[str], field: str
) -> None:
    with pytest.raises(InputError) as caught:
        init.init_pool(tmp_path / "pool", origin, title, owners=owners, requirement=REQUIREMENT)
    assert caught.value.problems[0].file == field
    assert not (tmp_path / "pool").exists()


def test_an_origin_may_have_a_port_and_a_colon_in_its_path(tmp_path: Path) -> None:
    for n, origin in enumerate(("dreams.example.org:8443/pool", "example.org/a:b", "localhost")):
        init.init_pool(tmp_path / str(n), origin, "Pool", requirement=REQUIREMENT)
        assert pool.load_config(tmp_path / str(n) / "content").origin == origin


def owner_of(codeowners: str, path: str) -> list[str] | None:
    """The owners GitHub asks to review a change to ``path`` (``[]``: none needed,
    ``None``: no rule matches). Gitignore-style patterns, as GitHub documents
    CODEOWNERS: ``*`` never crosses ``/``, ``**`` does; a leading or inner ``/``
    anchors at the root; a trailing ``/`` matches a folder's contents; a pattern
    that matches a folder matches everything in it; the last matching line wins."""
    found: list[str] | None = None
    for line in codeowners.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pattern, *owners = line.split()
        anchored = "/" in pattern.rstrip("/")
        body = pattern.strip("/")
        regex = "" if anchored else "(?:.*/)?"
        for part in re.split(r"(\*\*/|\*\*|\*|\?)", body):
            regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
                part, re.escape(part)
            )
        regex += "/.+" if pattern.endswith("/") else "(?:/.+)?"
        if re.fullmatch(regex, path):
            found = owners
    return found


OWNERS = ["@alice", "@org/maintainers"]
DREAM = "content/dreams/0123456789abcdef.json"
MAINTAINERS_OWN = (
    # What runs: a module shadowing pip or the standard library, Python's start-up
    # hooks, what pip reads, the workflows, the templates the site is built from.
    "pip.py",
    "pip/__init__.py",
    "sitecustomize.py",
    "usercustomize.py",
    "anything.py",
    "setup.py",
    "pyproject.toml",
    "requirements.txt",
    ".python-version",
    "x.pth",
    ".github/workflows/x.yml",
    ".github/CODEOWNERS",
    "templates/page.html",
    ".gitignore",
    "README.md",
    # The pool's trust: tiers, rotations, the log state, erasures, settings, salts.
    "content/keys/0123456789abcdef.yaml",
    "content/keys/.gitkeep",
    "content/rotations/0123456789abcdef.json",
    "content/log/policy",
    "content/log/history.jsonl",
    "content/log/checkpoints/12",
    "content/log/leaves/000/001",
    "content/pool.yaml",
    "content/erasures/0123456789abcdef.json",
    "content/dreams/0123456789abcdef.salt",
    "content/dreams/.gitkeep",
    "content/dreams/sub/0123456789abcdef.json",
    "content/dreams/0123456789abcdef.json.py",
    "content/sitecustomize.py",
    "content/x.pth",
    # What the build writes, if a pull request committed it instead.
    ".site.builds/a/index.html",
    "site",
    "site/index.html",
    "x/content/dreams/0123456789abcdef.json",
)


def test_the_codeowners_matcher_reads_last_match_wins() -> None:
    """The reading of GitHub's rules the next tests rely on, and the trap in them:
    a carve-out of the whole dreams folder would leave the salts to anyone."""
    naive = "*  @m\n/content/dreams/\n"
    assert owner_of(naive, "content/dreams/0123456789abcdef.salt") == []
    assert owner_of(naive + "/content/dreams/*.salt @m\n", "content/dreams/a.salt") == ["@m"]
    assert owner_of("/content/keys/ @m\n", "content/keys") is None
    assert owner_of("/content/keys/ @m\n", "x/content/keys/a") is None
    assert owner_of("docs/ @m\n", "x/docs/a") == ["@m"]
    assert owner_of("/a/*.json\n", "a/b/c.json") is None
    assert owner_of("*.py @m\n", "a/b/c.py") == ["@m"]
    assert owner_of("/a/**/c @m\n", "a/c") == owner_of("/a/**/c @m\n", "a/x/y/c") == ["@m"]


def test_codeowners_own_every_file_but_a_dream(tmp_path: Path) -> None:
    """Everything that could shadow a module or change what runs (pip.py,
    sitecustomize.py, requirements.txt, the workflows, ...) and everything that
    holds the pool's trust needs the maintainers; a dream, signed and checked, no one."""
    init.init_pool(tmp_path, ORIGIN, "Pool", owners=OWNERS, requirement=REQUIREMENT)
    rules = (tmp_path / ".github" / "CODEOWNERS").read_text()
    for path in MAINTAINERS_OWN:
        assert owner_of(rules, path) == OWNERS, path
    assert owner_of(rules, DREAM) == []
    # A folder named like a dream matches the carve-out; check refuses it.
    assert owner_of(rules, DREAM + "/pip.py") == []
    (tmp_path / DREAM).mkdir()
    problems, _ = pool.check(tmp_path / "content")
    assert [p.rule for p in problems if p.file.endswith(".json")], problems


def test_codeowners_cover_the_key_directory(tmp_path: Path) -> None:
    """A key file, a contributor's first (guest) one included, needs a maintainer:
    tiers are set there (THREATS.md T37)."""
    init.init_pool(tmp_path, ORIGIN, "Pool", owners=OWNERS, requirement=REQUIREMENT)
    rules = (tmp_path / ".github" / "CODEOWNERS").read_text()
    for path in ("content/keys/0123456789abcdef.yaml", "content/keys/new.yaml", "content/keys"):
        assert owner_of(rules, path) == OWNERS, path
    bare = init.codeowners(())
    assert all(line.startswith("#") for line in bare.splitlines())
    uncommented = "\n".join(line.removeprefix("# ") for line in bare.splitlines())
    assert owner_of(uncommented, "pip.py") == ["@MAINTAINER"]
    assert owner_of(uncommented, DREAM) == []


def test_this_repositorys_codeowners_is_the_scaffolds() -> None:
    """The sample pool's CODEOWNERS, like its workflows, is what `init` writes."""
    assert (REPO / ".github" / "CODEOWNERS").read_text(encoding="utf-8") == init.codeowners(())


def test_cli_init(tmp_path: Path, run: Any) -> None:
    require_wiring()
    result = run(
        "init", tmp_path / "p", "--origin", ORIGIN, "--title", "Pool", "--owner", "@a",
        "--requirement", REQUIREMENT,
    )  # fmt: skip
    assert result.code == 0, result
    assert f"wrote {tmp_path / 'p' / 'content' / 'pool.yaml'}" in result.out
    assert "log-keygen --origin " + ORIGIN in result.err
    assert f"requirements.txt installs {REQUIREMENT}: given with --requirement" in result.err
    assert (tmp_path / "p" / "requirements.txt").read_text().splitlines()[-1] == REQUIREMENT
    again = run("init", tmp_path / "p", "--origin", ORIGIN, "--title", "Pool")
    assert again.code == 1 and "already a pool" in again.err


# --- what requirements.txt names ------------------------------------------------------

COMMIT = "3f1c0d2a9b8e7f6011223344556677889900aabb"


class Installed:
    """A stand-in for the installed distribution: its version and direct_url.json."""

    def __init__(self, direct_url: dict[str, Any] | str | None, version: str = "0.1.0") -> None:
        self.version = version
        self.text = json.dumps(direct_url) if isinstance(direct_url, dict) else direct_url

    def read_text(self, name: str) -> str | None:
        return {"direct_url.json": self.text, "INSTALLER": "pip\n"}.get(name)


def installed_as(monkeypatch: pytest.MonkeyPatch, direct_url: dict[str, Any] | str | None) -> None:
    def distributions(name: str) -> list[Installed]:
        assert name == "dreampool"
        return [Installed(direct_url)]

    monkeypatch.setattr(init.metadata, "distributions", distributions)


@pytest.mark.parametrize(
    ("direct_url", "line"),
    [
        # pip install "dreampool @ git+https://github.com/example/dreampool@<commit>"
        (
            {
                "url": "https://github.com/example/dreampool",
                "vcs_info": {"vcs": "git", "commit_id": COMMIT, "requested_revision": "main"},
            },
            f"dreampool @ git+https://github.com/example/dreampool@{COMMIT}",
        ),
        (
            {
                "url": "https://git.example/mono.git",
                "vcs_info": {"vcs": "git", "commit_id": COMMIT},
                "subdirectory": "python/dreampool",
            },
            f"dreampool @ git+https://git.example/mono.git@{COMMIT}#subdirectory=python/dreampool",
        ),
        (
            {
                "url": "https://files.example/dreampool-0.1.0-py3-none-any.whl",
                "archive_info": {"hashes": {"sha256": "ab" * 32}},
            },
            "dreampool @ https://files.example/dreampool-0.1.0-py3-none-any.whl#sha256="
            + "ab" * 32,
        ),
        # pip install dreampool: from an index, no direct_url.json
        (None, "dreampool==0.1.0"),
    ],
)
def test_requirement_is_what_installed_this_dreampool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct_url: Any, line: str
) -> None:
    """Given no --requirement, requirements.txt names where this dreampool came
    from, read from its PEP 610 record, when a runner can install it from there."""
    installed_as(monkeypatch, direct_url)
    assert init.installed_requirement().line == line
    init.init_pool(tmp_path, ORIGIN, "Pool")
    assert (tmp_path / "requirements.txt").read_text().splitlines()[-1] == line


@pytest.mark.parametrize(
    ("direct_url", "says"),
    [
        ({"url": "file:///srv/src/dreampool", "dir_info": {"editable": True}}, "the folder"),
        ({"url": "file:///srv/src/dreampool", "dir_info": {}}, "/srv/src/dreampool, which"),
        (
            {"url": "file:///tmp/dreampool-0.1.0-py3-none-any.whl", "archive_info": {}},
            "a file on this machine",
        ),
        (
            {"url": "file:///srv/git/dreampool", "vcs_info": {"vcs": "git", "commit_id": COMMIT}},
            "which a runner cannot reach",
        ),
        (
            {
                "url": "ssh://git@github.com/example/dreampool",
                "vcs_info": {"vcs": "git", "commit_id": COMMIT},
            },
            "which a runner cannot reach",
        ),
        (
            {"url": "https://hg.example/dreampool", "vcs_info": {"vcs": "hg", "commit_id": "1"}},
            "not a git commit",
        ),
        ("{not json", "unreadable"),
    ],
)
def test_requirement_is_never_a_pin_a_runner_cannot_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct_url: Any, says: str
) -> None:
    """Installed from this machine, or from where a runner cannot reach: init
    refuses, before writing anything, and says to pass --requirement."""
    installed_as(monkeypatch, direct_url)
    with pytest.raises(InputError) as caught:
        init.init_pool(tmp_path / "pool", ORIGIN, "Pool")
    (problem,) = caught.value.problems
    assert problem.file == "--requirement" and says in problem.rule, problem.rule
    assert "pass --requirement 'dreampool @ git+https://" in (caught.value.hint or "")
    assert not (tmp_path / "pool").exists()


def test_a_checkouts_commit_is_the_requirement_suggested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pip install -e .` in a clone: the hint names the clone's commit at its origin."""
    clone = tmp_path / "dreampool"
    env = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (
        ["init", "-q", "-b", "main", str(clone)],
        ["-C", str(clone), "remote", "add", "origin", "https://github.com/example/dreampool"],
        ["-C", str(clone), "-c", "user.name=T", "-c", "user.email=t@example.invalid",
         "commit", "-q", "--allow-empty", "-m", "x"],
    ):  # fmt: skip
        subprocess.run(["git", *args], check=True, env={**os.environ, **env})
    head = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    installed_as(monkeypatch, {"url": clone.as_uri(), "dir_info": {"editable": True}})
    with pytest.raises(InputError) as caught:
        init.installed_requirement()
    assert f"pass --requirement 'dreampool @ git+https://github.com/example/dreampool@{head}'" in (
        caught.value.hint or ""
    )


def test_this_editable_install_is_refused_not_pinned_to_an_unpublished_release(
    tmp_path: Path, run: Any
) -> None:
    """The defect: init wrote `dreampool==0.1.0`, which no index serves, so a new
    pool's workflows could not install their own builder. Run from this checkout
    (`pip install -e .`), init now says to pass --requirement and writes nothing."""
    result = run("init", tmp_path / "p", "--origin", ORIGIN, "--title", "Pool")
    assert result.code == 1, result
    assert "dreampool: error: --requirement: not given" in result.err
    assert "dreampool: hint: pass --requirement 'dreampool @ git+https://" in result.err
    assert not (tmp_path / "p").exists()


def test_init_says_which_requirement_it_wrote_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Any
) -> None:
    installed_as(
        monkeypatch,
        {
            "url": "https://github.com/example/dreampool",
            "vcs_info": {"vcs": "git", "commit_id": COMMIT},
        },
    )
    result = run("init", tmp_path / "p", "--origin", ORIGIN, "--title", "Pool")
    assert result.code == 0, result
    line = f"dreampool @ git+https://github.com/example/dreampool@{COMMIT}"
    assert (
        f"dreampool: requirements.txt installs {line}: this dreampool was installed from "
        f"https://github.com/example/dreampool at commit {COMMIT}" in result.err
    )


# --- the workflows --------------------------------------------------------------------


def workflow_files() -> dict[str, str]:
    """This repository's workflows and the scaffold's, by a readable name."""
    found = {f"repo {p.name}": p.read_text() for p in (REPO / ".github/workflows").glob("*.yml")}
    found.update({f"scaffold {n}": init.workflow(n) for n in init.WORKFLOWS})
    found["scaffold s3 publish.yml"] = init.workflow("publish.yml", host="s3")
    return found


def test_the_sample_pools_workflows_are_the_scaffolds() -> None:
    """This repository publishes its sample pool with exactly what `init` gives a pool,
    installing dreampool from the checkout instead of requirements.txt."""
    for name in init.WORKFLOWS:
        shipped = (REPO / ".github" / "workflows" / name).read_text(encoding="utf-8")
        assert shipped == init.workflow(name, init.INSTALL_CHECKOUT, base=""), name


def test_every_action_is_pinned_to_a_commit_with_its_version() -> None:
    seen: dict[str, set[tuple[str, str]]] = {}
    for name, text in workflow_files().items():
        for line in text.splitlines():
            if "uses:" not in line:
                continue
            match = _PINNED.match(line)
            assert match, f"{name}: {line.strip()} is not pinned as `uses: a/b@<40 hex> # vX.Y.Z`"
            seen.setdefault(match[1], set()).add((match[2], match[3]))
    # One repository of actions, one pin, across every workflow.
    assert all(len(pins) == 1 for pins in seen.values()), seen
    assert {"actions/configure-pages", "actions/upload-pages-artifact", "actions/deploy-pages"} <= (
        set(seen)
    )


def jobs(text: str) -> dict[str, Any]:
    return dict(yaml.safe_load(text)["jobs"])


def test_no_expression_reaches_a_shell() -> None:
    """Expressions only in env:, with:, if: — never spliced into a script."""
    for name, text in workflow_files().items():
        for job in jobs(text).values():
            for step in job["steps"]:
                assert "${{" not in step.get("run", ""), name


def test_check_compares_the_pull_request_with_its_target_branch() -> None:
    """The check run holds the pull request's merge commit and its first parent,
    the target branch (fetch-depth 2), and `dreampool check --base HEAD^1` compares
    them. (What --base refuses is `dreampool check`'s to test.)"""
    for text in (init.workflow("check.yml"),):
        steps = jobs(text)["check"]["steps"]
        checkout = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@")]
        assert [s["with"]["fetch-depth"] for s in checkout] == [2]
        runs = [s["run"] for s in steps if "dreampool check" in s.get("run", "")]
        assert runs == [
            "dreampool check --content content --base HEAD^1 --format github"
            ' --summary "$GITHUB_STEP_SUMMARY"'
        ]


def test_publish_holds_the_key_in_one_step_and_least_privilege() -> None:
    text = init.workflow("publish.yml")
    flow = yaml.safe_load(text)
    assert flow["permissions"] == {}
    assert flow["concurrency"] == {"group": "pages", "cancel-in-progress": False}
    assert set(flow[True]) == {"push", "workflow_dispatch"}
    assert flow[True]["push"] == {"branches": ["main"]}
    build, deploy = flow["jobs"]["build"], flow["jobs"]["deploy"]
    assert build["permissions"] == {"contents": "write", "pages": "read"}
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    holders = [s for s in build["steps"] if "secrets." in str(s.get("env", {}))]
    assert [s["id"] for s in holders] == ["build"]
    assert holders[0]["env"]["DREAMPOOL_LOG_KEY"] == "${{ secrets.DREAMPOOL_LOG_KEY }}"
    assert text.count("secrets.") == 1
    assert "--log-key" not in text
    checkout = build["steps"][0]
    assert checkout["with"]["persist-credentials"] is False and checkout["with"]["ref"] == "main"
    # The log state is pushed before the site is uploaded: never a site ahead of main.
    names = [s.get("name") for s in build["steps"]]
    assert names.index("Commit the log state to main") < names.index("Upload the site")


# --- --host s3: publish to a bucket with `dreampool deploy` ------------------------------

# aws-actions/configure-aws-credentials, tag v6.2.3 (a lightweight tag on this commit).
_AWS_CREDENTIALS = (
    "aws-actions/configure-aws-credentials@e6de054238d6b7531b4efff3b6587d9aade6a06c # v6.2.3"
)
_PAGES_ACTIONS = ("configure-pages", "upload-pages-artifact", "deploy-pages")


def test_host_s3_writes_the_same_files_and_a_publish_that_deploys_to_a_bucket(
    tmp_path: Path,
) -> None:
    pages, s3 = tmp_path / "pages", tmp_path / "s3"
    init.init_pool(pages, ORIGIN, "Pool", requirement=REQUIREMENT)
    written = init.init_pool(s3, ORIGIN, "Pool", requirement=REQUIREMENT, host="s3")
    assert {p.relative_to(s3).as_posix() for p in written} == SCAFFOLD
    assert files_of(s3) == SCAFFOLD
    problems, _ = pool.check(s3 / "content")
    assert problems == []
    for same in ("README.md", ".github/CODEOWNERS", ".github/workflows/check.yml"):
        assert (s3 / same).read_bytes() == (pages / same).read_bytes(), same
    requirements = (s3 / "requirements.txt").read_text(encoding="utf-8")
    assert requirements.splitlines()[-1] == REQUIREMENT.replace("dreampool @", "dreampool[s3] @")
    assert "bucket's public address" in (s3 / "content" / "pool.yaml").read_text()
    text = (s3 / ".github" / "workflows" / "publish.yml").read_text(encoding="utf-8")
    assert text == init.workflow("publish.yml", host="s3")
    assert text != (pages / ".github" / "workflows" / "publish.yml").read_text(encoding="utf-8")


def test_host_s3_publish_deploys_with_dreampool_deploy_and_no_pages_step() -> None:
    text = init.workflow("publish.yml", host="s3")
    flow = yaml.safe_load(text)
    assert list(flow["jobs"]) == ["build"]  # no Pages deploy job
    for action in _PAGES_ACTIONS:
        assert action not in text, action
    assert "pages:" not in text and "page_url" not in text
    build = flow["jobs"]["build"]
    # id-token on this job only, the one that deploys; never for the whole workflow.
    assert flow["permissions"] == {}
    assert build["permissions"] == {"contents": "write", "id-token": "write"}
    assert text.count("id-token: write") == 1
    names = [s.get("name") for s in build["steps"]]
    # The log state reaches main before any credential is asked for or any byte deployed.
    assert names[-3:] == ["Commit the log state to main", "Assume the AWS role", "Deploy the site"]
    assume, deploy = build["steps"][-2:]
    # Pinned by the full commit of a release, with its version (the shared pin check
    # is test_every_action_is_pinned_to_a_commit_with_its_version).
    assert f"uses: {_AWS_CREDENTIALS}" in text
    assert assume["if"] == "${{ vars.AWS_ROLE_ARN != '' }}"
    assert assume["with"]["role-to-assume"] == "${{ vars.AWS_ROLE_ARN }}"
    assert assume["with"]["aws-region"] == "${{ vars.AWS_REGION }}"
    # The credentials come back as outputs, for the deploy step only, not GITHUB_ENV.
    assert assume["with"]["output-credentials"] is True
    assert assume["with"]["output-env-credentials"] is False
    env = deploy["env"]
    assert env["AWS_ACCESS_KEY_ID"] == (
        "${{ steps.aws.outputs.aws-access-key-id || secrets.S3_ACCESS_KEY_ID }}"
    )
    assert env["AWS_SECRET_ACCESS_KEY"] == (
        "${{ steps.aws.outputs.aws-secret-access-key || secrets.S3_SECRET_ACCESS_KEY }}"
    )
    assert env["AWS_SESSION_TOKEN"] == "${{ steps.aws.outputs.aws-session-token }}"
    assert env["DREAMPOOL_S3_URL"] == "${{ vars.DREAMPOOL_S3_URL }}"
    assert env["DREAMPOOL_S3_ENDPOINT"] == "${{ vars.DREAMPOOL_S3_ENDPOINT }}"
    assert 'dreampool deploy "$DREAMPOOL_S3_URL"' in deploy["run"]
    assert "${{" not in deploy["run"]  # secrets and variables reach the script by env only
    # The log key is still held by the build step alone; the bucket's secrets by deploy alone.
    holders = {s.get("name"): s["env"] for s in build["steps"] if "secrets." in str(s.get("env"))}
    assert set(holders) == {"Build", "Deploy the site"}
    assert holders["Build"] == {"DREAMPOOL_LOG_KEY": "${{ secrets.DREAMPOOL_LOG_KEY }}"}
    assert "DREAMPOOL_LOG_KEY" not in text.split("- name: Deploy the site")[1]


def test_host_s3_builds_exactly_as_pages_does() -> None:
    """The same steps up to the log commit, in order, but the Pages URL: the
    checks, the cache, the commit; the s3 build takes base_url from pool.yaml."""
    pages = jobs(init.workflow("publish.yml"))["build"]
    s3 = jobs(init.workflow("publish.yml", host="s3"))["build"]
    for key in ("if", "runs-on", "timeout-minutes", "environment"):
        assert s3[key] == pages[key], key

    def upto_commit(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names = [s.get("name") for s in steps]
        return steps[: names.index("Commit the log state to main") + 1]

    ours = upto_commit(s3["steps"])
    theirs = [s for s in upto_commit(pages["steps"]) if s.get("id") != "pages"]
    assert [s.get("name") for s in ours] == [s.get("name") for s in theirs]
    for mine, other in zip(ours, theirs, strict=True):
        if mine.get("id") == "build":
            assert mine["env"] == {"DREAMPOOL_LOG_KEY": other["env"]["DREAMPOOL_LOG_KEY"]}
            assert mine["run"] == (
                'dreampool build --content content --out site | tee -a "$GITHUB_STEP_SUMMARY"'
            )
            assert other["run"].startswith("dreampool build --content content --out site ")
        else:
            assert mine == other, mine.get("name")


@pytest.mark.parametrize(
    ("given", "wanted"),
    [
        ("dreampool==0.2.0", "dreampool[s3]==0.2.0"),
        (REQUIREMENT, REQUIREMENT.replace("dreampool @", "dreampool[s3] @")),
        (
            "dreampool[test] @ https://x.example/d.whl",
            "dreampool[test,s3] @ https://x.example/d.whl",
        ),
        ("dreampool[s3]>=0.2", "dreampool[s3]>=0.2"),
        ("  dreampool  ", "dreampool[s3]"),
    ],
)
def test_the_s3_extra_is_added_to_the_requirement(given: str, wanted: str) -> None:
    assert init.with_extra(given, "s3") == wanted


def test_an_s3_requirement_must_name_the_package(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        init.init_pool(
            tmp_path / "p", ORIGIN, "Pool", requirement="git+https://x.example/d", host="s3"
        )
    assert [p.file for p in caught.value.problems] == ["--requirement"]
    assert "add the [s3] extra to" in caught.value.problems[0].rule
    assert not (tmp_path / "p").exists()


def test_an_unknown_host_is_refused_before_writing(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        init.init_pool(tmp_path / "p", ORIGIN, "Pool", requirement=REQUIREMENT, host="ftp")
    (problem,) = caught.value.problems
    assert problem.file == "--host"
    assert problem.rule == "must be one of pages, s3 (where publish.yml deploys the site), is 'ftp'"
    assert not (tmp_path / "p").exists()
    with pytest.raises(ValueError, match="no host 'ftp'"):
        init.workflow("publish.yml", host="ftp")


def test_cli_init_host_s3(tmp_path: Path, run: Any) -> None:
    require_wiring()
    result = run(
        "init", tmp_path / "p", "--origin", ORIGIN, "--title", "Pool", "--host", "s3",
        "--requirement", REQUIREMENT,
    )  # fmt: skip
    assert result.code == 0, result
    s3_requirement = REQUIREMENT.replace("dreampool @", "dreampool[s3] @")
    assert f"requirements.txt installs {s3_requirement}: given with --requirement" in result.err
    assert "DREAMPOOL_S3_URL" in result.err and "AWS_ROLE_ARN" in result.err
    assert "Settings → Pages" not in result.err
    workflow = (tmp_path / "p" / ".github" / "workflows" / "publish.yml").read_text()
    assert workflow == init.workflow("publish.yml", host="s3")
    bad = run("init", tmp_path / "q", "--origin", ORIGIN, "--title", "Pool", "--host", "ftp")
    assert bad.code == 2
    # argparse's own message (its quoting of the choices differs between Pythons)
    assert "argument --host: invalid choice: 'ftp' (choose from " in bad.err
    assert "pages" in bad.err.split("choose from")[1] and "s3" in bad.err.split("choose from")[1]
    assert not (tmp_path / "q").exists()


def test_host_s3_adds_the_extra_to_the_installed_dreampool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Any
) -> None:
    """Without --requirement, the dreampool that runs, as for Pages, with [s3]."""
    installed_as(monkeypatch, None)  # from a package index: dreampool==0.1.0
    result = run("init", tmp_path / "p", "--origin", ORIGIN, "--title", "Pool", "--host", "s3")
    assert result.code == 0, result
    assert (tmp_path / "p" / "requirements.txt").read_text().splitlines()[-1] == (
        "dreampool[s3]==0.1.0"
    )
    assert (
        "dreampool: requirements.txt installs dreampool[s3]==0.1.0: dreampool 0.1.0 was "
        "installed from a package index" in result.err
    )
    assert "with the s3 extra `dreampool deploy` needs" in result.err
