"""The publishing flow, replayed from the workflow files in a scratch git repository.

Nothing here restates what the workflows do: :class:`Runner` reads the
``check.yml`` and ``publish.yml`` that ``dreampool init`` wrote and runs their
``run:`` steps with bash, as GitHub's ``shell: bash`` does (``-eo pipefail``),
with the step's ``env`` filled from the expressions it knows (the log key
secret, the Pages URL, the token). The few ``uses:`` steps are stood in for:
checkout is the fresh clone each run starts from, configure-pages yields the
base URL, upload-pages-artifact must find the built ``site/``, and deploy-pages
"serves" it by copying it aside. A bare repository plays GitHub.

The story (the issue's acceptance test): init → a contributor's branch adds a
signed dream → check passes, and fails with an annotation for a broken one →
merge → publish commits the log state to main → another merge, and main moving
during the publish → the second checkpoint is consistent with the first and
the first proofs are byte-identical. Along the way: a publish without the log
key succeeds when there is nothing to sign, and fails, deploying nothing,
when there is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from builder.readers import lightclient
from tests.conftest import REPO, draft

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

ORIGIN = "flow.example/pool"
PAGES_URL = "https://flow.example/pool"
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def cli_wired() -> bool:
    """Whether builder/cli/main.py has `dreampool init` and `check --summary` yet."""
    from builder.cli import main as cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    choices: Mapping[str, Any] = sub.choices or {}  # type: ignore[assignment]
    check = choices.get("check")
    return "init" in choices and check is not None and "--summary" in check._option_string_actions


def require_wiring() -> None:
    """Skip until the CLI is wired, except in CI, where a missing wiring fails."""
    if cli_wired():
        return
    message = "builder/cli/main.py does not wire `dreampool init` and `check --summary` yet"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


# --- the shell the workflows run in ---------------------------------------------------


@dataclass
class Shell:
    """Environment for commands: this tree's dreampool on PATH, git without user config."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def make(cls, root: Path) -> Shell:
        bin_dir = root / "bin"
        bin_dir.mkdir(parents=True)
        shim = bin_dir / "dreampool"
        # The dreampool of the tree under test, whatever is installed.
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m builder "$@"\n', encoding="utf-8")
        shim.chmod(0o755)
        home = root / "home"  # outside every git tree, so the key store accepts it
        home.mkdir()
        env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO),
            "HOME": str(home),
            "DREAMPOOL_HOME": str(home / "dreampool"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
            "GIT_AUTHOR_NAME": "Tester",
            "GIT_AUTHOR_EMAIL": "tester@example.invalid",
            "GIT_COMMITTER_NAME": "Tester",
            "GIT_COMMITTER_EMAIL": "tester@example.invalid",
            "LANG": "C.UTF-8",
        }
        (home / "gitconfig").write_text(
            "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n", encoding="utf-8"
        )
        return cls(root, env)

    def run(
        self, *args: str | Path, cwd: Path, check: bool = True, env: Mapping[str, str] = {}
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(a) for a in args],
            cwd=cwd,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{args} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        return result

    def git(self, *args: str | Path, cwd: Path) -> str:
        return self.run("git", *args, cwd=cwd).stdout


# --- the workflow runner ------------------------------------------------------------


@dataclass
class RunResult:
    ok: bool
    log: str
    summary: str
    outputs: dict[str, dict[str, str]]
    deployed: Path | None


class Runner:
    """Runs one workflow file's jobs, step by step, in a checkout."""

    def __init__(self, shell: Shell, workflow: Path, caches: Path | None = None) -> None:
        self.shell = shell
        self.workflow = yaml.safe_load(workflow.read_text(encoding="utf-8"))
        self.name = workflow.name
        # GitHub's cache service, for actions/cache/restore and save: one folder
        # per key, numbered in the order saved (main's scope: the only one here).
        self.caches = caches

    def run(
        self,
        workspace: Path,
        *,
        secrets: Mapping[str, str] = {},
        stand_in: Callable[[Path], None] | None = None,
        run_id: str = "4242",
    ) -> RunResult:
        """Run every job in ``workspace`` (a fresh checkout); ``stand_in`` runs just
        before the first ``run:`` step that pushes, to play another actor."""
        scratch = workspace.parent / f".runner-{workspace.name}"
        scratch.mkdir(exist_ok=True)
        summary_file = scratch / "summary.md"
        summary_file.touch()
        log: list[str] = []
        outputs: dict[str, dict[str, str]] = {}
        outcomes: dict[str, str] = {}
        deployed: Path | None = None
        ok = True
        for job_name, job in self.workflow["jobs"].items():
            if "needs" in job and not ok:
                break
            for step in job["steps"]:
                step_id = step.get("id", "")
                condition = str(step.get("if", ""))
                if not ok and "!cancelled()" not in condition:
                    outcomes[step_id] = "skipped"
                    continue
                context = {
                    "secrets.DREAMPOOL_LOG_KEY": secrets.get("DREAMPOOL_LOG_KEY", ""),
                    "steps.pages.outputs.base_url": outputs.get("pages", {}).get("base_url", ""),
                    "github.token": "ghs_dummy-token-for-the-replay",
                    "github.run_id": run_id,
                    "github.run_attempt": "1",
                }
                env = {
                    key: _evaluate(str(value), context)
                    for key, value in (step.get("env") or {}).items()
                }
                uses = str(step.get("uses", ""))
                outcome = "success"
                if uses.startswith("actions/cache/"):
                    given = {k: _evaluate(str(v), context) for k, v in step["with"].items()}
                    log.append(
                        f"$ [{job_name}] {step.get('name')}\n{self._cache(uses, given, workspace)}"
                    )
                elif uses:
                    outcome, deployed = self._stand_in_for(
                        uses, step_id, workspace, outputs, deployed
                    )
                elif step.get("name") == "Install dreampool":
                    assert "pip install" in step["run"]  # dreampool is on PATH already
                else:
                    script = step["run"]
                    assert "${{" not in script, f"{self.name}: an expression inside run:"
                    if stand_in is not None and "git" in script and "push" in script:
                        stand_in(workspace)
                        stand_in = None
                    output_file = scratch / f"output-{step_id or 'step'}"
                    output_file.write_text("", encoding="utf-8")
                    result = self.shell.run(
                        "bash",
                        "--noprofile",
                        "--norc",
                        "-eo",
                        "pipefail",
                        "-c",
                        script,
                        cwd=workspace,
                        check=False,
                        env={
                            **env,
                            "GITHUB_STEP_SUMMARY": str(summary_file),
                            "GITHUB_OUTPUT": str(output_file),
                            "GITHUB_WORKSPACE": str(workspace),
                            "GITHUB_RUN_ID": "4242",
                        },
                    )
                    log.append(f"$ [{job_name}] {step.get('name')}\n{result.stdout}{result.stderr}")
                    if result.returncode != 0:
                        outcome = "failure"
                outcomes[step_id] = outcome
                if outcome == "failure":
                    ok = False
        return RunResult(
            ok, "\n".join(log), summary_file.read_text(encoding="utf-8"), outputs, deployed
        )

    def _cache(self, uses: str, given: Mapping[str, str], workspace: Path) -> str:
        """actions/cache/restore (the exact key, else the newest saved under a
        restore-keys prefix) and actions/cache/save (never over a key that
        exists), copying the paths with their times, and links as links."""
        assert self.caches is not None, f"{self.name}: a cache step, but no cache service"
        self.caches.mkdir(exist_ok=True)
        key, paths = given["key"], given["path"].split()
        saved = sorted(self.caches.iterdir())  # "<order>-<key>"
        if uses.startswith("actions/cache/restore@"):
            prefixes = given.get("restore-keys", "").split()
            found = [e for e in saved if e.name.split("-", 1)[1] == key] or [
                e for e in saved if any(e.name.split("-", 1)[1].startswith(p) for p in prefixes)
            ]
            if not found:
                return "Cache not found"
            _copy_paths(found[-1], workspace, paths)
            return f"Cache restored from key: {found[-1].name.split('-', 1)[1]}"
        assert uses.startswith("actions/cache/save@"), uses
        if any(e.name.split("-", 1)[1] == key for e in saved):
            return f"Failed to save: a cache with the key {key} exists"
        entry = self.caches / f"{len(saved):04d}-{key}"
        entry.mkdir()
        _copy_paths(workspace, entry, paths)
        return f"Cache saved with key: {key}"

    def _stand_in_for(
        self,
        uses: str,
        step_id: str,
        workspace: Path,
        outputs: dict[str, dict[str, str]],
        deployed: Path | None,
    ) -> tuple[str, Path | None]:
        action = uses.split("@", 1)[0]
        if action == "actions/configure-pages":
            outputs[step_id] = {"base_url": PAGES_URL, "base_path": "/pool"}
        elif action == "actions/upload-pages-artifact":
            site = workspace / "site"
            if not (site / "index.html").is_file():
                return "failure", deployed
            deployed = workspace.parent / f"{workspace.name}-artifact"
            shutil.copytree(site, deployed)
        elif action not in ("actions/checkout", "actions/setup-python", "actions/deploy-pages"):
            raise AssertionError(f"{self.name}: no stand-in for {uses}")
        return "success", deployed


def _copy_paths(source: Path, target: Path, paths: list[str]) -> None:
    """What tar does for actions/cache: each path that exists, times kept, links as links."""
    for rel in paths:
        here = source / rel
        if here.is_symlink():
            os.symlink(os.readlink(here), target / rel)
        elif here.is_dir():
            shutil.copytree(here, target / rel, symlinks=True)


def _evaluate(value: str, context: Mapping[str, str]) -> str:
    """Replace each ``${{ expression }}`` the replay knows; any other fails the test."""
    return _EXPRESSION.sub(lambda m: context[m.group(1)], value)


# --- the story ----------------------------------------------------------------------


@dataclass
class World:
    shell: Shell
    remote: Path  # the bare repository standing in for GitHub
    root: Path
    runs: int = 0

    def clone(self, name: str, branch: str = "main") -> Path:
        path = self.root / name
        self.shell.git("clone", "--quiet", "--branch", branch, self.remote, path, cwd=self.root)
        return path

    def runner_checkout(self) -> Path:
        """What actions/checkout gives a run: a fresh clone of main."""
        self.runs += 1
        return self.clone(f"run{self.runs}")

    def workflow(self, checkout: Path, name: str) -> Runner:
        return Runner(self.shell, checkout / ".github" / "workflows" / name, self.root / "caches")

    def publish(self, **kwargs: Any) -> tuple[Path, RunResult]:
        checkout = self.runner_checkout()
        run = self.workflow(checkout, "publish.yml")
        return checkout, run.run(checkout, run_id=str(self.runs), **kwargs)

    def check_pull_request(self, branch: str) -> RunResult:
        """What a pull_request run checks out: the merge commit of the branch into
        main, whose first parent (HEAD^1) is main."""
        checkout = self.clone(f"pr-{branch.replace('/', '-')}")
        self.shell.git("merge", "--quiet", "--no-ff", "-m", f"Merge {branch} into main",
                       f"origin/{branch}", cwd=checkout)  # fmt: skip
        return self.workflow(checkout, "check.yml").run(checkout)

    def merge(self, branch: str) -> None:
        maintainer = self.root / "maintainer"
        self.shell.git("pull", "--quiet", "--ff-only", cwd=maintainer)
        self.shell.git("fetch", "--quiet", "origin", branch, cwd=maintainer)
        self.shell.git(
            "merge", "--quiet", "--no-ff", "-m", f"Merge {branch}", "FETCH_HEAD", cwd=maintainer
        )
        self.shell.git("push", "--quiet", "origin", "main", cwd=maintainer)


def contributor_dream(world: World, who: str, branch: str, title: str) -> str:
    """A contributor's whole flow: keygen, draft, sign, submit, commit, push a branch."""
    shell = world.shell
    clone = world.root / f"contrib-{who}"
    if not clone.exists():
        world.clone(clone.name)
        keygen = shell.run("dreampool", "keygen", "--author", who, cwd=clone).stdout
        (clone.parent / f"{who}.keyid").write_text(
            re.search(r"keyId\s+(\S+)", keygen).group(1),  # type: ignore[union-attr]
            encoding="utf-8",
        )
    key_id = (clone.parent / f"{who}.keyid").read_text(encoding="utf-8")
    shell.git("fetch", "--quiet", "origin", cwd=clone)
    shell.git("switch", "--quiet", "-c", branch, "origin/main", cwd=clone)
    draft_file = clone.parent / f"{who}-{branch.replace('/', '-')}.json"
    draft_file.write_text(json.dumps(draft(author=who, title=title)), encoding="utf-8")
    signed = draft_file.with_suffix(".signed.json")
    shell.run("dreampool", "sign", draft_file, "--key", key_id, "-o", signed, cwd=clone)
    out = shell.run("dreampool", "submit", signed, "--content", "content", cwd=clone).stdout
    dream_id = re.search(r"added ([0-9a-f]{16})", out).group(1)  # type: ignore[union-attr]
    shell.git("add", "content", cwd=clone)
    shell.git("commit", "--quiet", "-m", f"Dream: {title}", cwd=clone)
    shell.git("push", "--quiet", "origin", branch, cwd=clone)
    return dream_id


@pytest.fixture
def world(tmp_path: Path) -> World:
    require_wiring()
    shell = Shell.make(tmp_path / "env")
    remote = tmp_path / "github.git"
    shell.git("init", "--quiet", "--bare", "--initial-branch", "main", remote, cwd=tmp_path)
    maintainer = tmp_path / "maintainer"
    shell.run(
        "dreampool", "init", maintainer, "--origin", ORIGIN, "--title", "Flow pool",
        "--owner", "@maintainers",
        # The replay skips the install step (this tree's dreampool is on PATH); what
        # a pool's requirement installs is tests/test_wheel.py's to prove.
        "--requirement", "dreampool @ git+https://github.com/example/dreampool@" + "0" * 40,
        cwd=tmp_path,
    )  # fmt: skip
    shell.git("init", "--quiet", "--initial-branch", "main", cwd=maintainer)
    shell.git("add", "-A", cwd=maintainer)
    shell.git("commit", "--quiet", "-m", "Start the pool with dreampool init", cwd=maintainer)
    shell.git("remote", "add", "origin", remote, cwd=maintainer)
    shell.git("push", "--quiet", "-u", "origin", "main", cwd=maintainer)
    return World(shell, remote, tmp_path)


def log_key(world: World) -> str:
    """`dreampool log-keygen`, as the operator runs it; the private key stays in the store."""
    world.shell.run("dreampool", "log-keygen", "--origin", ORIGIN, cwd=world.root)
    keys = Path(world.shell.env["DREAMPOOL_HOME"]) / "keys"
    (path,) = keys.glob("log-*.key")
    return path.read_text(encoding="utf-8").strip()


def read_main(world: World, path: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(world.remote), "show", f"main:{path}"],
        capture_output=True,
        check=True,
        env={**os.environ, **world.shell.env},
    ).stdout


def test_init_check_merge_publish_twice(world: World) -> None:
    shell = world.shell
    key = log_key(world)

    # The first publish, before any dream: makes the log's policy and commits it.
    checkout, first = world.publish(secrets={"DREAMPOOL_LOG_KEY": key})
    assert first.ok, first.log
    assert "Cache not found" in first.log  # a cold build
    assert "Cache saved with key: dreampool-store-1-1" in first.log
    assert b"log " + ORIGIN.encode() in read_main(world, "content/log/policy")
    assert f"{PAGES_URL}/log/".encode() in read_main(world, "content/log/policy")
    assert key.encode() not in (checkout / "content" / "log" / "policy").read_bytes()

    # A contributor's pull request passes check, with a clean summary.
    ada = contributor_dream(world, "ada", "dream/parser", "Pin the parser version")
    passed = world.check_pull_request("dream/parser")
    assert passed.ok, passed.log
    assert "ok: content has no problems" in passed.log
    assert "No problems in content" in passed.summary

    # A broken one fails, annotated on its file, and listed in the summary.
    broken = world.root / "contrib-ada"
    shell.git("switch", "--quiet", "-c", "dream/broken", "dream/parser", cwd=broken)
    path = broken / "content" / "dreams" / f"{ada}.json"
    path.write_text(path.read_text(encoding="utf-8").replace("Pin the", "Pin a"), encoding="utf-8")
    shell.git("commit", "--quiet", "-am", "tamper", cwd=broken)
    shell.git("push", "--quiet", "origin", "dream/broken", cwd=broken)
    failed = world.check_pull_request("dream/broken")
    assert not failed.ok
    assert f"::error file=content/dreams/{ada}.json::/sig: signature does not verify" in failed.log
    assert (
        f"content/dreams/{ada}.json" in failed.summary
        and "| file | line | problem |" in failed.summary
    )

    # Merge and publish: the log state is committed back to main.
    world.merge("dream/parser")
    checkout, published = world.publish(secrets={"DREAMPOOL_LOG_KEY": key})
    assert published.ok, published.log
    assert published.deployed is not None
    assert "1 admitted" in published.summary
    site1 = published.deployed
    size1 = json.loads(read_main(world, "content/log/history.jsonl").splitlines()[-1])["size"]
    assert (
        read_main(world, f"content/log/checkpoints/{size1}")
        == (site1 / "log" / "checkpoint").read_bytes()
    )
    assert read_main(world, f"content/dreams/{ada}.salt")
    proof1 = (site1 / "dreams" / ada / "proof.tlog-proof").read_bytes()
    record1 = (site1 / "dreams" / ada / "record.json").read_bytes()
    policy = (site1 / "log" / "policy").read_bytes()
    lightclient.verify_proof(proof1, record1, policy)

    # Published again with nothing new and no key (like the sample pool here):
    # nothing to sign, nothing to commit.
    head = read_main(world, "content/log/history.jsonl")
    idle_checkout, idle = world.publish()
    assert idle.ok, idle.log
    assert "log state unchanged" in idle.log
    # It started from the last run's derived state, restored by prefix.
    assert f"Cache restored from key: dreampool-store-{world.runs - 1}-1" in idle.log
    assert (idle_checkout / ".site.builds" / "cache" / "store.sqlite").is_file()
    assert read_main(world, "content/log/history.jsonl") == head

    # Another contributor; merged. Main moves again while the publish runs,
    # so its push is refused once and the log state is rebased onto main.
    bob = contributor_dream(world, "bob", "dream/bob", "Write the migration down")
    world.merge("dream/bob")

    def main_moves(_: Path) -> None:
        maintainer = world.root / "maintainer"
        shell.git("pull", "--quiet", "--ff-only", cwd=maintainer)
        (maintainer / "NOTES.md").write_text("maintainers' notes\n", encoding="utf-8")
        shell.git("add", "NOTES.md", cwd=maintainer)
        shell.git("commit", "--quiet", "-m", "Notes", cwd=maintainer)
        shell.git("push", "--quiet", "origin", "main", cwd=maintainer)

    _, second = world.publish(secrets={"DREAMPOOL_LOG_KEY": key}, stand_in=main_moves)
    assert second.ok, second.log
    assert "main moved; rebasing" in second.log
    assert read_main(world, "NOTES.md") == b"maintainers' notes\n"
    site2 = second.deployed
    assert site2 is not None

    # The old proof is byte-identical, and its checkpoint is consistent with the new one.
    assert (site2 / "dreams" / ada / "proof.tlog-proof").read_bytes() == proof1
    newer = (site2 / "log" / "checkpoint").read_bytes()
    consistency = (site2 / "log" / "consistency" / str(size1)).read_bytes()
    result = lightclient.verify_proof(proof1, record1, policy, newer=newer, consistency=consistency)
    assert result.newer is not None and result.newer.size > size1
    assert read_main(world, f"content/log/checkpoints/{result.newer.size}") == newer
    lightclient.verify_proof(
        (site2 / "dreams" / bob / "proof.tlog-proof").read_bytes(),
        (site2 / "dreams" / bob / "record.json").read_bytes(),
        policy,
    )
    for tile in (site1 / "log" / "tile").rglob("*"):
        if tile.is_file():
            assert (site2 / tile.relative_to(site1)).read_bytes() == tile.read_bytes()

    # A monitor that saw the first checkpoint accepts the second.
    state = world.root / "monitor-state"
    state.write_bytes((site1 / "log" / "checkpoint").read_bytes())
    policy_file = world.root / "policy"
    policy_file.write_bytes(policy)
    watched = shell.run(
        "dreampool", "monitor", "--policy", policy_file, "--state", state, site2, cwd=world.root
    )
    assert "history unchanged" in watched.stdout + watched.stderr


def test_publish_without_the_key_deploys_nothing_new(world: World) -> None:
    key = log_key(world)
    _, first = world.publish(secrets={"DREAMPOOL_LOG_KEY": key})
    assert first.ok, first.log
    contributor_dream(world, "ada", "dream/one", "Pin the parser version")
    world.merge("dream/one")
    before = _maybe(world, "content/log/history.jsonl")

    _, keyless = world.publish()
    assert not keyless.ok
    assert "no log key was given" in keyless.log
    assert keyless.deployed is None
    # What the failed build wrote (the new dream's salt) is committed; no checkpoint is.
    assert _maybe(world, "content/log/history.jsonl") == before
    # The derived state is kept for the next run all the same.
    assert f"Cache saved with key: dreampool-store-{world.runs}-1" in keyless.log
    _, signed = world.publish(secrets={"DREAMPOOL_LOG_KEY": key})
    assert signed.ok, signed.log
    assert f"Cache restored from key: dreampool-store-{world.runs - 1}-1" in signed.log
    assert "1 admitted" in signed.summary


def _maybe(world: World, path: str) -> bytes:
    """A file on main, or b"" if main has none."""
    shown = subprocess.run(
        ["git", "--git-dir", str(world.remote), "show", f"main:{path}"],
        capture_output=True,
        env={**os.environ, **world.shell.env},
    )
    return shown.stdout if shown.returncode == 0 else b""


def test_check_workflow_reads_no_secret_and_writes_nothing(tmp_path: Path) -> None:
    """The pull-request path must be safe for forks: no secret, read-only, no push."""
    from builder.content import init

    check = yaml.safe_load(init.workflow("check.yml"))
    text = init.workflow("check.yml")
    assert "secrets." not in text and "github.token" not in text
    assert check["permissions"] == {"contents": "read"}
    assert list(check[True]) == ["pull_request"]  # YAML 1.1 reads the key `on` as True
    assert "push" not in "".join(step.get("run", "") for step in check["jobs"]["check"]["steps"])


# --- what check tells a run ----------------------------------------------------------


def test_annotations_escape_what_would_split_the_command() -> None:
    """CR and LF never reach the runner: printable() spells them \\r \\n first (so
    the message stays one line in the log too); escape_data still escapes them,
    a second wall."""
    from builder.cli import summary
    from builder.errors import Problem

    p = Problem("content/dreams/a,b:c.json", "/title", "100% wrong\r\n::error file=x::y", 3)
    assert summary.annotation(p) == (
        "::error file=content/dreams/a%2Cb%3Ac.json,line=3::"
        "/title: 100%25 wrong\\r\\n::error file=x::y"
    )
    assert summary.escape_data("a\r\nb%") == "a%0D%0Ab%25"
    assert summary.annotation(Problem("content/pool.yaml", "", "bad")) == (
        "::error file=content/pool.yaml::bad"
    )


def test_summary_cells_hold_no_markdown_and_the_table_is_bounded() -> None:
    """Each cell is one code span (the text inert: no Markdown, HTML, autolink or
    mention), so the check is what a GFM renderer makes of the row: three cells,
    each exactly the problem's text in <code>, nothing else."""
    from markdown_it import MarkdownIt

    from builder.cli import summary
    from builder.errors import Problem

    p = Problem("content/x|y.json", "/t", "a | b <img src=x> [l](u) `c` *d*\nnext", 2)
    table = summary.markdown([p], "content")
    (row,) = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(re.findall(r"(?<!\\)\|", row)) == 4  # three cells, no more
    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(table)
    cells = re.findall(r"<td>(.*?)</td>", html)
    assert cells == [
        "<code>content/x|y.json</code>",
        "2",
        "<code>/t: a | b &lt;img src=x&gt; [l](u) `c` *d*\\nnext</code>",
    ]
    many = summary.markdown([p] * (summary.MAX_ROWS + 5), "content")
    assert many.count("| ` content") == summary.MAX_ROWS and "and 5 more" in many
    assert "No problems in content" in summary.markdown([], "content")
