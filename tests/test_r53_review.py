"""Review r53 of d256ce1 (buildcache put-back keeps the loaded row), 9074251
(builder.deferred: copy, pickle, setattr) and 9f8af7c (tests/test_layers.py
follows every name of builder.deferred).

A test named ``test_held_*`` is what was tried and held; every other test
failed on the reviewed code (9f8af7c) and names the defect, its severity and
the fix suggested, which the next commits made.
"""

from __future__ import annotations

import copy
import inspect
import pickle
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from builder import buildcache, deferred
from tests.test_buildcache import _blob, _keyed, _long_dream, _sha, _unit, break_table
from tests.test_store_forks import _busy_while, _keys, _plant, _short_timeout

SCAN = "scan"


# --- 1. builder/buildcache.py BuildCache.save(): the put-back without the pop ----


def _row(store: Path, blob: str) -> Any:
    """The scan entry a keyed cache reads back at ``blob`` (None if refused or absent)."""
    again = _keyed(store.parent)
    found = again[SCAN].get(blob)
    return found


def _busy_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, seeded: bool = True
) -> tuple[buildcache.BuildCache, Path]:
    """A cache whose scan Rows failed (busy) on blob 0's row, the section holding
    the kept entry, and one save() that put it back and found the store busy."""
    seed = _keyed(tmp_path)
    if seeded:
        seed[SCAN][_blob(0)] = (_sha(0), _long_dream(0))  # an earlier build's row
    seed["units"]["id0"] = _unit(0)
    seed.save()
    store = tmp_path / buildcache.STORE
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 1)
    c = _keyed(tmp_path)
    c[SCAN]
    _short_timeout(monkeypatch)
    kept = _busy_while(store, lambda: c.kept_scan(_blob(0), (_sha(0), _long_dream(0))))
    assert c._scan_rows is not None and c._scan_rows.failed
    c[SCAN][_blob(0)] = kept
    _busy_while(store, c.save)  # put back, then busy at _save: nothing written
    assert any("busy" in n for n in c.notes), c.notes
    return c, store


def _scan_writes(monkeypatch: pytest.MonkeyPatch, c: buildcache.BuildCache) -> list[str]:
    """The scan keys _save makes rows of from here on (upserts, not deletions)."""
    made: list[str] = []
    real = buildcache.BuildCache._row

    def row(self: buildcache.BuildCache, k: str, v: bytes) -> Any:
        made.append(k)
        return real(self, k, v)

    monkeypatch.setattr(buildcache.BuildCache, "_row", row)
    return made


def test_held_busy_then_good_save_writes_the_put_back_row_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """d256ce1: after the busy save, the good one writes the put-back entry (its
    full body) once; a third save writes nothing (loaded now holds the entry)."""
    c, store = _busy_put_back(tmp_path, monkeypatch)
    made = _scan_writes(monkeypatch, c)
    c.save()
    assert made.count(_blob(0)) == 1
    found = _row(store, _blob(0))
    assert found is not None and found[1].body == _long_dream(0).body
    made.clear()
    c.save()
    assert _blob(0) not in made, "a put-back row was written again by a later save"


def test_held_put_back_twice_by_two_busy_saves_then_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two busy saves (the second finds the section already holding the entry:
    "put back already"), then a good one: one write, no loop, no stale row."""
    c, store = _busy_put_back(tmp_path, monkeypatch)
    _busy_while(store, c.save)
    assert c[SCAN][_blob(0)][1].loaded  # the entry, not the kept deferred one
    made = _scan_writes(monkeypatch, c)
    c.save()
    assert made.count(_blob(0)) == 1
    assert _row(store, _blob(0))[1].body == _long_dream(0).body


def test_held_an_entry_replaced_after_a_busy_save_is_written_not_the_put_back_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new entry at the blob after the busy save is what the next save writes."""
    c, store = _busy_put_back(tmp_path, monkeypatch)
    c[SCAN][_blob(0)] = (_sha(3), _long_dream(3))
    c.save()
    assert _row(store, _blob(0))[1].body == _long_dream(3).body


def test_a_failed_scan_row_is_not_put_back_over_the_entry_that_replaced_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """builder/buildcache.py BuildCache.save(), the put-back (low; latent: the
    build saves "scan" once, and an entry at one blob is the same file's bytes;
    not introduced by d256ce1: 2b3493a fails the same way). A failed Rows never
    empties its buffer (unwritten() keeps every entry), and the put-back takes
    "the section holds what _loaded holds" for "the section still holds the
    entry kept_scan gave out". After any good save _loaded *is* the section, so
    at every later save the buffered entry is put back over whatever the
    section holds at that blob: the section is changed under its owner and the
    store's row rewritten with the entry the caller replaced (and written again
    at each save). Fix: put back only the very entry kept_scan returned (keep
    blob -> kept in kept_scan, test ``section.get(blob) is that``; this also
    makes the _discard heuristic unneeded), or drop the entries _save wrote from
    the failed Rows' buffer once the save commits."""
    seed = _keyed(tmp_path)
    seed[SCAN]
    seed.save()
    store = tmp_path / buildcache.STORE
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 1)
    c = _keyed(tmp_path)
    c[SCAN]
    _short_timeout(monkeypatch)
    _busy_while(store, lambda: c.kept_scan(_blob(0), (_sha(0), _long_dream(0))))
    assert c._scan_rows is not None and c._scan_rows.failed
    newer = (_sha(3), _long_dream(3))
    c[SCAN][_blob(0)] = newer  # not the kept entry: the put-back leaves it
    c.save()
    assert _row(store, _blob(0))[1].body == _long_dream(3).body
    c.save()  # nothing changed since
    assert c[SCAN][_blob(0)] is newer, "the second save put the buffered entry back"
    assert _row(store, _blob(0))[1].body == _long_dream(3).body, "a replaced entry's row came back"


def test_held_an_entry_deleted_after_two_busy_saves_leaves_no_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T48 after two busy saves, and after a good save that wrote the put-back
    row: the erased dream's row goes either way."""
    c, store = _busy_put_back(tmp_path, monkeypatch)
    _busy_while(store, c.save)
    del c[SCAN][_blob(0)]
    c.save()
    assert _blob(0) not in _keys(store, SCAN)

    d, store2 = _busy_put_back(tmp_path / "b", monkeypatch)
    d.save()  # written
    del d[SCAN][_blob(0)]
    d.save()
    assert _blob(0) not in _keys(store2, SCAN)


def test_held_a_put_back_after_the_store_was_started_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The busy save, then another section damaged (_discard: loaded emptied):
    the good save writes the entry into the fresh store; deleted instead, the
    fresh store has no row for it."""
    c, store = _busy_put_back(tmp_path, monkeypatch)
    break_table(store, "units")
    c["units"]
    assert any("afresh" in n for n in c.notes), c.notes
    c.save()
    assert _row(store, _blob(0))[1].body == _long_dream(0).body

    d, store2 = _busy_put_back(tmp_path / "b", monkeypatch)
    break_table(store2, "units")
    d["units"]
    del d[SCAN][_blob(0)]
    d.save()
    assert _blob(0) not in _keys(store2, SCAN)


def test_held_a_planted_row_at_the_put_back_blob_is_replaced_or_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81: an untagged row at blob 0 (refused as read), the dream's row put back
    by a busy save: the good save replaces it; the entry gone, it is deleted."""
    for sub, erase in (("a", False), ("b", True)):
        folder = tmp_path / sub
        seed = _keyed(folder)
        seed[SCAN]
        seed.save()
        _plant(folder, SCAN, _blob(0), (_sha(7), _long_dream(7)))
        store = folder / buildcache.STORE
        monkeypatch.setattr(buildcache.Rows, "FLUSH", 1)
        c = _keyed(folder)
        c[SCAN]
        assert c._refused[SCAN] == [_blob(0)]
        with monkeypatch.context() as m:
            _short_timeout(m)
            kept = _busy_while(store, lambda c=c: c.kept_scan(_blob(0), (_sha(0), _long_dream(0))))
            c[SCAN][_blob(0)] = kept
            _busy_while(store, c.save)
        if erase:
            del c[SCAN][_blob(0)]
        c.save()
        again = _keyed(folder)
        again[SCAN]
        assert again._refused[SCAN] == [], "the planted row outlived the save (T81)"
        if erase:
            assert _blob(0) not in _keys(store, SCAN)
        else:
            assert again[SCAN][_blob(0)][1].body == _long_dream(0).body


def test_held_a_save_of_other_sections_leaves_the_put_back_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """save("units") (good) after the busy put-back: the scan is neither put back
    again nor written nor forgotten; the full save then writes it once."""
    c, _store = _busy_put_back(tmp_path, monkeypatch)
    c["units"]["id1"] = _unit(1)
    made = _scan_writes(monkeypatch, c)
    c.save("units")
    assert made == ["id1"] or _blob(0) not in made
    assert _blob(0) in c._loaded[SCAN], "the loaded row was forgotten by a save of another section"
    c.save()
    assert made.count(_blob(0)) == 1


# --- 2. builder/deferred.py Deferred --------------------------------------------


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module on sys.path, never imported yet."""
    name = f"r53_probe_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text("VALUE = object()\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_deepcopy_of_a_deferred_module_neither_imports_it_nor_fails(probe: str) -> None:
    """builder/deferred.py, Deferred (low). copy.copy and pickle go through
    __reduce__ and import nothing, but copy.deepcopy first probes the instance
    for __deepcopy__, which reaches __getattr__ and imports the module: a deep
    copy of anything holding a deferred name (a namespace, a default argument)
    imports what it was to defer, and, if the module cannot be imported, fails
    with ModuleNotFoundError though copy.copy and pickle do not. The same probe
    through hasattr(d, "__wrapped__") (inspect.unwrap, doctest's finder over
    mcp_server's globals) imports it too. Fix: give Deferred __copy__ and
    __deepcopy__(memo) returning module(self's name), and answer the probes the
    standard library makes (at least "__wrapped__") with AttributeError while
    the module is not imported."""
    d = deferred.module(probe)
    again = copy.deepcopy(d)
    assert probe not in sys.modules, "copy.deepcopy imported the deferred module"
    assert again.VALUE is d.VALUE
    missing = deferred.module("builder.r53_no_such_module")
    copy.deepcopy(missing)  # copy.copy and pickle of it work
    assert inspect.unwrap(deferred.module(probe + "_x")) is not None


def test_held_copy_pickle_repr_and_isinstance_import_nothing(probe: str) -> None:
    d = deferred.module(probe)
    for other in (copy.copy(d), pickle.loads(pickle.dumps(d)), copy.copy(copy.copy(d))):
        assert repr(other) == repr(d)
    assert not inspect.ismodule(d) and not isinstance(d, type(sys))
    assert type(d) is deferred.Deferred and d.__class__ is deferred.Deferred
    assert probe not in sys.modules
    value = d.VALUE
    copied = pickle.loads(pickle.dumps(d))  # used: a fresh deferred name, the same module
    assert "not imported yet" in repr(copied) and copied.VALUE is value
    raw = deferred.Deferred.__new__(deferred.Deferred)  # no slots set: no recursion
    assert not hasattr(raw, "VALUE")


def test_setting_a_deferreds_own_name_through_it_agrees_with_reading_it(probe: str) -> None:
    """builder/deferred.py, Deferred.__setattr__ (nit). Writes of every name go to
    the module, but reads of the names the Deferred itself defines (its slots
    _name and _module, _load, __doc__, __module__) are its own: ``d._name =
    "x"`` plants ``_name`` on the module and ``d._name`` still reads the
    deferred's name; mock.patch.object(d, "_load", ...) patches nothing the
    deferred name sees (and ``del d._module`` deletes the module's attribute
    of that name, if any). Fix: refuse (AttributeError) setting or deleting a
    name type(self) defines, so a read and a write through the name agree; or
    keep the state under names no module uses (name-mangled slots)."""
    d = deferred.module(probe)
    mod = __import__(probe)
    for attr in ("_name", "_module"):
        try:
            setattr(d, attr, "x")
        except AttributeError:
            assert not hasattr(mod, attr), f"a refused {attr} was planted on the module"
            continue
        assert getattr(d, attr) == "x" == getattr(mod, attr), (
            f"d.{attr} = 'x' set the module's {attr}; d.{attr} reads {getattr(d, attr)!r}"
        )


def test_an_attribute_error_raised_by_the_import_is_not_a_missing_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """builder/deferred.py, Deferred.__getattr__ (nit). A module whose import
    raises AttributeError (a bug in it, or in one it imports) makes
    hasattr(d, "X") False and getattr(d, "X", default) the default, silently:
    the import's failure reads as a name the module lacks. Fix: in _load,
    re-raise an AttributeError from importlib.import_module as ImportError
    (``raise ImportError(...) from exc``)."""
    (tmp_path / "r53_attrerr.py").write_text("X = 1\nraise AttributeError('bug')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    d = deferred.module("r53_attrerr")
    with pytest.raises(ImportError):
        hasattr(d, "X")


def test_held_a_failed_import_is_tried_again_and_leaves_no_half_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = tmp_path / "flag"
    (tmp_path / "r53_flaky.py").write_text(
        f"import pathlib\nf = pathlib.Path({str(flag)!r})\n"
        "if not f.exists():\n    f.touch()\n    raise ImportError('first time')\nOK = 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    d = deferred.module("r53_flaky")
    try:
        with pytest.raises(ImportError, match="first time"):
            _ = d.OK
        assert "r53_flaky" not in sys.modules and "not imported yet" in repr(d)
        assert d.OK == 1 and "imported" in repr(d)
    finally:
        sys.modules.pop("r53_flaky", None)


def test_held_threads_reading_at_once_get_one_whole_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "r53_slow.py").write_text("import time\ntime.sleep(0.3)\nVALUE = object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    d = deferred.module("r53_slow")
    got: list[object] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            got.append(d.VALUE)
        except BaseException as exc:  # a half-initialized module: AttributeError
            errors.append(exc)

    try:
        threads = [threading.Thread(target=read) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(got) == 6 and len({id(v) for v in got}) == 1
    finally:
        sys.modules.pop("r53_slow", None)


def test_held_patches_through_the_servers_name_reach_the_module() -> None:
    """mock.patch by string through builder.agents.mcp_server.patterns.X (with
    create=True, autospec=True), mock.patch.object, and monkeypatch by string:
    each patches the module and restores it (Deferred.__dict__ is the module's,
    so mock sees the attribute as local and sets it back)."""
    pytest.importorskip("mcp")
    from builder.agents import mcp_server
    from builder.site import patterns

    shown, compute = patterns.TAGS_SHOWN, patterns.compute_patterns
    with mock.patch("builder.agents.mcp_server.patterns.TAGS_SHOWN", 99):
        assert patterns.TAGS_SHOWN == 99 == mcp_server.patterns.TAGS_SHOWN
    with mock.patch("builder.agents.mcp_server.patterns.r53_new", 5, create=True):
        assert patterns.r53_new == 5  # type: ignore[attr-defined]
    with mock.patch("builder.agents.mcp_server.patterns.compute_patterns", autospec=True) as m:
        assert patterns.compute_patterns is m
    with mock.patch.object(mcp_server.buildcache, "STORE", "x"):
        assert buildcache.STORE == "x"
    assert shown == patterns.TAGS_SHOWN
    assert patterns.compute_patterns is compute
    assert not hasattr(patterns, "r53_new") and buildcache.STORE != "x"
    assert isinstance(mcp_server.patterns, deferred.Deferred)


def test_held_monkeypatch_by_string_through_the_deferred_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("mcp")
    from builder.site import patterns

    monkeypatch.setattr("builder.agents.mcp_server.patterns.TAGS_SHOWN", 2)
    assert patterns.TAGS_SHOWN == 2
    monkeypatch.delattr("builder.agents.mcp_server.patterns.MIN_TIER")
    assert not hasattr(patterns, "MIN_TIER")


def test_held_nothing_in_the_builder_needs_a_module_type() -> None:
    """No module of builder/ asks whether a value is a module (isinstance of
    ModuleType, inspect.ismodule, sys.modules lookups of a name it holds)."""
    root = Path(__file__).resolve().parents[1] / "builder"
    assert (root / "deferred.py").is_file()  # the folder read is the package
    for path in root.rglob("*.py"):
        if path.name == "deferred.py" or "templates_compiled" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        assert "ismodule" not in text and "ModuleType" not in text, path


# --- 3. tests/test_layers.py imports() ------------------------------------------


def _found(tmp_path: Path, source: str) -> set[str] | None:
    """imports() of ``source``, or None if it refused to read it (fail closed)."""
    from tests.test_layers import imports

    path = tmp_path / "mod.py"
    path.write_text(source, encoding="utf-8")
    try:
        return imports(path)
    except (AssertionError, ValueError, SyntaxError):
        return None


def test_held_the_layer_check_reads_the_alias_spellings(tmp_path: Path) -> None:
    for source in (
        'import builder.deferred\nx = builder.deferred.module("builder.cli.main")\n',
        'import builder\nx = builder.deferred.Deferred("builder.cli.main")\n',
        'import builder.deferred as bd\nx = bd.module("builder.cli.main")\n',
        'from builder import deferred as d\nx = d.Deferred("builder.cli.main")\n',
        'from builder.deferred import Deferred as D\nx = D("builder.cli.main")\n',
        "def f():\n"
        "    from builder.deferred import module\n"
        '    return module("builder.cli.main")\n',
    ):
        found = _found(tmp_path, source)
        assert found is not None and "builder.cli.main" in found, source


def test_a_relative_import_is_a_dependency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/test_layers.py imports() (medium). Every ``from .x import y`` (level
    > 0) is skipped: ``from ..cli import main`` in builder/formats, or ``from ..
    import deferred`` then ``deferred.module("builder.cli.main")``, hides an
    upward import from test_imports_go_down, and the package's lint (ruff
    select E,F,W,I,B,UP,SIM,RUF) does not ban relative imports. Fix: resolve a
    relative import against the module's own dotted name (its path under
    PACKAGE, as importlib.util.resolve_name does) and treat it as the absolute
    one, including for builder.deferred's names; or ban them in pyproject
    ([tool.ruff.lint] select "TID", flake8-tidy-imports ban-relative-imports =
    "all")."""
    root = Path(__file__).resolve().parents[1]
    lint = (root / "pyproject.toml").read_text(encoding="utf-8")
    if '"TID' in lint and 'ban-relative-imports = "all"' in lint:
        return  # banned instead
    from tests import test_layers

    package = tmp_path / "builder"
    (package / "formats").mkdir(parents=True)
    monkeypatch.setattr(test_layers, "PACKAGE", package)
    path = package / "formats" / "probe.py"
    path.write_text(
        "from ..cli import main\n"
        "from .. import deferred\n"
        'later = deferred.module("builder.build")\n',
        encoding="utf-8",
    )
    found = test_layers.imports(path)
    layers = {test_layers.layer(t) for t in found}
    assert {"cli", "build"} <= layers, f"hidden upward imports: {sorted(found)}"


def test_a_deferred_module_named_by_keyword_is_a_dependency(tmp_path: Path) -> None:
    """tests/test_layers.py imports() (low). Only a name given as the first
    positional argument counts: ``deferred.module(name="builder.cli.main")``
    (the parameter is named ``name``) hides the dependency. Fix: take the
    constant from args[0] or from the keyword ``name``."""
    found = _found(
        tmp_path, 'from builder import deferred\nx = deferred.module(name="builder.cli.main")\n'
    )
    assert found is None or "builder.cli.main" in found


def test_a_lazy_import_through_importlib_is_a_dependency(tmp_path: Path) -> None:
    """tests/test_layers.py imports() (low). The module's docstring: "a lazy
    import inside a function ... counts"; spelled as builder.deferred itself
    does it, ``importlib.import_module("builder.cli.main")`` (or
    ``__import__``), it does not. Fix: count a call of importlib.import_module
    / __import__ whose first argument is a constant, as a deferred one."""
    found = _found(
        tmp_path,
        "import importlib\n"
        'def main():\n    return importlib.import_module("builder.cli.main").main()\n',
    )
    assert found is None or "builder.cli.main" in found


@pytest.mark.parametrize(
    "source",
    [
        'from builder import deferred\nlazy = deferred.module\nx = lazy("builder.cli.main")\n',
        'from builder import deferred\nx = getattr(deferred, "module")("builder.cli.main")\n',
        "from builder import deferred\nNAME = 'builder.cli.main'\nx = deferred.module(NAME)\n",
        'from builder.deferred import *\nx = module("builder.cli.main")\n',
        "import functools\nfrom builder import deferred\n"
        'x = functools.partial(deferred.module, "builder.cli.main")()\n',
    ],
    ids=["assigned", "getattr", "constant", "star", "partial"],
)
def test_an_unread_use_of_builder_deferred_fails_closed(tmp_path: Path, source: str) -> None:
    """tests/test_layers.py imports() (nit: contrived spellings). A name bound to
    builder.deferred's callables, a getattr of them, a module name held in a
    constant, a star import or a partial: each hides the dependency. Fix: fail
    closed rather than enumerate spellings: any reference to a name bound to
    builder.deferred (or to its module/Deferred) that is not the callee of a
    call whose argument is a string constant makes imports() raise (or the
    test fail) naming the line; resolve module-level string constants first."""
    found = _found(tmp_path, source)
    assert found is None or "builder.cli.main" in found, sorted(found)
