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

Every attribute is read from the module itself, never copied: a test that
patches the module patches what the deferred name sees. The import is the
interpreter's own (``importlib.import_module``), which holds the module's
import lock, so two threads that use the name at once get the one module.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["Deferred", "module"]


class Deferred:
    """Stands for the module ``name`` until an attribute of it is read."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        found = self._module
        if found is None:
            found = self._module = importlib.import_module(self._name)
        return getattr(found, attr)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<deferred module {self._name!r}, {state}>"


def module(name: str) -> Deferred:
    """``name``, imported when one of its attributes is first read."""
    return Deferred(name)
