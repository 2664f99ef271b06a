"""jieba's prefix dictionary read a first character at a time
(builder.site.jiebadict). The witness is jieba's own ``Tokenizer.gen_pfdict``,
which reads the whole file line by line: the lazy dictionary must hold its
very values for every key beginning with a character it was asked for, and a
tokenizer holding it must cut every text as one holding the whole does."""

from __future__ import annotations

import functools
import hashlib
import io
import os
import random
import threading
from typing import Any

import jieba  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.site import jiebadict, keywords


@functools.cache
def _file() -> bytes:
    with jieba.Tokenizer().get_dict_file() as f:
        return bytes(f.read())


@functools.cache
def _whole() -> tuple[dict[str, int], int]:
    """gen_pfdict of the installed jieba's dictionary: the reference."""
    freq, total = jieba.Tokenizer.gen_pfdict(io.BytesIO(_file()))
    return freq, total


def _lazy(data: bytes | None = None) -> jiebadict.PrefixDict:
    data = _file() if data is None else data
    return jiebadict.PrefixDict(data, reference=jieba.Tokenizer.gen_pfdict)


def _tokenizer(freq: dict[str, int], total: int) -> Any:
    seg = jieba.Tokenizer()
    seg.FREQ, seg.total, seg.initialized = freq, total, True
    return seg


def test_the_prefix_dictionary_is_jiebas_own() -> None:
    """jiebadict.prefix_dict reads jieba's dictionary as columns; jieba's own
    Tokenizer.gen_pfdict, line by line, is the witness: the same words,
    frequencies, zero-frequency prefixes and total."""
    assert jiebadict.prefix_dict(io.BytesIO(_file()), reference=jieba.Tokenizer.gen_pfdict) == (
        _whole()
    )


@pytest.mark.parametrize(
    "data",
    [
        "数据库 30 n\n数据 20 n\n数据库 7 n\n索引 9 n\n",  # a word twice: the last counts
        "数据 20 n\n数据库 30\n",  # a line of two fields: not jieba's shape
        "数据 20 n\r\n数据库 30 n\r\n",
        "",
    ],
)
def test_a_dictionary_of_any_shape_gives_jiebas_prefix_dictionary(data: str) -> None:
    raw = data.encode()
    got = jiebadict.prefix_dict(io.BytesIO(raw), reference=jieba.Tokenizer.gen_pfdict)
    assert got == jieba.Tokenizer.gen_pfdict(io.BytesIO(raw))
    # A file KNOWN does not list is read whole, to the same result.
    lazy = _lazy(raw)
    assert lazy.whole and (lazy.freq, lazy.total) == got
    into: dict[str, int] = {}
    filled = jiebadict.prefix_dict(io.BytesIO(raw), reference=jieba.Tokenizer.gen_pfdict, into=into)
    assert filled[0] is into and filled == got


def test_the_installed_dictionary_is_known_and_its_total_and_shape_are_as_listed() -> None:
    """KNOWN vouches for a file's total and its shape (every line "word
    frequency tag"), which the scan relies on; here both are held against the
    installed jieba's file. A jieba whose file is not listed still cuts the
    same (read whole), but slower: list it."""
    digest = hashlib.sha256(_file()).hexdigest()
    assert digest in jiebadict.KNOWN, f"list jieba's dictionary {digest} in jiebadict.KNOWN"
    assert jiebadict.KNOWN[digest] == _whole()[1]
    lines = _file().decode().split("\n")
    assert lines[-1] == ""  # "\n" ends every line
    assert all(len(line.split(" ")) == 3 and all(line.split(" ")) for line in lines[:-1])
    # A word listed twice, with two frequencies, would hold its first one for a
    # while during a whole read in place (PrefixDict.load_all): none is.
    seen: dict[str, str] = {}
    for line in lines[:-1]:
        word, count, _ = line.split(" ")
        assert seen.setdefault(word, count) == count, word


def test_every_character_read_in_batches_gives_the_whole_dictionary() -> None:
    """Each key lies in the entries of its first character, and nowhere else:
    loading every line's first character, in batches, one scan each, ends
    with gen_pfdict's dictionary, key for key (the first line of the file and
    words listed twice among them)."""
    firsts = sorted({line[:1] for line in _file().decode().split("\n") if line})
    random.Random(7).shuffle(firsts)
    lazy = _lazy()
    batches = jiebadict.SCANS_BEFORE_WHOLE - 1
    for i in range(batches):
        lazy.load(firsts[i::batches])
    assert not lazy.whole and lazy.scans == batches
    assert lazy.freq == _whole()[0]
    assert lazy.total == _whole()[1]


def test_a_cut_reads_only_its_characters_entries() -> None:
    """The point of the module: tokens() of one dream's text holds the entries
    of its characters, not jieba's 349,046 words and their prefixes."""
    keywords._segmenter.cache_clear()
    try:
        assert {"数据库", "索引", "重建"} <= keywords.tokens("数据库索引重建")
        seg, words = keywords._segmenter()
        assert seg.FREQ is words.freq and not words.whole
        assert 0 < len(words.freq) < len(_whole()[0]) // 50
        assert {k[0] for k in words.freq} <= set("数据库索引重建")
    finally:
        keywords._segmenter.cache_clear()


def test_after_the_scans_a_load_reads_the_whole_file() -> None:
    lazy = _lazy()
    chars = iter("的一是不了人我在有他这为之大来以个中上们")
    for _ in range(jiebadict.SCANS_BEFORE_WHOLE):
        lazy.load(next(chars))
    assert not lazy.whole
    lazy.load(next(chars))
    assert lazy.whole and lazy.freq == _whole()[0]
    lazy.load("龢")  # nothing more to read
    assert lazy.freq == _whole()[0]


def test_prepare_reads_the_characters_of_all_texts_in_one_scan() -> None:
    keywords._segmenter.cache_clear()
    try:
        texts = ["数据库迁移", "需要先备份", "git revert 撤销提交", "限流器"]
        keywords.prepare(iter(texts))
        _, words = keywords._segmenter()
        assert words.scans == 1
        for text in texts:
            keywords.tokens(text)
        assert words.scans == 1  # every character was read already
        keywords.prepare_all()
        assert words.whole and words.freq == _whole()[0]
    finally:
        keywords._segmenter.cache_clear()


def _words() -> list[str]:
    return [w for w, f in _whole()[0].items() if f and 2 <= len(w) <= 6][::97]


_HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
_PIECES = st.one_of(
    st.deferred(lambda: st.sampled_from(_words())),
    st.text(_HAN, min_size=1, max_size=4),
    st.sampled_from(["AT&T", "B超", "c#", "T恤", "3D", "x光", " ", "。", "abc"]),
    st.text(max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_a_cut_with_the_lazy_dictionary_is_the_whole_dictionarys(text: str) -> None:
    """For any text: after load(text), every substring (every key a cut can
    look up) has the whole dictionary's value, and jieba cuts the text, with
    and without its HMM, as with the whole dictionary."""
    whole_freq, total = _whole()
    lazy = _lazy()
    lazy.load(text)
    for i in range(len(text)):
        for j in range(i + 1, len(text) + 1):
            assert lazy.freq.get(text[i:j]) == whole_freq.get(text[i:j]), text[i:j]
    lazy_seg, whole_seg = _tokenizer(lazy.freq, lazy.total), _tokenizer(whole_freq, total)
    for hmm in (True, False):
        assert list(lazy_seg.cut(text, HMM=hmm)) == list(whole_seg.cut(text, HMM=hmm))


# Review r43: what a failed, concurrent or oversized load leaves behind.

_TEXT, _WANT = "数据库索引重建", {"数据库", "索引", "重建"}


@pytest.fixture
def fresh() -> Any:
    keywords._segmenter.cache_clear()
    yield
    keywords._segmenter.cache_clear()


def test_after_the_switch_to_whole_the_tokenizer_still_cuts_as_whole(fresh: Any) -> None:
    """The tokenizer holds the dictionary's dict: reading the whole file must
    fill that very dict, not bind a new one (a mutation no other test caught)."""
    seg, words = keywords._segmenter()
    for c in "的一是不了人我在有他这为之大来以个中上们"[: jiebadict.SCANS_BEFORE_WHOLE]:
        keywords.tokens(c + c)
    assert not words.whole
    assert keywords.tokens(_TEXT) == _WANT  # this call reads the whole file
    assert words.whole and seg.FREQ is words.freq and _whole()[0] == seg.FREQ


def test_a_failed_scan_is_read_again(monkeypatch: pytest.MonkeyPatch, fresh: Any) -> None:
    """A load that fails part way (out of memory, interrupted) must not leave
    its characters counted as read: every later cut would miss their words."""
    keywords._segmenter()
    real = jiebadict._add

    def boom(*args: Any) -> None:
        raise MemoryError

    monkeypatch.setattr(jiebadict, "_add", boom)
    with pytest.raises(MemoryError):
        keywords.tokens(_TEXT)
    monkeypatch.setattr(jiebadict, "_add", real)
    assert keywords.tokens(_TEXT) == _WANT


def test_a_failed_whole_read_leaves_no_wrong_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped part way through the whole file: whatever it had set, the next
    load of a character gives the whole dictionary's values again."""
    lazy = _lazy()
    lazy.load("B数")
    calls = 0
    real = jiebadict._add

    def stop_later(*args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise MemoryError
        real(*args)

    monkeypatch.setattr(jiebadict, "_add", stop_later)
    with pytest.raises(MemoryError):
        lazy.load_all()
    monkeypatch.setattr(jiebadict, "_add", real)
    assert not lazy.whole
    lazy.load("B数")
    whole = _whole()[0]
    assert {k: v for k, v in lazy.freq.items() if k[0] in "B数"} == {
        k: v for k, v in whole.items() if k[0] in "B数"
    }
    assert lazy.freq["B超"] == whole["B超"]  # the one word listed twice


def test_a_load_in_another_thread_is_waited_for(
    monkeypatch: pytest.MonkeyPatch, fresh: Any
) -> None:
    keywords._segmenter()
    entered, release = threading.Event(), threading.Event()
    real = jiebadict._add

    def slow(*args: Any) -> None:
        entered.set()
        release.wait(10)
        real(*args)

    monkeypatch.setattr(jiebadict, "_add", slow)
    first = threading.Thread(target=keywords.tokens, args=(_TEXT,))
    first.start()
    try:
        assert entered.wait(10)
        got: list[set[str]] = []
        second = threading.Thread(target=lambda: got.append(keywords.tokens(_TEXT)))
        second.start()
        second.join(0.2)
        assert second.is_alive()  # waiting for the first thread's load
    finally:
        release.set()
        first.join()
    second.join(10)
    assert got == [_WANT]


def test_text_without_chinese_needs_no_dictionary(fresh: Any) -> None:
    keywords.prepare([])
    keywords.prepare(["an English dream", "über die Straße"])
    assert keywords._segmenter.cache_info().currsize == 0


def test_a_load_of_many_characters_reads_the_whole_file() -> None:
    """A scan of most of the file costs more time and memory than reading it
    whole (r43: 2,000 words' characters, 0.75 s against 0.86 s)."""
    firsts = sorted({line[:1] for line in _file().decode().split("\n") if line})
    lazy = _lazy()
    lazy.load(firsts[: jiebadict.WHOLE_ABOVE])
    assert not lazy.whole and lazy.scans == 1
    lazy.load(firsts[jiebadict.WHOLE_ABOVE : 2 * jiebadict.WHOLE_ABOVE + 1])
    assert lazy.whole and lazy.freq == _whole()[0]


def test_lines_are_added_a_block_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jiebadict, "_BLOCK", 3)
    lazy = _lazy()
    lazy.load("数据B")
    whole = _whole()[0]
    assert {k: v for k, v in lazy.freq.items()} == {
        k: v for k, v in whole.items() if k[0] in "数据B"
    }


def test_a_forked_child_gets_a_lock_of_its_own() -> None:
    lazy = _lazy()
    with lazy.lock:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports by its exit status
            ok = lazy.lock.acquire(timeout=5)
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _file_with_a_word_listed_twice() -> bytes:
    filler = "".join(f"丙{i:05d} 1 n\n" for i in range(12_000))  # > 64 KiB: two blocks
    return ("甲乙 5 n\n" + filler + "甲乙 9 n\n").encode()


def test_a_child_forked_during_a_whole_read_keeps_no_stale_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review r44: during a whole read in place, a word listed twice holds its
    first frequency until its second line; a child forked by another thread
    then must not take its character for read."""
    data = _file_with_a_word_listed_twice()
    whole, total = jieba.Tokenizer.gen_pfdict(io.BytesIO(data))
    assert whole["甲乙"] == 9
    monkeypatch.setitem(jiebadict.KNOWN, hashlib.sha256(data).hexdigest(), total)
    lazy = jiebadict.PrefixDict(data, reference=jieba.Tokenizer.gen_pfdict)
    lazy.load("甲")
    assert lazy.freq["甲乙"] == 9
    calls, paused, release = 0, threading.Event(), threading.Event()
    real = jiebadict._add

    def pause_after_first_block(*args: Any) -> None:
        nonlocal calls
        real(*args)
        calls += 1
        if calls == 1:
            paused.set()
            release.wait(10)

    monkeypatch.setattr(jiebadict, "_add", pause_after_first_block)
    reader = threading.Thread(target=lazy.load_all)  # another thread of the server
    reader.start()
    try:
        assert paused.wait(10)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports by its exit status
            with lazy.lock:
                lazy.load("甲")  # what keywords._cut does before cutting
                os._exit(0 if lazy.freq.get("甲乙") == 9 else 1)
    finally:
        release.set()
        reader.join(10)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert lazy.whole and lazy.freq == whole
