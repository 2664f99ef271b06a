"""builder.deferred: a module imported when first used, and the MCP server's start
that it keeps light (issue 21: an MCP client waits at most 1 s for ``initialize``)."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from builder import deferred

REPO = Path(__file__).resolve().parent.parent


def _fresh(code: str) -> object:
    """The JSON ``code`` prints, run in a fresh interpreter (this one has imported
    everything already)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def test_a_deferred_module_is_imported_by_its_first_attribute() -> None:
    found = _fresh(
        """
        import json, sys
        from builder import deferred
        mod = deferred.module("builder.formats.leaf")
        before = "builder.formats.leaf" in sys.modules
        parse = mod.parse
        print(json.dumps([before, "builder.formats.leaf" in sys.modules,
                          parse is sys.modules["builder.formats.leaf"].parse]))
        """
    )
    assert found == [False, True, True]


def test_a_deferred_module_reads_the_module_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A patch of the module is what the deferred name sees (tests patch modules)."""
    from builder.formats import b64

    mod = deferred.module("builder.formats.b64")
    assert mod.b64_encode is b64.b64_encode
    monkeypatch.setattr(b64, "b64_encode", lambda data: "patched")
    assert mod.b64_encode(b"x") == "patched"
    assert "imported" in repr(mod) and "builder.formats.b64" in repr(mod)


def test_a_missing_module_or_name_fails_when_used() -> None:
    mod = deferred.module("builder.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        _ = mod.anything
    with pytest.raises(AttributeError):
        _ = deferred.module("builder.formats.b64").no_such_name


# What answering ``initialize`` never needs: the site's renderers and templates,
# the patterns, the build store. A tool call or the background read imports them.
NOT_AT_START = (
    "jinja2",
    "builder.site.render",
    "builder.site.feeds",
    "builder.site.patterns",
    "builder.buildcache",
    "sqlite3",
)


def test_the_mcp_server_starts_without_the_site_renderers(tmp_path: Path) -> None:
    """What `dreampool mcp --content` runs before it answers ``initialize``: the
    command's module, the SDK, a lazy reader of a checkout, the server and its
    instructions. None of it imports a module only a tool needs."""
    content = tmp_path / "content"
    content.mkdir()
    (content / "pool.yaml").write_text("title: t\norigin: example.org/start\nk: 3\n")
    found = _fresh(
        f"""
        import json, sys
        from pathlib import Path
        import builder.cli.main
        from builder.agents import mcp_server
        mcp_server.require_sdk()
        reader = mcp_server.open_reader(None, Path({str(content)!r}), lazy=True)
        mcp_server.build_server(mcp_server.Tools(reader, content=Path({str(content)!r})))
        said = mcp_server.instructions(reader)
        print(json.dumps([sorted(m for m in {NOT_AT_START!r} if m in sys.modules),
                          "example.org/start" in said]))
        """
    )
    assert found == [[], True]


def test_a_deferred_module_can_be_copied() -> None:
    """copy.copy (and pickle.loads) of a Deferred recurse without end: the
    copy is made with __new__, its slots unset, and the copier's probe for
    __setstate__ goes to __getattr__, which reads self._module, unset, which
    goes to __getattr__ again. Anything that copies or unpickles an object
    holding a deferred module (a namespace, a default argument) dies with
    RecursionError. Fix: in __getattr__, raise AttributeError for names
    starting with "_" before touching self._module (or read it with
    object.__getattribute__), and give Deferred a __reduce__ returning
    (module, (self._name,))."""
    mod = deferred.module("builder.formats.b64")
    try:
        copied = copy.copy(mod)
    except RecursionError:
        pytest.fail("copy.copy(Deferred) recursed without end")
    assert copied.b64_encode(b"x") == mod.b64_encode(b"x")
    again = pickle.loads(pickle.dumps(mod))  # used now: _module holds a module
    assert again.b64_encode(b"x") == mod.b64_encode(b"x")


def test_a_patch_through_the_deferred_name_reaches_the_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """builder/deferred.py: "a test that patches the module patches what the
    deferred name sees". A test written as the server names the module,
    monkeypatch.setattr(mcp_server.patterns, ...) (or mock.patch.object, or
    the string "builder.agents.mcp_server.patterns.compute_patterns"), was a
    patch of the module before 4e4501f; now it raises AttributeError, since
    Deferred has __slots__ and no __setattr__. Fix: a __setattr__ (and
    __delattr__) that forwards names other than its own slots to the module."""
    from builder.agents import mcp_server
    from builder.site import patterns

    monkeypatch.setattr(mcp_server.patterns, "TAGS_SHOWN", 1)
    assert patterns.TAGS_SHOWN == 1
