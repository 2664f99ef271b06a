"""What dreampool declares is what it imports, and the MCP SDK is an optional extra.

* Every third-party module ``builder`` imports maps to a distribution that
  ``pyproject.toml`` declares: a core dependency, or the ``mcp`` extra for the
  modules only ``dreampool mcp`` needs.
* The build, check, sign and verify paths import nothing of the MCP SDK, in a
  fresh interpreter and with ``mcp`` made unimportable; ``dreampool mcp``
  without it says which extra to install.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO, draft, write_json
from tests.pools import make_pool

# Top-level module -> the distribution that provides it. A new third-party
# import fails test_every_third_party_import_is_declared until it is listed
# here and declared in pyproject.toml.
DISTRIBUTION = {
    "yaml": "pyyaml",
    "markdown_it": "markdown-it-py",
    "jinja2": "jinja2",
    "markupsafe": "markupsafe",
    "cryptography": "cryptography",
    "rfc8785": "rfc8785",
    "jieba": "jieba",
    "mcp": "mcp",
    "typing_extensions": "typing-extensions",
    "boto3": "boto3",
    # botocore comes with boto3, which pins the version it works with: boto3 is declared.
    "botocore": "boto3",
}
# Modules only the mcp extra provides, and the one module allowed to import them
# at run time (builder.agents.mcp_server names them only for type checking).
EXTRA_ONLY = {"mcp", "typing_extensions"}
SDK_MODULE = "mcp_sdk.py"
# Modules only the s3 extra provides (`dreampool deploy`), and the one module importing them.
S3_ONLY = {"boto3", "botocore"}
S3_MODULE = REPO / "builder" / "deploy" / "s3.py"

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement string (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def declared(group: str | None = None) -> set[str]:
    project = PYPROJECT["project"]
    reqs = project["dependencies"] if group is None else project["optional-dependencies"][group]
    return {_name(r) for r in reqs}


def imports(path: Path) -> list[tuple[str, bool]]:
    """(top-level module, under ``if TYPE_CHECKING``) for every absolute import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(name.split(".")[0], id(node) in typing_only) for name in names]
    return found


def builder_modules() -> list[Path]:
    files = sorted((REPO / "builder").rglob("*.py")) + sorted((REPO / "templates").rglob("*.py"))
    assert len(files) > 40
    return files


def test_every_third_party_import_is_declared() -> None:
    core, extra, s3 = declared(), declared("mcp"), declared("s3")
    seen = set()
    for path in builder_modules():
        for module, _ in imports(path):
            if module in sys.stdlib_module_names or module in ("builder", "__future__"):
                continue
            seen.add(module)
            assert module in DISTRIBUTION, (
                f"{path.relative_to(REPO)} imports {module}: declare its distribution in "
                "pyproject.toml and add it to DISTRIBUTION here"
            )
            dist = DISTRIBUTION[module]
            if module in EXTRA_ONLY:
                assert dist in extra, f"{dist} is not in the mcp extra"
            elif module in S3_ONLY:
                assert dist in s3, f"{dist} is not in the s3 extra"
                assert path == S3_MODULE, f"{path.relative_to(REPO)} imports {module}"
            else:
                assert dist in core, f"{path.relative_to(REPO)} imports {module}; declare {dist}"
    # The mapping holds nothing stale: each entry is imported somewhere.
    assert seen == set(DISTRIBUTION)


def test_boto3_is_an_extra_the_tests_install_with_an_s3_server() -> None:
    assert "boto3" not in declared()
    assert "boto3" in declared("s3")
    assert {"dreampool", "moto"} <= declared("test")
    assert "dreampool[s3]" in PYPROJECT["project"]["optional-dependencies"]["test"]


def test_the_mcp_sdk_is_an_extra_the_tests_install() -> None:
    assert "mcp" not in declared()
    assert "mcp" in declared("mcp")
    test = PYPROJECT["project"]["optional-dependencies"]["test"]
    assert "dreampool[mcp]" in test


def test_only_the_sdk_module_imports_the_sdk_at_run_time() -> None:
    for path in builder_modules():
        for module, typing_only in imports(path):
            if module in EXTRA_ONLY and path.name != SDK_MODULE:
                assert typing_only, f"{path.relative_to(REPO)} imports {module} at run time"


def _python(code: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_build_check_and_verify_modules_import_nothing_of_mcp() -> None:
    code = (
        "import sys\n"
        "import builder.cli.main, builder.build\n"
        "import builder.readers.lightclient, builder.readers.monitor\n"
        "import builder.content.pool, builder.text.redact, builder.agents.mcp_server\n"
        "bad = sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.'))\n"
        "assert not bad, bad\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr


# Runs the dreampool CLI with the mcp package made unimportable, as if the
# extra were not installed (no sitecustomize: a meta-path finder first).
WITHOUT_MCP = """
import sys

class NoMcp:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoMcp())
for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")]:
    del sys.modules[name]
from builder.cli import main as cli
sys.argv[0] = "dreampool"
code = cli.main(sys.argv[1:])
assert not any(m == "mcp" or m.startswith("mcp.") for m in sys.modules)
raise SystemExit(code)
"""


def dreampool_without_mcp(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return _python(WITHOUT_MCP, *map(str, args), cwd=cwd)


def test_build_check_sign_and_verify_run_without_the_mcp_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp = make_pool(tmp_path)
    tp.add("ada", 2)
    key_file = tmp_path / "log.key"
    key_file.write_text(tp.log_key + "\n", encoding="utf-8")
    site = tmp_path / "site"

    checked = dreampool_without_mcp("check", "--content", tp.content)
    assert checked.returncode == 0, checked.stderr
    built = dreampool_without_mcp(
        "build", "--content", tp.content, "--out", site, "--log-key", key_file, "--quiet"
    )
    assert built.returncode == 0, built.stderr
    dream = next(p for p in (site / "dreams").iterdir() if (p / "record.json").is_file())
    verified = dreampool_without_mcp(
        "verify-proof",
        dream / "proof.tlog-proof",
        "--record",
        dream / "record.json",
        "--policy",
        site / "log" / "policy",
    )
    assert verified.returncode == 0, verified.stderr + verified.stdout
    record = json.loads((dream / "record.json").read_text(encoding="utf-8"))
    assert record["dream"]["author"] == "ada"

    monkeypatch.setenv("DREAMPOOL_HOME", str(tmp_path / "home"))
    made = dreampool_without_mcp("keygen", "--author", "ada")
    assert made.returncode == 0, made.stderr
    key_id = re.search(r"sha256:[0-9a-f]{16}", made.stdout + made.stderr)
    assert key_id, made.stdout + made.stderr
    draft_file = write_json(tmp_path / "draft.json", draft())
    signed = dreampool_without_mcp(
        "sign", draft_file, "--key", key_id.group(0), "-o", tmp_path / "signed.json"
    )
    assert signed.returncode == 0, signed.stderr


def test_dreampool_mcp_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    result = dreampool_without_mcp("mcp", "--site", tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        "dreampool: error: the MCP server needs the mcp extra: pip install 'dreampool[mcp]'\n"
    )
    assert result.stdout == ""
