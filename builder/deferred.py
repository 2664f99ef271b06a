"""A module imported on its first use, for a command whose start is timed.

``dreampool mcp`` is started by an MCP client, which waits for its answer to
``initialize`` (issue 21: at most 1 s). The SDK alone takes most of that, so
the server's own modules that only a tool call or the background read of a
checkout need (the site's renderers, the patterns, the build store) are
imported when first used, not at start::

    if TYPE_CHECKING:
        from builder.site import patterns
    else:
        patterns = deferred.module("builder.site.patterns")

Every attribute is read from (and set on) the module itself, never copied: a
test that patches the module, by either name, patches what the deferred name
sees. A copy or a pickle of one is the same name, deferred again. The import is the
interpreter's own (``importlib.import_module``), which holds the module's
import lock, so two threads that use the name at once get the one module.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["Deferred", "module"]


class Deferred:
    """Stands for the module ``name`` until an attribute of it is read; then
    reads, sets and deletes that attribute on the module itself."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_module", None)

    def _load(self) -> ModuleType:
        # Read through object: a Deferred made without __init__ (copy, pickle)
        # has its slots unset, and __getattr__ must not be asked for them.
        found: ModuleType | None = object.__getattribute__(self, "_module")
        if found is None:
            name = object.__getattribute__(self, "_name")
            try:
                found = importlib.import_module(name)
            except AttributeError as exc:
                # Raised by the module's own code: not a name it lacks, which is
                # what hasattr() or getattr(d, x, default) would take it for.
                raise ImportError(f"importing {name} failed: {exc}", name=name) from exc
            object.__setattr__(self, "_module", found)
        return found

    def __getattr__(self, attr: str) -> Any:
        if attr in Deferred.__slots__:
            raise AttributeError(attr)  # unset slot: a copy before its state
        if attr == "__wrapped__" and object.__getattribute__(self, "_module") is None:
            # inspect.unwrap's probe (doctest's finder walks a module's globals):
            # a module has no __wrapped__, and the probe must not import it.
            raise AttributeError(attr)
        return getattr(self._load(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        # A test patching the module by the name the server uses patches the
        # module (monkeypatch.setattr(mcp_server.patterns, ...)). A name this
        # class defines reads as the class's, so it may not be set: set on the
        # module, a read through the deferred name would not see it.
        if _own(attr):
            raise AttributeError(f"{attr!r} is the deferred name's own; set it on the module")
        setattr(self._load(), attr, value)

    def __delattr__(self, attr: str) -> None:
        if _own(attr):
            raise AttributeError(f"{attr!r} is the deferred name's own; delete it on the module")
        delattr(self._load(), attr)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # A copy or an unpickled one is the same name, deferred again.
        return (module, (object.__getattribute__(self, "_name"),))

    def __copy__(self) -> Deferred:
        return module(object.__getattribute__(self, "_name"))

    def __deepcopy__(self, memo: dict[int, Any]) -> Deferred:
        # Defined, so copy.deepcopy's probe for it imports nothing.
        return module(object.__getattribute__(self, "_name"))

    def __repr__(self) -> str:
        name = object.__getattribute__(self, "_name")
        loaded = object.__getattribute__(self, "_module") is not None
        state = "imported" if loaded else "not imported yet"
        return f"<deferred module {name!r}, {state}>"


def _own(attr: str) -> bool:
    """Whether a Deferred reads ``attr`` as its own (its class's or object's), not
    the module's. Its class's namespace, not hasattr(Deferred, ...), which also
    finds what the class object has as a type (``__name__``, ``mro``), never
    read through an instance, and stores ``{}`` as ``__annotations__`` when asked."""
    return any(attr in vars(k) for k in Deferred.__mro__)


def module(name: str) -> Deferred:
    """``name``, imported when one of its attributes is first read."""
    return Deferred(name)
