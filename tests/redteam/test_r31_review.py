"""Review r31: a dream's text decoded only when a page shows it (940121a), an
admitted dream's commitment stored as it is computed (e8f9856) and the page key
of agents/digest.md (b516baa).

A failing test is a defect found in review.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from builder import buildcache
from builder.formats.dream import Dream
from tests.pools import make_pool
from tests.redteam import build, signed, submit, tree


@pytest.mark.parametrize("statements", [1, 2])
def test_two_threads_reading_a_deferred_body_both_get_it(statements: int) -> None:
    """T108: the agents' server reads the build's store and runs tools in
    worker threads, and ``Dream.body`` says a race between two first reads
    "loads it twice, equal". It did not: the second reader took ``_body``
    (None), the first then stored the body and cleared ``_load``, and the
    second's ``assert self._load is not None`` failed — an AssertionError
    traceback from a sound row. The interleaving is forced here with a trace
    function that holds the second reader after the first (or second) statement of the getter
    until the first reader is done."""
    body = {"author": "ada", "title": "t", "entries": [{"type": "fact"}]}
    d = Dream.deferred(
        "0" * 16,
        "sha256:" + "1" * 16,
        bytes(32),
        {"author": "ada", "title": "t"},
        ("fact",),
        lambda: body,
    )
    getter = Dream.body.fget
    assert getter is not None
    code = getter.__code__
    paused = threading.Event()
    done = threading.Event()
    got: list[Any] = []
    lines: list[int] = []

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            lines.append(frame.f_lineno)
            if len(lines) == statements + 1:  # that many of the getter's statements ran
                paused.set()
                done.wait(5)
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    def second() -> None:
        sys.settrace(tracer)
        try:
            got.append(d.body)
        except BaseException as exc:  # the defect is any exception
            got.append(exc)
        finally:
            sys.settrace(None)

    t = threading.Thread(target=second)
    t.start()
    assert paused.wait(5)
    assert d.body == body  # the first reader loads it while the second is held
    done.set()
    t.join(5)
    assert got == [body]


def _forge_heads(out: Path, edit: Callable[[dict[str, Any]], None]) -> int:
    """Rewrite every scan row's head and body with ``edit`` (both alike, so the
    body holds the head it is stored with), each row's digest made to match:
    what only a process that writes the store itself can do (T81, T108)."""
    store = out.parent / f".{out.name}.builds" / "cache" / buildcache.STORE
    db = sqlite3.connect(store, isolation_level=None)
    n = 0
    for k, v in db.execute('SELECT k, v FROM "scan"').fetchall():
        first, _, rest = v.partition(b"\n")
        head_row, body = json.loads(first), json.loads(rest)
        edit(head_row[4])
        edit(body)
        forged = buildcache._dump(head_row) + b"\n" + buildcache._dump(body)
        db.execute(
            'UPDATE "scan" SET v = ?, d = ? WHERE k = ?',
            (forged, buildcache._row_digest(k, forged), k),
        )
        n += 1
    db.close()
    return n


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(obj: dict[str, Any]) -> None:
        obj[field] = value

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        _set("tags", "ab"),  # listed as the tags "a" and "b"
        _set("consent", "yes"),  # head["consent"].get(...): AttributeError
        _set("lineage", ["x"]),  # (head.get("lineage") or {}).get(...): AttributeError
        _set("tags", [["a"]]),  # an unhashable tag: TypeError in slugs()
    ],
    ids=["tags-a-string", "consent-not-an-object", "lineage-a-list", "tag-a-list"],
)
def test_a_scan_row_whose_head_is_of_another_shape_is_a_miss(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None]
) -> None:
    """T44/T108 (buildcache: "decodes only what it would have encoded ... the
    row is a miss"): ``_scan_in`` checks the head's author and title, and
    ``_body_in`` that the body holds the same head, but neither that the
    tags, lineage and consent the site model reads are of the shape a
    verified dream has. A row with a valid digest whose head and body agree
    on ``"tags": "ab"`` listed the dream under tags "a" and "b"; one whose
    consent or lineage is not an object stopped the build with a traceback
    (AttributeError in build_model). Such a row must read as a miss: the dream
    is read from its file again, and the site is a cold build's."""
    tp = make_pool(tmp_path / "pool")
    ids = submit(
        tp, signed("ada", title="One"), signed("bob", title="Two", lineage={"generation": 1})
    )
    site = tmp_path / "pool" / "site"
    build(tp, site)
    assert _forge_heads(site, edit) == len(ids)
    report = build(tp, site, key=False)
    assert f"the build store's scan had {len(ids)} damaged row(s); ignored" in report.notes
    assert report.verified + report.committed == len(ids)  # read from the files again
    cold = tmp_path / "cold" / "site"
    cold.parent.mkdir()
    build(tp, cold, key=False)
    assert tree(site.resolve()) == tree(cold.resolve())


def _forge_bodies(out: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite every scan row's body alone with ``edit``, its digest made to match."""
    store = out.parent / f".{out.name}.builds" / "cache" / buildcache.STORE
    db = sqlite3.connect(store, isolation_level=None)
    for k, v in db.execute('SELECT k, v FROM "scan"').fetchall():
        first, _, rest = v.partition(b"\n")
        body = json.loads(rest)
        edit(body)
        forged = first + b"\n" + buildcache._dump(body)
        db.execute(
            'UPDATE "scan" SET v = ?, d = ? WHERE k = ?',
            (forged, buildcache._row_digest(k, forged), k),
        )
    db.execute('DELETE FROM "units"')  # every dream's page is rendered again
    db.close()


def _drop_text(body: dict[str, Any]) -> None:
    del body["entries"][0]["text"]


def _summary_a_list(body: dict[str, Any]) -> None:
    body["summary"] = ["a"]


def _anonymize_zero(body: dict[str, Any]) -> None:
    body["consent"]["anonymize"] = 0


@pytest.mark.parametrize(
    "edit",
    [_drop_text, _summary_a_list, _anonymize_zero],
    ids=["entry-without-text", "summary-a-list", "anonymize-0-for-false"],
)
def test_a_body_of_another_shape_is_named_when_a_page_reads_it(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None]
) -> None:
    """T108/T44: ``_body_in`` checked the body against its stored head with
    ``==`` and only the entries' types. A row (valid digest) whose entry has no
    text stopped the build with a KeyError traceback in DreamView.entries;
    one whose summary is a list was shown as "['a']"; and ``0 == False`` let a
    body whose consent says ``"anonymize": 0`` pass for the head's ``false``,
    into record.json. Each must be the named StoreDamaged with its hint."""
    tp = make_pool(tmp_path / "pool")
    (dream_id,) = submit(tp, signed("ada", title="One"))
    site = tmp_path / "pool" / "site"
    build(tp, site)
    _forge_bodies(site, edit)
    with pytest.raises(buildcache.StoreDamaged) as caught:
        build(tp, site, key=False)
    assert dream_id in caught.value.message
    assert "delete the build store" in (caught.value.hint or "")
