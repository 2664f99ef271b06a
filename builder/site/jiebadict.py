"""jieba's prefix dictionary, read a first character at a time.

jieba cuts Chinese text (:func:`builder.site.keywords.tokens`) with a *prefix
dictionary* (``jieba.Tokenizer.gen_pfdict``): every word of its dictionary
file with the word's frequency (a word listed twice keeps the last), every
shorter prefix of a word that is not itself a word with 0, and the total of
all the frequencies. Built whole from jieba 0.42.1's 349,046 lines it costs
0.9–1.0 s of CPU on the benchmark machine (:func:`prefix_dict`): a third of
what admitting a hundred dreams costs, paid by every build that admits a
dream with Chinese text, for the few hundred characters those dreams hold.

A cut looks up only substrings of the text it cuts (``Tokenizer.get_DAG``,
``calc`` and ``__cut_DAG`` in jieba 0.42.1: ``sentence[k:i + 1]``), so every
key it looks up begins with a character of that text; and the keys beginning
with a character ``c`` are exactly the ones made from the lines whose word
begins with ``c``. :class:`PrefixDict` therefore holds the entries of the
characters it was asked for (:meth:`PrefixDict.load`), read by one pattern
scan of the file's text per call, in file order, and for any key beginning
with one of them holds the very value the whole dictionary does.

The total is of the whole file. For a file whose SHA-256 :data:`KNOWN` lists,
it is taken from there, and so is the file's shape (each line ``word
frequency tag``, which the scan relies on): ``tests/test_jiebadict.py`` holds
both against ``gen_pfdict`` on the installed jieba's file. Any other file is
read whole, by :func:`prefix_dict`, as before. So is every file once
:data:`SCANS_BEFORE_WHOLE` calls have each scanned it: a build that cuts many
texts one at a time pays at most that many scans before the whole read.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import BinaryIO

__all__ = ["KNOWN", "SCANS_BEFORE_WHOLE", "WHOLE_ABOVE", "PrefixDict", "prefix_dict"]

# SHA-256 of a dictionary file known to be of jieba's shape (every line three
# columns, "word frequency tag", split by one space, "\n" at the end of each)
# → the total of its frequencies. tests/test_jiebadict.py checks each entry
# whose file it has against gen_pfdict; a file not listed is read whole.
KNOWN = {
    # jieba 0.42.1, jieba/dict.txt: 349,046 lines
    "7197c3211ddd98962b036cdf40324d1ea2bfaa12bd028e68faa70111a88e12a8": 60_101_967,
}
# A scan of jieba 0.42.1's file takes 15–40 ms here, a whole read 0.9–1.0 s.
SCANS_BEFORE_WHOLE = 16
# A load of more new characters than this reads the whole file instead: the
# 1,000 first characters most lines begin with begin 75% of them, and a scan
# of most of the file costs more than the whole read (review r43: 2,000 words'
# characters, 61% of the lines, 0.75 s against 0.86 s).
WHOLE_ABOVE = 1_000
_BLOCK = 8_192  # lines added at a time

Reference = Callable[[BinaryIO], tuple[dict[str, int], int]]

# A dictionary file each of whose lines is "word frequency tag": the shape of
# jieba's own, which prefix_dict reads as whole columns.
_THREE_COLUMNS = re.compile(r"(?:\S+ \S+ \S+\n)*(?:\S+ \S+ \S+)?")


def prefix_dict(
    f: BinaryIO, *, reference: Reference, into: dict[str, int] | None = None
) -> tuple[dict[str, int], int]:
    """jieba's prefix dictionary of a dictionary file (open for reading, at
    its start): each word with its frequency (a word listed twice keeps the
    last), every shorter prefix of a word that is not itself a word with 0,
    and the frequencies' total: the very result of
    ``jieba.Tokenizer.gen_pfdict`` (tests compare the two on jieba's
    dictionary). A file of jieba's shape (:data:`_THREE_COLUMNS`)
    is read as columns, a block of lines at a time (all at once, the columns'
    strings took twice the dictionary's own memory); any other is read again
    from its start by ``reference`` (``gen_pfdict`` itself, with its errors).

    ``into``, if given, is filled and returned instead of a new dict: it may
    hold keys already, with their final values (:class:`PrefixDict`)."""
    freq: dict[str, int] = {} if into is None else into
    total = 0
    while lines := f.readlines(1 << 16):  # whole lines, of about 64 KiB in all
        text = b"".join(lines).decode("utf-8")
        if not _THREE_COLUMNS.fullmatch(text):
            f.seek(0)
            whole, total = reference(f)
            if into is None:
                return whole, total
            into.update(whole)
            return into, total
        fields = text.split()
        words = fields[0::3]
        counts = [int(c) for c in fields[1::3]]
        total += sum(counts)
        _add(freq, words, counts)
    return freq, total


def _add(freq: dict[str, int], words: list[str], counts: list[int]) -> None:
    """As gen_pfdict, line by line: a word takes its frequency (over a 0 its
    prefix left), a prefix that is no word yet takes 0."""
    freq.update(zip(words, counts, strict=True))
    freq.update(
        dict.fromkeys((p for w in words for i in range(1, len(w)) if (p := w[:i]) not in freq), 0)
    )


class PrefixDict:
    """The prefix dictionary of one dictionary file, as :func:`prefix_dict`
    gives it, but holding only the keys that begin with a character
    :meth:`load` was given (module doc). :attr:`freq` is filled in place, so a
    ``jieba.Tokenizer`` may hold it as its ``FREQ``; the keys of a character
    counted as read have their final values. :attr:`total` is the whole
    file's from the start.

    A character counts as read only once all its lines are in :attr:`freq`:
    a load that fails part way (out of memory, interrupted) leaves it to be
    read again, never a hole a cut would take for no word (review r43). Hold
    :attr:`lock` around a load and the cut that needs it; it is made anew in
    a forked child, where no other thread is left to release it."""

    def __init__(self, data: bytes, *, reference: Reference) -> None:
        self.freq: dict[str, int] = {}
        self.lock = threading.RLock()
        _AFTER_FORK.add(self)
        self._data: bytes | None = data
        self._reference = reference
        self._text = ""
        self._loaded: set[str] = set()
        self.scans = 0  # how many times load() scanned the file
        total = KNOWN.get(hashlib.sha256(data).hexdigest())
        if total is None:
            self.total = 0
            self.load_all()
        else:
            self.total = total
            # Every line, the first too, then begins right after a "\n".
            self._text = "\n" + data.decode("utf-8")

    @property
    def whole(self) -> bool:
        """Whether every key of the file is held."""
        return self._data is None

    def load(self, chars: Iterable[str]) -> None:
        """Hold every key that begins with one of ``chars`` (a text to be cut
        does: its characters)."""
        with self.lock:
            if self._data is None:
                return
            new = set(chars) - self._loaded
            if not new:
                return
            if self.scans >= SCANS_BEFORE_WHOLE or len(new) > WHOLE_ABOVE:
                self.load_all()
                return
            self.scans += 1
            starts = "".join(map(re.escape, sorted(new)))
            lines = re.finditer(f"\n([{starts}][^\n]*)", self._text)
            # A block of lines at a time, as prefix_dict reads the file whole.
            while block := [m[1] for m in itertools.islice(lines, _BLOCK)]:
                # Each line is "word frequency tag" (KNOWN vouches for the shape).
                fields = " ".join(block).split(" ")
                _add(self.freq, fields[0::3], [int(c) for c in fields[1::3]])
            self._loaded |= new

    def load_all(self) -> None:
        """Hold every key of the file (as :func:`prefix_dict` reads it)."""
        with self.lock:
            if self._data is None:
                return
            # Into freq as it stands, whose keys the file's lines in order give
            # their final values again; until they have, a word listed twice
            # may hold its first listing's frequency, so no character counts as
            # read meanwhile: a read stopped part way, or a child forked by
            # another thread meanwhile (review r44), reads its characters again.
            self._loaded = set()
            self.total = prefix_dict(
                io.BytesIO(self._data), reference=self._reference, into=self.freq
            )[1]
            self._data = None
            self._text = ""


# The dictionaries whose lock a forked child makes anew (os.register_at_fork).
_AFTER_FORK: weakref.WeakSet[PrefixDict] = weakref.WeakSet()


def _new_locks() -> None:
    for d in _AFTER_FORK:
        d.lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_locks)
