"""Read a built site's JSON API (docs/protocol.md §8: api/dreams.json, an
index of shards api/dreams/<k>.json), as a program would."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def api_dreams(read: Callable[[str], bytes]) -> list[dict[str, Any]]:
    """Every dream the API lists, in log order; ``read(site path)`` gives a file's bytes."""
    index = json.loads(read("api/dreams.json"))
    dreams: list[dict[str, Any]] = []
    for shard in index["shards"]:
        dreams += json.loads(read("api/" + shard["path"]))["dreams"]
    return dreams


def site_api_dreams(site: Path) -> list[dict[str, Any]]:
    """:func:`api_dreams` of a site folder."""
    return api_dreams(lambda path: (site / path).read_bytes())


def shard_files(site: Path) -> list[Path]:
    """The API's shard files of a site folder, in log order (to edit, as a mirror may)."""
    index = json.loads((site / "api" / "dreams.json").read_bytes())
    return [site / "api" / shard["path"] for shard in index["shards"]]
