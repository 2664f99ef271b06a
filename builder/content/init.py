"""``dreampool init``: scaffold a new pool repository.

A pool is a git repository; GitHub Actions checks pull requests and publishes
the site to GitHub Pages, or with ``--host s3`` to an S3-compatible bucket
(``dreampool deploy``). :func:`init_pool` writes what such a repository needs
and nothing else::

    content/pool.yaml              title, origin, base_url, k (builder.content.pool)
    content/dreams/.gitkeep        where `dreampool submit` puts dreams
    content/keys/.gitkeep          the key directory (tiers are set here)
    README.md                      the contributors' guide (CONTRIBUTING.md if
                                   a README.md is already there)
    requirements.txt               the dreampool both workflows install: this one
                                   (:func:`installed_requirement`) or --requirement;
                                   with --host s3 its ``s3`` extra (boto3)
    .gitignore                     the built site and key files stay out of git
                                   (lines appended if one exists)
    .github/CODEOWNERS             maintainers review every change but a new dream
    .github/workflows/check.yml    on pull_request: `dreampool check` as annotations
    .github/workflows/publish.yml  on push to main: build, commit the log, deploy
                                   (Pages: publish.yml; s3: publish-s3.yml, the
                                   same build, then ``dreampool deploy``)

The log itself (``content/log/``) is made by the first ``dreampool build``
with the log key, so no key is asked for here and none is ever written into
the repository.

It refuses to touch an existing pool (``content/pool.yaml`` exists) and to
overwrite any file it would write, listing every such file before writing
anything. The workflow files are package data (``builder/scaffold/``) with one
placeholder, the install command; :func:`workflow` renders them, for a new
pool and for the dreampool repository's own sample pool alike.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from builder.content import pool
from builder.errors import InputError, PoolError, Problem

WORKFLOWS = ("check.yml", "publish.yml")
HOSTS = ("pages", "s3")
"""Where a pool's publish workflow deploys: GitHub Pages (the default), or an
S3-compatible bucket with ``dreampool deploy`` (AWS S3, R2, B2, MinIO)."""
_SOURCES = {("publish.yml", "s3"): "publish-s3.yml"}
"""The scaffold file a workflow is rendered from, where it is not its own name."""
S3_EXTRA = "s3"
# A PEP 508 requirement's name and extras, then its version, URL or marker (or
# nothing): what the s3 extra is added to. A bare URL names no package.
_NAME_RE = re.compile(
    r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?:\s*\[([^\]]*)\])?(?=[\s@=<>!~;(]|$)"
)
# pip runs in the runner's temporary folder, isolated (-I: neither the current
# folder nor PYTHON* variables reach sys.path): `python -m pip` at the
# checkout's root imports a pull request's pip.py instead of pip.
_PIP = "python -I -m pip install --disable-pip-version-check"
INSTALL_REQUIREMENTS = {
    # The release the target branch names (HEAD^1, the first parent of the pull
    # request's merge commit): a pull request never chooses the code that checks it.
    "check.yml": 'git -C "$GITHUB_WORKSPACE" show HEAD^1:requirements.txt > requirements.txt'
    f" && {_PIP} -r requirements.txt",
    # main's: the maintainers reviewed it (CODEOWNERS).
    "publish.yml": f'{_PIP} -r "$GITHUB_WORKSPACE/requirements.txt"',
}
"""How a pool's workflows install dreampool: what requirements.txt names."""
INSTALL_CHECKOUT = f'{_PIP} "$GITHUB_WORKSPACE"'
"""How the dreampool repository's own workflows install it, for its sample pool."""
CHECK_BASE = "--base HEAD^1 "
"""A pool's check compares a pull request with its target branch (builder.content.gate).
The dreampool repository's own check passes ``""``: its pull requests change
code, which its maintainers review and ci.yml tests; there ``check`` checks the
whole sample pool instead."""

MAX_TITLE = 120
_OWNER_RE = re.compile(r"@[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9._-]{1,100})?")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_PLACEHOLDER_RE = re.compile(r"__[A-Z]+__")
# In order: the last matching rule wins, and a rule without owners means no
# owner's review is needed (GitHub's CODEOWNERS).
_CODEOWNED = (
    ("*", True),
    ("/content/dreams/*.json", False),
)


@dataclass(frozen=True, slots=True)
class Requirement:
    """What requirements.txt names, and why: init says both."""

    line: str
    why: str


_COMMIT_RE = re.compile(r"[0-9a-f]{40}")
_EXAMPLE = "dreampool @ git+https://github.com/OWNER/dreampool@<40-hex commit>"


def installed_requirement() -> Requirement:
    """The requirement that installs the dreampool running now, read from its
    install's own record (PEP 610 ``direct_url.json``), for a pool given no
    ``--requirement``; raises :class:`InputError` when no runner could install it
    that way. A requirement is written only if it installs from where a GitHub
    runner is, never a pin nothing serves:

    * installed from a git repository over https: ``dreampool @ git+URL@COMMIT``,
      the very commit (until a release is on PyPI, the way to install it);
    * from an archive at an https URL: ``dreampool @ URL``, with its sha256;
    * from a package index (no ``direct_url.json``): ``dreampool==VERSION``;
    * from a folder or a file on this machine (``pip install -e .``), or a
      repository a runner cannot reach (``file:``, ``ssh:``): refused, with the
      ``--requirement`` to pass instead (the folder's commit, if git knows it).
    """
    # An installer's record, not a dreampool.egg-info that building the package
    # left in a source tree (found first when that tree is the current folder).
    installed = [
        d for d in metadata.distributions(name="dreampool") if d.read_text("INSTALLER") is not None
    ]
    if not installed:
        raise _unknown("dreampool is not installed as a package here")
    dist = installed[0]
    text = dist.read_text("direct_url.json")
    if text is None:
        return Requirement(
            f"dreampool=={dist.version}",
            f"dreampool {dist.version} was installed from a package index; the workflows "
            "install that release from PyPI (pass --requirement if it is not there)",
        )
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("url"), str):
        raise _unknown("its install record (direct_url.json) is unreadable")
    return _from_direct_url(record)


def _from_direct_url(record: dict[str, Any]) -> Requirement:
    """PEP 610: ``url`` plus one of ``vcs_info``, ``archive_info``, ``dir_info``."""
    url: str = record["url"]
    subdirectory = record.get("subdirectory")
    suffix = f"#subdirectory={subdirectory}" if isinstance(subdirectory, str) else ""
    remote = url.startswith("https://") and not urlsplit(url).username
    vcs = record.get("vcs_info")
    if isinstance(vcs, dict):
        commit = vcs.get("commit_id")
        if vcs.get("vcs") == "git" and isinstance(commit, str) and _COMMIT_RE.fullmatch(commit):
            if remote:
                return Requirement(
                    f"dreampool @ git+{url}@{commit}{suffix}",
                    f"this dreampool was installed from {url} at commit {commit}: the "
                    "workflows install that same commit",
                )
            raise _unknown(
                f"it was installed from {url} (commit {commit}), which a runner cannot reach",
                f"dreampool @ git+https://…@{commit}",
            )
        raise _unknown(f"it was installed from {url} ({vcs.get('vcs')}), not a git commit")
    archive = record.get("archive_info")
    if isinstance(archive, dict):
        hashes = archive.get("hashes")
        sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
        if remote:
            pin = f"#sha256={sha256}" if isinstance(sha256, str) else suffix
            return Requirement(
                f"dreampool @ {url}{pin}",
                f"this dreampool was installed from {url}: the workflows install that file",
            )
        raise _unknown(f"it was installed from {url}, a file on this machine")
    folder = record.get("dir_info")
    if not isinstance(folder, dict):
        raise _unknown("its install record (direct_url.json) names no git commit, file or folder")
    path = unquote(urlsplit(url).path) if url.startswith("file:") else url
    editable = " (editable)" if folder.get("editable") is True else ""
    raise _unknown(
        f"it was installed from the folder {path}{editable}, which is on this machine only",
        _commit_of(path),
    )


def _commit_of(folder: str) -> str | None:
    """``dreampool @ git+URL@COMMIT`` for a git checkout whose origin is an https URL:
    the requirement to suggest for a dreampool installed from that folder."""
    try:
        head, origin = (
            subprocess.run(
                ["git", "-C", folder, *args], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            for args in (["rev-parse", "--verify", "HEAD"], ["remote", "get-url", "origin"])
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if not _COMMIT_RE.fullmatch(head) or not origin.startswith("https://"):
        return None
    return f"dreampool @ git+{origin}@{head}"


def _unknown(why: str, suggestion: str | None = None) -> InputError:
    return InputError(
        [
            Problem(
                "--requirement",
                "",
                f"not given, and no runner could install this dreampool from where it came: {why}",
            )
        ],
        hint=f"pass --requirement '{suggestion or _EXAMPLE}' naming a pushed commit (or "
        "a release on PyPI: 'dreampool==X.Y.Z'), or install dreampool that way and run "
        "init again",
    )


def template(name: str) -> str:
    """A scaffold file as shipped in ``builder/scaffold/``."""
    return resources.files("builder").joinpath("scaffold", name).read_text(encoding="utf-8")


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(f"__{key}__", value)
    left = _PLACEHOLDER_RE.search(text)
    assert left is None, f"unfilled placeholder {left.group()}"
    return text


def workflow(
    name: str, install: str | None = None, base: str = CHECK_BASE, host: str = "pages"
) -> str:
    """The ``check.yml`` or ``publish.yml`` workflow, installing dreampool with ``install``
    (default: as a pool does, :data:`INSTALL_REQUIREMENTS`); ``host`` picks where
    publish.yml deploys (:data:`HOSTS`)."""
    if name not in WORKFLOWS:
        raise ValueError(f"no workflow {name!r}; want one of {', '.join(WORKFLOWS)}")
    if host not in HOSTS:
        raise ValueError(f"no host {host!r}; want one of {', '.join(HOSTS)}")
    source = _SOURCES.get((name, host), name)
    return _fill(template(source), {"INSTALL": install or INSTALL_REQUIREMENTS[name], "BASE": base})


def with_extra(requirement: str, extra: str) -> str:
    """``requirement`` with ``extra`` among its extras (PEP 508): ``dreampool @ URL``
    becomes ``dreampool[s3] @ URL``; one that names no package is refused."""
    match = _NAME_RE.match(requirement.strip())
    if match is None:
        raise InputError(
            [
                Problem(
                    "--requirement",
                    "",
                    f"must start with the package's name to add the [{extra}] extra to, "
                    f"is {requirement!r}",
                )
            ],
            hint="pass it as 'dreampool @ git+https://…@<commit>' or 'dreampool==X.Y.Z'",
        )
    extras = [e.strip() for e in (match[2] or "").split(",") if e.strip()]
    if extra not in extras:
        extras.append(extra)
    rest = requirement.strip()[match.end() :]
    return f"{match[1]}[{','.join(extras)}]{rest}"


_BASE_URL_NOTE = {
    "pages": "# Where the site is served from. The publish workflow passes the GitHub\n"
    "# Pages address with --base-url, which takes precedence.\n",
    "s3": "# Where the site is served from: the bucket's public address (a CDN or\n"
    "# custom domain in front of it), e.g. https://dreams.example.org/; the\n"
    "# publish workflow builds with it.\n",
}


def pool_yaml(origin: str, title: str, host: str = "pages") -> str:
    # A JSON string is a YAML double-quoted scalar, so any title stays one value.
    return (
        "# The pool's settings (dreampool). The origin names the log: it is signed\n"
        "# into every checkpoint and never changes.\n"
        f"title: {json.dumps(title, ensure_ascii=False)}\n"
        f"origin: {json.dumps(origin, ensure_ascii=False)}\n"
        f"{_BASE_URL_NOTE[host]}"
        "base_url: /\n"
        "# A pattern is shown only when at least k distinct authors share it.\n"
        "k: 3\n"
    )


def codeowners(owners: Sequence[str]) -> str:
    """``.github/CODEOWNERS``; with no owners the rules are written commented out."""
    lines = [
        "# Who must review a change before it reaches main: the maintainers, for",
        "# every file but a dream. A file anywhere can change what runs with the",
        "# log key (a pip.py, sitecustomize.py or setup.py at the root, the",
        "# requirements, the workflows) or the pool's trust (the key directory,",
        "# where tiers are set, a first-time contributor's guest key included;",
        "# rotations, which come with a key file; the log state; salts; erasures;",
        "# the pool's settings). A dream, content/dreams/<id>.json, is signed and",
        "# `dreampool check` verifies it, so it needs no owner's review.",
        "# The last matching rule wins, and a rule without owners means no owner is",
        "# needed: the exception comes after `*`, and names *.json only, so salts",
        "# (the build writes them) and anything else in content/dreams/ stay owned.",
        '# Turn on "Require review from Code Owners" for main, and make the check',
        "# workflow a required status check (Settings → Rules or Branches).",
    ]
    if owners:
        who = " ".join(owners)
        lines += [f"{path:<24} {who}" if owned else path for path, owned in _CODEOWNED]
    else:
        lines += [
            "# Name the maintainers (@user or @org/team) and uncomment:",
            *(f"# {path:<24} @MAINTAINER" if owned else f"# {path}" for path, owned in _CODEOWNED),
        ]
    return "\n".join(lines) + "\n"


def gitignore_lines() -> list[str]:
    return template("gitignore").splitlines()


def _validate(
    origin: str, title: str, owners: Sequence[str], requirement: str | None, host: str = "pages"
) -> None:
    problems: list[Problem] = []
    if host not in HOSTS:
        problems.append(
            Problem(
                "--host",
                "",
                f"must be one of {', '.join(HOSTS)} (where publish.yml deploys the site), "
                f"is {host!r}",
            )
        )
    if not 1 <= len(title) <= MAX_TITLE or _CONTROL_RE.search(title):
        problems.append(
            Problem("--title", "", f"must be 1–{MAX_TITLE} characters on one line, is {len(title)}")
        )
    for owner in owners:
        if not _OWNER_RE.fullmatch(owner):
            problems.append(
                Problem("--owner", "", "must be a GitHub @user or @org/team (one per --owner)")
            )
    if requirement is not None and (not requirement.strip() or _CONTROL_RE.search(requirement)):
        problems.append(Problem("--requirement", "", "must be one pip requirement on one line"))
    if problems:
        raise InputError(problems, hint="see `dreampool init --help`")
    # The origin is checked by the rules pool.yaml is read with, so init never
    # writes a pool that `dreampool check` would refuse.
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pool.yaml").write_text(pool_yaml(origin, title), encoding="utf-8")
        try:
            config = pool.load_config(Path(tmp))
        except InputError as exc:
            raise InputError(
                [Problem("--" + p.pointer.lstrip("/"), "", p.rule) for p in exc.problems],
                hint=pool.ORIGIN_HINT,
            ) from None
    assert (config.origin, config.title) == (origin, title)


def plan(
    directory: Path,
    origin: str,
    title: str,
    *,
    owners: Sequence[str] = (),
    requirement: str | None = None,
    host: str = "pages",
) -> dict[Path, bytes]:
    """Every file :func:`init_pool` writes, with its bytes; nothing is touched.

    Raises :class:`PoolError` if ``directory`` is already a pool or holds a file
    that would be overwritten.
    """
    _validate(origin, title, owners, requirement, host)
    if directory.exists() and not directory.is_dir():
        raise PoolError(f"{directory} exists and is not a directory")
    config = directory / "content" / "pool.yaml"
    if config.exists() or config.is_symlink():
        raise PoolError(
            f"{directory} is already a pool ({config} exists); init never overwrites a pool",
            hint="to change its settings, edit content/pool.yaml; to start another pool, "
            "pick an empty directory",
        )
    if requirement is None:
        requirement = installed_requirement().line
        _validate(origin, title, owners, requirement)
    if host == "s3":
        requirement = with_extra(requirement, S3_EXTRA)
    readme = directory / "README.md"
    guide = directory / "CONTRIBUTING.md" if readme.exists() else readme
    names = {"TITLE": title, "ORIGIN": origin, "REQUIREMENT": requirement}
    files: dict[Path, bytes] = {
        guide: _fill(template("README.md"), names).encode(),
        directory / "requirements.txt": _fill(template("requirements.txt"), names).encode(),
        directory / ".github" / "CODEOWNERS": codeowners(owners).encode(),
        directory / "content" / "dreams" / ".gitkeep": b"",
        directory / "content" / "keys" / ".gitkeep": b"",
    }
    for name in WORKFLOWS:
        files[directory / ".github" / "workflows" / name] = workflow(name, host=host).encode()
    taken = sorted(str(p) for p in files if p.exists() or p.is_symlink())
    if taken:
        raise PoolError(
            f"init would overwrite {', '.join(taken)}",
            hint="move those files aside (or start in an empty directory) and run init again",
        )
    files[directory / ".gitignore"] = _gitignore(directory / ".gitignore")
    files[config] = pool_yaml(origin, title, host).encode()  # last: its presence marks a pool
    return files


def _gitignore(path: Path) -> bytes:
    """Ours, or the existing file with the lines it lacks appended."""
    ours = template("gitignore")
    if path.is_symlink():
        raise PoolError(f"{path} is a symlink; init writes plain files only")
    try:
        existing = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ours.encode()
    have = {line.strip() for line in existing.splitlines()}
    missing = [line for line in ours.splitlines() if line.strip() not in have]
    if not [line for line in missing if not line.startswith("#")]:
        return existing.encode()
    sep = "" if existing.endswith("\n") or not existing else "\n"
    return (existing + sep + "\n" + "\n".join(missing) + "\n").encode()


def init_pool(
    directory: Path,
    origin: str,
    title: str,
    *,
    owners: Sequence[str] = (),
    requirement: str | None = None,
    host: str = "pages",
) -> list[Path]:
    """Scaffold a pool repository in ``directory`` (made if missing); return the files written.

    ``owners`` (``@user`` or ``@org/team``) go into CODEOWNERS; ``requirement``
    is what the workflows ``pip install`` (default: :func:`installed_requirement`),
    with the ``s3`` extra when ``host`` is ``"s3"`` (publish.yml deploys to a bucket).
    Refuses, before writing anything, an existing pool or any file it would
    overwrite, except ``.gitignore``, to which missing lines are appended.
    """
    files = plan(directory, origin, title, owners=owners, requirement=requirement, host=host)
    written: list[Path] = []
    for path, data in files.items():
        if path.name == ".gitignore" and path.exists() and path.read_bytes() == data:
            continue
        pool.atomic_write(path, data)
        written.append(path)
    return written


def next_steps(directory: Path, origin: str, host: str = "pages") -> list[str]:
    """What the operator does after init (the operators' guide, "Start a pool";
    for s3, "Publishing to object storage from GitHub Actions")."""
    hosting = {
        "pages": ["Settings → Pages → Source: GitHub Actions"],
        "s3": [
            "set base_url in content/pool.yaml to the address the bucket is served from",
            "Settings → Secrets and variables → Actions: variables DREAMPOOL_S3_URL "
            "(s3://BUCKET/PREFIX), AWS_REGION, DREAMPOOL_S3_ENDPOINT (R2, B2, MinIO), and "
            "AWS_ROLE_ARN (AWS, OIDC) or secrets S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY "
            'of environment dreampool-log (docs/operators.md, "Publishing to object '
            'storage from GitHub Actions")',
        ],
    }[host]
    return [
        f"cd {directory} && git init -b main (if it is not a repository yet)",
        f"dreampool log-keygen --origin {origin}  (keeps the private key in your key store)",
        "add the private key as secret DREAMPOOL_LOG_KEY of environment dreampool-log "
        "(Settings → Environments), deployment branches: main only",
        *hosting,
        "commit, push to main: the publish workflow builds the log and the site",
    ]


def chosen_requirement(requirement: str | None, host: str = "pages") -> Requirement:
    """What :func:`init_pool` puts in requirements.txt for ``requirement`` (None: the
    dreampool that runs, :func:`installed_requirement`) and ``host``, and why."""
    chosen = (
        Requirement(requirement, "given with --requirement")
        if requirement is not None
        else installed_requirement()
    )
    if host == "s3":
        chosen = Requirement(
            with_extra(chosen.line, S3_EXTRA),
            f"{chosen.why}, with the {S3_EXTRA} extra `dreampool deploy` needs",
        )
    return chosen
