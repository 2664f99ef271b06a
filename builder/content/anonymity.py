"""Anonymous dreams: docs/protocol.md §1.2.

A dream whose ``consent.anonymize`` is true is signed by a **one-time key**
under the reserved author name :data:`NAME` (``dreampool sign`` makes the
key, signs, and keeps no copy of its private half), so nothing published,
the record, its key leaf or any page, names its author or carries their
key. The cost: such a dream counts as a guest's, and nobody, its author
included, can prove later who wrote it or sign an erasure request for it.

The pool's rules for a **new** dream (:func:`refusals`; a dream already in the
log is never refused by them, the log being append-only):

* ``consent.anonymize`` true under any other name is refused (it would
  publish that name and key): sign it again with ``dreampool sign``;
* a dream by :data:`NAME` has ``consent.anonymize`` true;
* a key under :data:`NAME` signs one dream: one already logged, or that signs
  another dream in the same batch, signs none.

Key files under :data:`NAME` are always ``guest`` and never rotated; many
keys share the name (:mod:`builder.content.pool` exempts it from one name, one key).
An author whose dreams are all anonymized is listed nowhere (:mod:`builder.site.model`).

Pure: values in, messages out.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from builder.formats import ed25519
from builder.formats.dream import Dream

NAME = "anonymous"
"""The author name of every anonymized dream signed as the pool now admits them."""

RESIGN = (
    "sign the draft again with `dreampool sign` (it signs an anonymized dream with a "
    f"one-time key under the author name {NAME!r}) and submit the new file"
)

COST = (
    f"consent.anonymize is true: signed with a one-time key under the author name {NAME!r}, "
    "not with your key. The dream counts as a guest's and cannot be linked to you: you "
    "cannot later prove you wrote it, nor ask for its erasure with a signed request "
    "(only the pool's maintainers can erase it, on their own judgement). The one-time "
    "key's private half was discarded, never written anywhere"
)
"""What ``dreampool sign`` says when it signs anonymously (docs/contributors.md)."""


def is_anonymized(body: Mapping[str, Any]) -> bool:
    """Whether a dream (or draft) asks not to be attributed: ``consent.anonymize``."""
    consent = body.get("consent")
    return isinstance(consent, Mapping) and consent.get("anonymize") is True


def anonymous_draft(draft: Mapping[str, Any]) -> dict[str, Any]:
    """``draft`` as the one-time key signs it: author :data:`NAME`, anonymize true."""
    out = copy.deepcopy(dict(draft))
    out["author"] = NAME
    consent = out.get("consent")
    out["consent"] = {**(consent if isinstance(consent, dict) else {}), "anonymize": True}
    out["consent"].setdefault("share", True)
    return out


def one_time_seed() -> bytes:
    """A fresh Ed25519 seed for one anonymized dream; the caller keeps it nowhere."""
    return ed25519.generate_seed()


def refusal(d: Dream, used: Collection[str]) -> tuple[str, str] | None:
    """Why a new dream is refused, as (JSON pointer, rule), or None. ``used``
    holds the keyIds that have signed (or are signing) another dream."""
    anonymized = is_anonymized(d.body)
    if anonymized and d.author != NAME:
        return (
            "/consent/anonymize",
            f"is true but the dream is signed under the author name {d.author!r} by that "
            "author's key, so its record would publish both; " + RESIGN,
        )
    if d.author == NAME and not anonymized:
        return (
            "/author",
            f"{NAME!r} is reserved for anonymized dreams (consent.anonymize true, signed "
            "with a one-time key by `dreampool sign`); sign under your own pseudonym",
        )
    if d.author == NAME and d.key_id in used:
        return (
            "/sig/keyId",
            f"key {d.key_id} signs for {NAME!r} and has signed another dream; a one-time "
            "key signs one dream: " + RESIGN,
        )
    return None


def refusals(new: Iterable[Dream], logged_keys: Collection[str]) -> dict[str, tuple[str, str]]:
    """:func:`refusal` of each of ``new`` (dreams about to be admitted together),
    by dream id, given the keyIds ``logged_keys`` that already signed a dream.
    Two new dreams under one key of :data:`NAME` are both refused: neither is
    the one the key was made for more than the other."""
    batch = list(new)
    twice = Counter(d.key_id for d in batch if d.author == NAME)
    used = set(logged_keys) | {key for key, n in twice.items() if n > 1}
    found = {}
    for d in batch:
        why = refusal(d, used)
        if why is not None:
            found[d.id] = why
    return found


def named_anonymized(d: Dream) -> str | None:
    """What ``check`` warns of a *logged* dream that asked for anonymity but was
    signed under its author's name (before the rule): it stays, as logged."""
    if not is_anonymized(d.body) or d.author == NAME:
        return None
    return (
        "asks for anonymity (consent.anonymize) but was logged under its author's name "
        "and key, which its record.json publishes (it was signed before anonymized dreams "
        f"were signed with a one-time key). To unpublish them: `dreampool erase {d.id} "
        "--reason author-request`, then sign the draft again with `dreampool sign` and "
        "submit it as a new dream (its log leaves stay: the key leaf names the author)"
    )
