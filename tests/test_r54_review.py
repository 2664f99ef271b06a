"""Review r54 of 03c059e (buildcache: a failed scan writer's entries put back
once, ``_scan_settled``), de74a0f (builder.deferred: deepcopy, unwrap, own
names refused, AttributeError of the import as ImportError) and a553889
(tests/test_layers.py imports(): relative imports, fails closed on
builder.deferred).

A test named ``test_held_*`` is what was tried and held; every other test
failed on the reviewed code (a553889) and names the defect, its severity and
the fix suggested, which the next commits made.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder import buildcache, deferred
from tests.test_buildcache import _blob, _keyed, _long_dream, _sha, _unit, break_table
from tests.test_r53_review import _busy_put_back, _row, _scan_writes
from tests.test_store_forks import _REAL_CONNECT, _keys, _short_timeout

SCAN = "scan"


# --- 1. builder/buildcache.py BuildCache.save(): _scan_settled ------------------


def test_held_a_busy_put_back_save_leaves_the_flag_unset_and_the_good_one_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The put-back save whose scan _save finds the store busy: not settled, and
    the section holds the entry (full body); the next good save writes it and
    settles; a later save writes no scan row."""
    c, store = _busy_put_back(tmp_path, monkeypatch)
    assert c._scan_settled is False
    assert c[SCAN][_blob(0)][1].loaded
    c.save()
    assert c._scan_settled is True
    assert _row(store, _blob(0))[1].body == _long_dream(0).body
    made = _scan_writes(monkeypatch, c)
    c.save()
    assert made == []


def _busy_at(store: Path, monkeypatch: pytest.MonkeyPatch, section: str) -> list[Any]:
    """From _save(section) on, another connection holds the store's write lock
    (released by the caller: holders[0].execute("ROLLBACK"))."""
    holders: list[Any] = []
    real = buildcache.BuildCache._save

    def save(self: buildcache.BuildCache, db: sqlite3.Connection, name: str) -> None:
        if name == section and not holders:
            holder = _REAL_CONNECT(store, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            holders.append(holder)
        real(self, db, name)

    monkeypatch.setattr(buildcache.BuildCache, "_save", save)
    return holders


@pytest.mark.parametrize("then", ["replace", "erase", "keep"])
def test_held_scan_written_then_a_later_section_busy_settles_and_commits_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """The put-back save writes scan (its own transaction, committed), then finds
    the store busy at units: settled, and rightly: the row is in the store.
    A replacement after it is neither undone nor rewritten with the buffered
    entry; an erasure deletes the row (T48)."""
    c, store = _busy_put_back(tmp_path, monkeypatch)
    c["units"]["id1"] = _unit(1)
    with monkeypatch.context() as m:
        holders = _busy_at(store, m, "units")
        c.save()
        assert holders, "units was not reached"
        holders[0].execute("ROLLBACK")
        holders[0].close()
    assert any("busy" in n for n in c.notes)
    assert c._scan_settled is True
    assert _row(store, _blob(0))[1].body == _long_dream(0).body  # committed
    newer = (_sha(3), _long_dream(3))
    if then == "replace":
        c[SCAN][_blob(0)] = newer
    elif then == "erase":
        del c[SCAN][_blob(0)]
    c.save()
    if then == "replace":
        assert c[SCAN][_blob(0)] is newer
        assert _row(store, _blob(0))[1].body == _long_dream(3).body
    elif then == "erase":
        assert _blob(0) not in _keys(store, SCAN)
    else:
        assert _row(store, _blob(0))[1].body == _long_dream(0).body
    assert "id1" in _keys(store, "units")


@pytest.mark.parametrize("erase", [False, True])
def test_held_scan_written_then_a_later_section_damaged_writes_all_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, erase: bool
) -> None:
    """Settled, then units fails as damaged: _discard deletes the store and
    empties _loaded. The next save (no put-back now) writes the section whole
    to the new store from the put-back entry it holds; erased, no row."""
    c, store = _busy_put_back(tmp_path, monkeypatch)
    c["units"]["id1"] = _unit(1)
    real = buildcache.BuildCache._save

    def save(self: buildcache.BuildCache, db: sqlite3.Connection, name: str) -> None:
        if name == "units":
            raise sqlite3.DatabaseError("database disk image is malformed")
        real(self, db, name)

    with monkeypatch.context() as m:
        m.setattr(buildcache.BuildCache, "_save", save)
        c.save()
    assert any("afresh" in n for n in c.notes) and c._scan_settled
    assert c._loaded[SCAN] == {}
    if erase:
        del c[SCAN][_blob(0)]
    c.save()
    if erase:
        assert _blob(0) not in _keys(store, SCAN)
    else:
        assert _row(store, _blob(0))[1].body == _long_dream(0).body


@pytest.mark.parametrize("how", ["busy", "damaged"])
@pytest.mark.parametrize("erase", [False, True])
def test_held_the_failure_met_by_the_flush_inside_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, erase: bool
) -> None:
    """The Rows has not failed yet (its buffer not full); the flush() save makes
    fails, busy (put back, nothing written, not settled) or damaged (the store
    started afresh: kept is None, the deferred kept entry put back by digest
    and id, written whole). The erased dream leaves no row either way."""
    seed = _keyed(tmp_path)
    seed[SCAN][_blob(1)] = (_sha(1), _long_dream(1))
    seed.save()
    store = tmp_path / buildcache.STORE
    c = _keyed(tmp_path)
    c[SCAN]
    kept = c.kept_scan(_blob(0), (_sha(0), _long_dream(0)))
    c[SCAN][_blob(0)] = kept
    assert c._scan_rows is not None and not c._scan_rows.failed
    if how == "busy":
        _short_timeout(monkeypatch)
        holder = _REAL_CONNECT(store, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            c.save()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert c._scan_rows.failed and not c._scan_settled
        assert c[SCAN][_blob(0)][1].loaded
    else:
        c.dream_files = lambda i, s: _long_dream(1).body if s == _sha(1) else None
        _ = c[SCAN][_blob(1)][1].body  # read before the store goes
        break_table(store, SCAN)
        c.save()
        assert any("afresh" in n for n in c.notes), c.notes
        assert c._scan_settled  # written to the new store in the same save
    if erase:
        del c[SCAN][_blob(0)]
    c.save()
    if erase:
        assert _blob(0) not in _keys(store, SCAN)
    else:
        assert _row(store, _blob(0))[1].body == _long_dream(0).body
    assert _row(store, _blob(1))[1].body == _long_dream(1).body


def test_held_a_save_of_units_first_neither_puts_back_nor_settles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, store = _busy_put_back(tmp_path, monkeypatch)
    c["units"]["id1"] = _unit(1)
    c.save("units")
    assert c._scan_settled is False and "id1" in _keys(store, "units")
    c.save()
    assert c._scan_settled is True
    del c[SCAN][_blob(0)]
    c.save()
    assert _blob(0) not in _keys(store, SCAN)


def test_held_a_kept_entrys_body_after_settling_is_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """_StoredBodies reads a kept entry's body from the failed Rows' buffer
    first; after settling (and a replacement, or an erasure) the buffer is
    frozen (kept_scan puts nothing more once failed), so the kept entry's body
    is still its own, and the store's row is the section's entry. The kept
    entry put back into the section after settling writes its own body."""
    seed = _keyed(tmp_path)
    seed[SCAN]
    seed.save()
    store = tmp_path / buildcache.STORE
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 1)
    c = _keyed(tmp_path)
    c[SCAN]
    _short_timeout(monkeypatch)
    holder = _REAL_CONNECT(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        kept = c.kept_scan(_blob(0), (_sha(0), _long_dream(0)))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    c[SCAN][_blob(0)] = kept
    c.save()
    assert c._scan_settled
    c[SCAN][_blob(0)] = (_sha(3), _long_dream(3))
    c.save()
    assert kept[1].body == _long_dream(0).body
    assert _row(store, _blob(0))[1].body == _long_dream(3).body
    c[SCAN][_blob(0)] = kept  # the owner puts the kept entry back
    c.save()
    assert _row(store, _blob(0))[1].body == _long_dream(0).body
    del c[SCAN][_blob(0)]
    c.save()
    assert _blob(0) not in _keys(store, SCAN)


def test_held_a_forked_save_settles_only_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked process that saves scan puts back and settles its own copy; the
    build's process still puts back (its _loaded holds the kept entry), writes
    the same row, and an erasure there deletes it (T48)."""
    c, store = _busy_put_back(tmp_path, monkeypatch)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            c.save()
            code = 0 if c._scan_settled and not c._failure else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert c._scan_settled is False
    assert _row(store, _blob(0))[1].body == _long_dream(0).body
    c.save()
    assert c._scan_settled is True
    del c[SCAN][_blob(0)]
    c.save()
    assert _blob(0) not in _keys(store, SCAN)


# --- 2. builder/deferred.py Deferred --------------------------------------------


@pytest.fixture
def loaded_module() -> Iterator[tuple[types.ModuleType, deferred.Deferred]]:
    name = "r54_fake_module"
    mod = types.ModuleType(name)
    mod.__annotations__ = {"x": int}
    sys.modules[name] = mod
    try:
        yield mod, deferred.module(name)
    finally:
        sys.modules.pop(name, None)


def test_a_name_read_from_the_module_may_be_set_through_the_deferred_name(
    loaded_module: tuple[types.ModuleType, deferred.Deferred],
) -> None:
    """builder/deferred.py Deferred.__setattr__/__delattr__ (nit). The refusal
    tests ``hasattr(type(self), attr)``, which also finds the metaclass's
    attributes (type's ``__name__``, ``__qualname__``, ``mro``, ``__dict__``,
    ``__annotations__``): an instance never reads those from its class, so
    ``d.__name__`` reads the module's, yet ``d.__name__ = x`` (or
    mock.patch.object(d, "__name__")) is refused as "the deferred name's own".
    Worse, probing ``type(self).__annotations__`` makes type create an empty
    ``Deferred.__annotations__``, so one refused write changes what
    ``d.__annotations__`` reads from then on (the module's, then {}). Refusing
    ``__doc__``/``__module__``/``__init__``/``__repr__`` is consistent (reads of
    those are the class's) and acceptable. Fix: refuse only names found in the
    class's own MRO dicts, as an instance lookup does:
    ``any(attr in vars(k) for k in type(self).__mro__)`` (and never probe
    ``type(self).__annotations__``)."""
    mod, d = loaded_module
    assert d.__name__ == mod.__name__  # read from the module
    assert d.__annotations__ == {"x": int}
    with contextlib.suppress(AttributeError):
        d.__annotations__ = {"y": str}
    assert d.__annotations__ == mod.__annotations__, (
        "a refused write changed what the deferred name reads"
    )
    d.__name__ = "renamed"
    assert mod.__name__ == "renamed"


def test_held_patches_through_the_deferred_name_still_reach_and_restore() -> None:
    """monkeypatch by object and by string, mock.patch by string (autospec,
    create) and mock.patch.object through mcp_server.patterns: patched, then
    restored; names the class defines are refused, not planted."""
    pytest.importorskip("mcp")
    from unittest import mock

    from builder.agents import mcp_server as server
    from builder.site import patterns

    mcp_server: Any = server  # its deferred names are under TYPE_CHECKING's else
    shown = patterns.TAGS_SHOWN
    with pytest.MonkeyPatch.context() as m:
        m.setattr(mcp_server.patterns, "TAGS_SHOWN", 7)
        assert patterns.TAGS_SHOWN == 7
        m.setattr("builder.agents.mcp_server.patterns.TAGS_SHOWN", 8)
        assert patterns.TAGS_SHOWN == 8
        m.delattr(mcp_server.patterns, "TAGS_SHOWN")
        assert not hasattr(patterns, "TAGS_SHOWN")
    assert shown == patterns.TAGS_SHOWN
    with mock.patch.object(mcp_server.patterns, "TAGS_SHOWN", 9):
        assert patterns.TAGS_SHOWN == 9
    with mock.patch("builder.agents.mcp_server.patterns.compute_patterns", autospec=True) as f:
        assert mcp_server.patterns.compute_patterns is f
    assert shown == patterns.TAGS_SHOWN and not isinstance(patterns.compute_patterns, mock.Mock)
    for own in ("_name", "_module", "_load", "__doc__", "__module__", "__repr__"):
        with pytest.raises(AttributeError):
            setattr(mcp_server.patterns, own, 1)
        assert patterns.__dict__.get(own, None) != 1


def test_held_deepcopy_unwrap_and_the_import_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import copy
    import inspect

    (tmp_path / "r54_probe.py").write_text("VALUE = object()\n")
    (tmp_path / "r54_bad.py").write_text("import builder\nbuilder.r54_no_such_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        d = deferred.module("r54_probe")
        box = copy.deepcopy({"a": d, "b": d})
        assert box["a"] is box["b"]  # memo honoured
        assert inspect.unwrap(d) is d  # type: ignore[arg-type]
        assert "r54_probe" not in sys.modules
        assert box["a"].VALUE is d.VALUE
        assert inspect.unwrap(d) is d  # loaded: the module has no __wrapped__
        bad = deferred.module("r54_bad")
        with pytest.raises(ImportError):
            getattr(bad, "X", None)
        with pytest.raises(ImportError):
            getattr(bad, "X", None)  # tried again, the same
    finally:
        sys.modules.pop("r54_probe", None)
        sys.modules.pop("r54_bad", None)


# --- 3. tests/test_layers.py imports() ------------------------------------------


def _imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rel: str, source: str) -> set[str]:
    """imports() of ``source`` as if it were builder/<rel>."""
    from tests import test_layers

    package = tmp_path / "builder"
    path = package / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    monkeypatch.setattr(test_layers, "PACKAGE", package)
    return test_layers.imports(path)


@pytest.mark.parametrize(
    "source",
    [
        "import importlib\n"
        "def main():\n    return importlib.import_module('..cli.main', __package__).main()\n",
        "import importlib\n"
        "def main():\n    return importlib.import_module('.cli.main', package='builder').main()\n",
        "def main():\n    return __import__('cli.main', globals(), None, ['main'], 2).main\n",
    ],
    ids=["relative-package", "relative-keyword", "dunder-level"],
)
def test_a_relative_name_to_import_module_is_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """tests/test_layers.py imports(), the LOADERS branch (low). a553889 resolves
    ``from ..cli import main`` but takes a literal given to
    importlib.import_module as it is: ``import_module("..cli.main",
    __package__)`` in builder/formats records "..cli.main", which layer()
    reads as no layer, so the upward import (formats -> cli) passes
    test_imports_go_down; likewise __import__ with level > 0. Fix: a literal
    starting with "." is resolved against the module's package (the second
    argument or ``package=`` must then be ``__package__`` or a literal, else
    raise), and __import__ with a level argument other than 0 raises (or is
    resolved the same way)."""
    from tests import test_layers

    try:
        found = _imports(tmp_path, monkeypatch, "formats/probe.py", source)
    except ValueError:
        return  # refused: fails closed
    layers = {test_layers.layer(t) for t in found}
    assert "cli" in layers, f"hidden upward import: {sorted(found)}"


@pytest.mark.parametrize(
    "source",
    [
        "import importlib as il\ndef main():\n    return il.import_module('builder.cli.main')\n",
        "from importlib import import_module as load\n"
        "def main():\n    return load('builder.cli.main')\n",
    ],
    ids=["module-alias", "function-alias"],
)
def test_an_aliased_import_module_is_read_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """tests/test_layers.py imports(), LOADERS (nit: an alias). builder.deferred's
    names now fail closed, but importlib's are still enumerated by spelling
    (``ast.unparse(func) in LOADERS``): ``import importlib as il`` or ``from
    importlib import import_module as load`` hides the dependency. Fix: treat
    importlib.import_module like builder.deferred.module (track the names bound
    by ``import importlib [as x]`` and ``from importlib import import_module
    [as y]``; a call with a literal counts, any other reference raises)."""
    try:
        found = _imports(tmp_path, monkeypatch, "formats/probe.py", source)
    except ValueError:
        return  # refused: fails closed
    assert "builder.cli.main" in found, sorted(found)


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations\n"
        "from builder import deferred\n"
        "def read(mod: deferred.Deferred) -> str:\n    return repr(mod)\n",
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from builder.deferred import Deferred\n"
        "def read(mod: Deferred) -> str:\n    return repr(mod)\n",
        "from builder import deferred\n"
        "def lazy(mod: object) -> bool:\n    return isinstance(mod, deferred.Deferred)\n",
    ],
    ids=["annotation", "type-checking", "isinstance"],
)
def test_naming_the_deferred_class_as_a_type_is_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """tests/test_layers.py imports(), the fail-closed pass (low: a false
    refusal). Any load of a name bound to builder.deferred or its callables
    that is not the callee of a literal call raises "call builder.deferred's
    module() with a literal name": a parameter annotated ``deferred.Deferred``
    (checked by mypy, as the project's code is), the same under TYPE_CHECKING,
    or ``isinstance(x, deferred.Deferred)`` fails test_imports_go_down with a
    message that says nothing of types, though none of them imports anything.
    Fix: let a reference to ``Deferred`` stand (not ``module``) where it is an
    annotation (arg.annotation, returns, AnnAssign.annotation) or the second
    argument of isinstance/issubclass: it cannot name a module there."""
    assert "builder.deferred" in _imports(tmp_path, monkeypatch, "agents/probe.py", source)


def test_held_the_real_modules_pass_and_the_fail_closed_spellings_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every module of builder/ is read without a refusal; a docstring or a
    string annotation naming deferred.Deferred is not refused; non-literal
    names, getattr, aliases, star imports raise; relative imports resolve."""
    from tests import test_layers

    for path in test_layers.MODULES:
        test_layers.imports(path)
    assert "builder.deferred" in _imports(
        tmp_path,
        monkeypatch,
        "agents/doc.py",
        '"""Uses deferred.module(x) and deferred.Deferred."""\n'
        "from builder import deferred\n"
        "def f(m: 'deferred.Deferred') -> None:\n    '''deferred.module(NAME)'''\n",
    )
    for bad in (
        "from builder import deferred\nx = deferred.module('builder.' + 'cli')\n",
        "from .. import deferred\nf = deferred.module\n",
        "from ..deferred import module as m\nx = m(NAME)\n",
        "import builder.deferred\nx = getattr(builder.deferred, 'module')('builder.cli')\n",
        "from ..deferred import *\n",
    ):
        with pytest.raises(ValueError):
            _imports(tmp_path, monkeypatch, "formats/bad.py", bad)
    found = _imports(
        tmp_path,
        monkeypatch,
        "site/sub/x.py",
        "from ... import cli\nfrom ...build import main\nfrom . import y\n",
    )
    assert {"builder.cli", "builder.build", "builder.site.sub"} <= found
