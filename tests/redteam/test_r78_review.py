"""Review r78 (of 838cf273: checked.Hashing keeps the log check's hash state;
one _SaltAsStood reads every standing dream's salt; plan() takes the store
as checked.ScanRows).

Defect (fails on 838cf273): the render items a build pickles to its forked
page workers (builder.site.units: ``(view, key, Admitted, related)``, 32 to a
chunk) now carry, in each standing dream's ``Admitted.salt_of``, the one
shared _SaltAsStood and with it ``logged.commitments``: the commitment of
every dream the log holds. A chunk pickled ~4 KB before and ~6.5 MB at 100k
dreams (0.04 s to pickle in the build's process, 0.09 s to unpickle in the
worker, per chunk of 32): a build whose log check stands and whose units do
not (a title, base URL or tier change, a witness cosignature) pays that for
every 32 dreams re-rendered, about 2 min serial in the build's process at
100k, and each worker holds the whole commitments dict again per chunk.

What held (no test kept unless named): Hashing checked against
checked.digest over every line at every call (a pytest plugin wrapping
Hashing.digests) through tests/test_log_check.py, r74-r77, test_store_restore
and test_mcp_store: no divergence; the standing check after a preview build,
an erasure, a store that failed, busy or discarded at the save, rows
rewritten at the save (restart taken); a non-bytes public digest beside a
tagged row (``whole`` kept across calls); _SaltAsStood is only ever handed
an Admitted made by _index_log for a logged, unerased, present dream, whose
commitment logged.commitments always holds (no KeyError path found).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from builder import build as buildmod
from builder import parallel
from builder.formats import leaf as leaffmt
from builder.log import logbuild, logstate
from tests.gitrun import git
from tests.test_log_check import _published


def _commitments(content: Path) -> dict[str, str]:
    """Dream id -> the commitment its leaf holds, from the log state."""
    state = logstate.load(content)
    found: dict[str, str] = {}
    for raw in state.leaves:
        leaf = leaffmt.parse(raw)
        if isinstance(leaf, leaffmt.DreamLeaf):
            found[leaf.id] = leaf.commitment
    return found


def test_a_render_item_carries_no_other_dreams_commitment(tmp_path: Path, monkeypatch: Any) -> None:
    """T81 (the log check's standing path; cost, not a wrong byte): a page
    worker's item names its own dream's leaf, never every logged dream's
    commitment. On 838cf273 each pickled Admitted of a standing dream holds
    logged.commitments whole."""
    tp, signer, site, ids = _published(tmp_path, 12)
    buildmod.build(tp.content, site, signer=signer)  # the log check is recorded
    # A title change: the log check stands, and every unit is rendered again.
    config = tp.content / "pool.yaml"
    config.write_text(config.read_text().replace("Test pool", "Renamed pool"))
    root = tp.content.parent
    git(root, "add", "content")
    git(root, "commit", "-q", "-m", "title")
    items: list[Any] = []
    real = parallel.imap_ordered

    def recorded(func: Any, seq: Any, **kw: Any) -> Any:
        if seq and isinstance(seq[0], tuple) and len(seq[0]) == 4:
            items.extend(seq)
        return real(func, seq, **kw)

    monkeypatch.setattr(parallel, "imap_ordered", recorded)
    retained: list[object] = []
    buildmod.build(tp.content, site, signer=signer, retain=retained)
    log = retained[3]
    assert isinstance(log, logbuild.Log)
    assert not isinstance(log.dreams[ids[0]].salt_of, str)  # the check stood
    assert len(items) == len(ids)
    commitments = _commitments(tp.content)
    for _view, _key, admitted, related in items:
        data = pickle.dumps((admitted, related))
        others = [
            i
            for i, c in commitments.items()
            if i != admitted.dream.id and i not in related and c.encode() in data
        ]
        assert others == [], f"{admitted.dream.id}'s item carries {len(others)} other commitments"
