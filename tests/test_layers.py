"""The package's layers (builder/__init__.py, README "How the build works"):
a module imports only from its own layer and the layers below it.

Read from the source with :mod:`ast`, so a lazy import inside a function, or
a module named to :func:`builder.deferred.module`, counts as much as one at
the top: each is a dependency.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "builder"

# Lowest first. ``errors`` is the one error family every layer raises; it
# prints names through the Unicode policy, a format, and is otherwise the base.
ORDER = (
    "errors",
    "deferred",
    "formats",
    "files",
    "parallel",
    "text",
    "content",
    "log",
    "buildcache",
    "site",
    "readers",
    "deploy",
    "agents",
    "build",
    "cli",
)
BASE_EXCEPTIONS = {("errors", "formats")}


def layer(dotted: str) -> str | None:
    parts = dotted.split(".")
    if parts[0] != "builder" or len(parts) < 2:
        return None
    return parts[1]


DEFERRING = {"module", "Deferred"}  # builder.deferred's callables, given a module's name


def _package(path: Path) -> str | None:
    """The dotted package ``path`` is in, if it is under PACKAGE: what its
    relative imports are resolved against."""
    try:
        rel = path.resolve().relative_to(PACKAGE.resolve())
    except ValueError:
        return None
    parts = ["builder", *rel.with_suffix("").parts]
    return ".".join(parts[:-1])


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _literal(node: ast.expr | None, kind: type) -> Any:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, kind) else None


def _type_positions(tree: ast.AST) -> set[int]:
    """The nodes where a name stands for a type, not a value: annotations and
    the second argument of isinstance or issubclass (naming the class
    Deferred there imports nothing)."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
        ):
            roots.append(node.args[1])
    return {id(n) for root in roots for n in ast.walk(root)}


def imports(path: Path) -> set[str]:
    """Every builder module ``path`` depends on: imported (absolutely or
    relatively, at the top or in a function) or named as a string to
    builder.deferred or importlib. Fails closed: a use of their names this
    cannot read (a module name that is not a literal, an alias of a function,
    a star import) raises ValueError naming the line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _package(path)
    found: set[str] = set()
    modules: set[str] = set()  # names bound to the module builder.deferred
    functions: set[str] = set()  # names bound to its callables
    il_modules: set[str] = set()  # names bound to importlib
    il_functions = {"__import__"}  # names bound to importlib.import_module

    def refuse(node: ast.AST, why: str) -> ValueError:
        return ValueError(f"{path}:{getattr(node, 'lineno', '?')}: {why}")

    def resolve(name: str, node: ast.AST) -> str:
        if not name.startswith("."):
            return name
        if package is None:
            raise refuse(node, "a relative import outside builder/")
        return importlib.util.resolve_name(name, package)

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = resolve("." * node.level + (node.module or ""), node)
            if any(a.name == "*" for a in node.names) and base in ("builder", "builder.deferred"):
                raise refuse(node, f"import the names of {base} one by one")
            if base == "builder":
                found.update(f"builder.{a.name}" for a in node.names)
                modules.update(a.asname or a.name for a in node.names if a.name == "deferred")
            elif base.startswith("builder."):
                found.add(base)
                if base == "builder.deferred":
                    functions.update(a.asname or a.name for a in node.names if a.name in DEFERRING)
            elif base == "importlib":
                il_functions.update(
                    a.asname or a.name for a in node.names if a.name == "import_module"
                )
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("builder."):
                    found.add(a.name)
                if a.name == "builder.deferred" and a.asname:
                    modules.add(a.asname)
                if a.name == "importlib" or a.name.startswith("importlib."):
                    il_modules.add(a.asname or "importlib")

    def deferring(func: ast.expr) -> bool:
        if isinstance(func, ast.Name):
            return func.id in functions
        return (
            isinstance(func, ast.Attribute)
            and func.attr in DEFERRING
            and (
                (isinstance(func.value, ast.Name) and func.value.id in modules)
                or ast.unparse(func.value) == "builder.deferred"
            )
        )

    def loading(func: ast.expr) -> bool:
        if isinstance(func, ast.Name):
            return func.id in il_functions
        return (
            isinstance(func, ast.Attribute)
            and func.attr == "import_module"
            and isinstance(func.value, ast.Name)
            and func.value.id in il_modules
        )

    def loaded(call: ast.Call) -> str | None:
        """The module an importlib call loads, resolved, or None if not a literal."""
        name = _literal(_argument(call, 0, "name"), str)
        if name is None:
            return None
        if isinstance(call.func, ast.Name) and call.func.id == "__import__":
            level = _argument(call, 4, "level")
            dots = 0 if level is None else _literal(level, int)
            if dots is None:
                return None
            return resolve("." * dots + name, call)
        if name.startswith("."):
            anchor = _argument(call, 1, "package")
            if not (isinstance(anchor, ast.Name) and anchor.id == "__package__"):
                given = _literal(anchor, str)
                if given is None:
                    return None
                return importlib.util.resolve_name(name, given)
        return resolve(name, call)

    mechanism = path == PACKAGE / "deferred.py"  # it loads the names it is given
    read: set[int] = set()  # the nodes of the calls read below
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if deferring(node.func):
            name = _literal(_argument(node, 0, "name"), str)
        elif loading(node.func):
            name = loaded(node)
            if name is None and mechanism:
                read.update(id(n) for n in ast.walk(node.func))
                continue
        else:
            continue
        if name is None:
            raise refuse(node, "name the module as a string literal")
        found.add(name)  # imported on first use, or by name: a dependency all the same
        read.update(id(n) for n in ast.walk(node.func))
    types = _type_positions(tree)
    for node in ast.walk(tree):
        if id(node) in read or isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        if isinstance(node, ast.Name):
            if node.id in il_functions - {"__import__"} or (
                node.id in modules | functions and id(node) not in types
            ):
                raise refuse(node, f"call {node.id} with a literal module name")
        elif isinstance(node, ast.Attribute):
            if ast.unparse(node) == "builder.deferred" and id(node) not in types:
                raise refuse(node, "call builder.deferred.module with a literal module name")
            if (
                node.attr == "import_module"
                and isinstance(node.value, ast.Name)
                and node.value.id in il_modules
            ):
                raise refuse(node, "call import_module with a literal module name")
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "scaffold" not in p.parts)


def test_every_module_has_a_layer() -> None:
    for path in MODULES:
        rel = path.relative_to(PACKAGE)
        name = rel.parts[0].removesuffix(".py")
        assert name in ORDER or name in {"__init__", "__main__"}, (
            f"builder/{rel}: not in a layer; add it to a subpackage (builder/__init__.py)"
        )


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down(path: Path) -> None:
    rel = path.relative_to(PACKAGE)
    mine = rel.parts[0].removesuffix(".py")
    if mine not in ORDER:
        return  # builder/__init__.py and __main__.py sit above every layer
    upward = sorted(
        target
        for target in imports(path)
        if (theirs := layer(target)) in ORDER
        and ORDER.index(theirs) > ORDER.index(mine)
        and (mine, theirs) not in BASE_EXCEPTIONS
    )
    assert not upward, f"builder/{rel} ({mine}) imports a higher layer: {upward}"


# What a pure format never needs: the file system, processes, the network, a store.
IO_MODULES = {
    "os",
    "pathlib",
    "shutil",
    "tempfile",
    "subprocess",
    "socket",
    "sqlite3",
    "http",
    "urllib",
}
FORMATS = sorted((PACKAGE / "formats").glob("*.py"))


@pytest.mark.parametrize("path", FORMATS, ids=lambda p: p.name)
def test_formats_do_no_io(path: Path) -> None:
    used: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            used.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            used.add(node.module.split(".")[0])
    assert not used & IO_MODULES, f"builder/formats/{path.name} imports {sorted(used & IO_MODULES)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_cli_prints_and_parses_arguments(path: Path) -> None:
    """Printing and argument parsing belong to builder/cli: the layers below return
    values and raise errors, so every command reports the same way."""
    rel = path.relative_to(PACKAGE)
    if rel.parts[0] == "cli" or "templates_compiled" in rel.parts:
        return
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "print":
                found.append(f"print() on line {node.lineno}")
        elif isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            found.append(f"import argparse on line {node.lineno}")
        elif isinstance(node, ast.ImportFrom) and node.module == "argparse":
            found.append(f"from argparse on line {node.lineno}")
    assert not found, f"builder/{rel}: {', '.join(found)}; move it to builder/cli"


def test_a_deferred_import_is_a_dependency(tmp_path: Path) -> None:
    """builder.deferred names a module as a string: the check reads it as an import,
    so deferring one cannot hide an upward dependency."""
    source = tmp_path / "mod.py"
    source.write_text(
        'from builder import deferred\nstore = deferred.module("builder.buildcache")\n',
        encoding="utf-8",
    )
    assert imports(source) == {"builder.deferred", "builder.buildcache"}


def test_the_layer_check_reads_every_spelling_of_a_deferred_import(tmp_path: Path) -> None:
    """tests/test_layers.py claims "deferring one cannot hide an upward
    dependency", but imports() matches only the call spelled
    ``deferred.module("...")``: the module's own class, or its function
    imported by name, hide the dependency (here builder.cli, the top layer)."""
    from tests.test_layers import imports

    source = tmp_path / "mod.py"
    source.write_text(
        "from builder import deferred\n"
        "from builder.deferred import module as lazy\n"
        'a = deferred.Deferred("builder.cli.main")\n'
        'b = lazy("builder.build")\n',
        encoding="utf-8",
    )
    assert {"builder.cli.main", "builder.build"} <= imports(source)
