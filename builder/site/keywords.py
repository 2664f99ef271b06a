"""Keywords: the words of a dream, how inflections fold together, which
language a word is, and how the pool's shared words are ranked.

Pure functions and committed word lists only (no I/O, no clock): the patterns
page (:mod:`builder.site.patterns`) decides which words may be shown (the
k-author rule); this module decides what a word is and in which order the
shown ones are listed.

Tokens: Latin words are lowercased runs of letters and digits, at least three
long, not pure numbers and not English stop words; Chinese runs are segmented
by jieba and keep words of two or more characters that are not Chinese stop
words. URLs, entities and Markdown punctuation are dropped before tokenizing,
so link targets and ``**`` never become words; nor do the markers redaction
leaves (``[email]``, ``[secret]``, …).

The stop-word lists below are the committed ones the issue asks for: English
function words, then generic verbs and filler that every pool's texts hold
(fixed, code, rate, shared, add, day, use, make, get, need, run, …); Chinese
function words (的, 了, …), then generic verbs (使用, 进行, 需要, …). A
plural or third-person ``-s`` is folded before the stop list is consulted,
so ``days`` is as much filler as ``day``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from builder.site import jiebadict
from builder.text.redact import KINDS as _REDACTED_KINDS
from builder.text.textlang import content_lang

__all__ = [
    "EN_STOPWORDS",
    "ZH_STOPWORDS",
    "Ranked",
    "fold",
    "language",
    "rank",
    "split_by_language",
    "tokens",
]

# Kept as text so the lists read as lists; split once at import.
_EN_FUNCTION_WORDS = """
    a about above across after again against all almost along already also although always am
    among an and another any anyone anything are aren around as at away back be became because
    become been before being below between both but by can cannot could couldn did didn do does
    doesn doing don done down during each either else enough even ever every few first for from
    further get gets getting got had hadn has hasn have haven having he her here hers herself
    him himself his how however i if in instead into is isn it its itself just least less let
    like made make makes many may maybe me might more most much must my myself need needs
    neither never new next no nor not nothing now of off often on once one only onto or other
    others otherwise our ours ourselves out over own per rather really same see seen shall she
    should shouldn since so some something still such than that the their theirs them themselves
    then there these they thing things this those though through thus to too two under until up
    upon us use used uses using very via was wasn way we well were weren what whatever when
    where whether which while who whom whose why will with within without won would wouldn yes
    yet you your yours yourself
"""
# Generic verbs and filler: words any pool's texts hold, naming no topic.
_EN_FILLER = """
    add added adding able actual actually already another around ask asked bad big bit call
    called came change changed check checked code come comes day does done each easy ended
    explain explained few find found fine fix fixed fixes fixing give given go goes going gone
    good great help helped hour keep kept know known last later look looked lot made main make
    making mean means minute month need needed note number old part put rate real right run
    running said say says second seem seemed set shared show showed small start started step
    sure take taken tell three time told took tried try trying turn turned want wanted week
    went whole work worked works year answer answered answering answers comment commented
    comments fail failed failing fails write writes writing written wrote
"""
_ZH_FUNCTION_WORDS = """
    的 了 和 是 在 我 也 就 都 而 及 与 或 一个 没有 我们 这个 可以 因为 所以 但是 如果 然后
    还是 不是 就是 这样 那样 那个 这些 那些 他们 你们 它们 自己 什么 怎么 为了 已经 而且 或者
    以及 之后 之前 时候 通过 对于 关于 一些 一样 不要 只有 不会 不能 可能 应该 还有
    其他 其中 一次 一下 这种 那种 每个 所有 只是 只用 无法 比如 例如 其实 这里 那里 现在 后来
    直接 全部 改为 改成 本身 必须 不同 每条 一直 同时 结果 出现 发现 之间 这次 那次 不再
"""
# Generic verbs and filler nouns: 使用 (use), 进行 (carry out), 需要 (need), …
_ZH_FILLER = """
    使用 进行 需要 确认 执行 问题 记录 处理 代码 东西 情况 时间 开始 完成 知道 觉得 告诉 看到
    说明 解释 增加 添加 修改 修复 一天 今天 昨天 明天 每天 一周 小时 分钟 几个 两个 三个
    注意 方法 方式 部分 地方 之类 左右 以后 以前 一点 有点 非常 比较 特别 总是 容易
"""
EN_STOPWORDS = frozenset(_EN_FUNCTION_WORDS.split()) | frozenset(_EN_FILLER.split())
ZH_STOPWORDS = frozenset(_ZH_FUNCTION_WORDS.split()) | frozenset(_ZH_FILLER.split())

# Han ideographs: CJK Unified (and Extension A) and the compatibility block.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Latin letters and digits after lowercasing; × (U+00D7) and ÷ (U+00F7) are not letters.
_LATIN = "a-z0-9\u00df-\u00f6\u00f8-\u00ff\u0100-\u024f"
_HAN_CHAR = re.compile(f"[{_HAN}]")
_TOKEN_RE = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<word>[{_LATIN}]+(?:['’][{_LATIN}]+)?)")
# Link targets, autolinks, bare URLs, addresses and entities carry no topic of the dream.
_NOISE_RE = re.compile(
    r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)"  # the target of a Markdown link: ](https://…)
    r"|(?:https?|mailto|ftp):\S+"  # autolinks and bare URLs
    r"|www\.\S+"
    # E-mail addresses, from the start of a run only: a match can start nowhere
    # else, and without the look-behind a run of "@." backtracked in cubic time.
    r"|(?<!\S)\S+@\S+\.[a-z]+"
    r"|&(?:#\d+|#x[0-9a-f]+|[a-z]+);"  # HTML entities
    # What redaction left in place of a value ([email], [secret], …): a marker, no topic.
    rf"|\[(?:{'|'.join(_REDACTED_KINDS)})\]",
    re.IGNORECASE,
)


@functools.cache
def _segmenter() -> tuple[Any, jiebadict.PrefixDict]:
    """A private jieba tokenizer, built on first use, so other code's
    ``jieba.add_word`` cannot change ours, and its prefix dictionary, read a
    first character at a time (:mod:`builder.site.jiebadict`): a text is cut
    only after the dictionary holds its characters (:func:`_cut`).

    The dictionary is read here from jieba's own file, never through
    ``Tokenizer.initialize``: that loads ``jieba.cache`` from the temporary
    folder whenever the file is there, whoever wrote it (``marshal``), so in
    the shared ``/tmp`` another user's file would decide every Chinese keyword
    (THREATS.md T115), and after building the dictionary it writes that cache
    again, which no build reads."""
    import jieba  # type: ignore[import-untyped]

    jieba.setLogLevel(60)
    seg = jieba.Tokenizer()
    with seg.get_dict_file() as f:
        words = jiebadict.PrefixDict(f.read(), reference=jieba.Tokenizer.gen_pfdict)
    seg.FREQ, seg.total = words.freq, words.total
    seg.initialized = True
    return seg, words


def _cut(han: str) -> list[str]:
    """jieba's words of ``han``, its characters' dictionary entries read first
    (under the dictionary's lock, so no other thread's read is half done)."""
    seg, words = _segmenter()
    with words.lock:
        words.load(han)
        return list(seg.cut(han))


def prepare(texts: Iterable[str]) -> None:
    """Read the dictionary entries of every Han character of ``texts`` at once,
    before their :func:`tokens` are asked for one text at a time: one scan of
    the dictionary instead of one per text (:mod:`builder.site.jiebadict`)."""
    chars: set[str] = set()
    for text in texts:
        chars.update(text)
    han = _HAN_CHAR.findall("".join(chars))
    if han:  # (text without Chinese needs no dictionary, nor jieba)
        _segmenter()[1].load(han)


def prepare_all() -> None:
    """Read the whole dictionary (before forking workers that all cut text)."""
    _segmenter()[1].load_all()


# Words whose final s is not an inflection (a conservative list: a plural
# folded wrongly only splits a word in two, one folded that should not be
# merges two words).
_S_KEEP = re.compile(r".*(?:ss|us|is|as|ics)$")


def fold(word: str) -> str:
    """The folding key of a lowercased word: English plurals and third-person
    ``-s`` dropped (``workers`` → ``worker``, ``queries`` → ``query``,
    ``fixes`` → ``fix``), anything else, and every Chinese word, as it is.

    Conservative on purpose: words of three letters or fewer and the
    endings ``-ss``, ``-us``, ``-is``, ``-as``, ``-ics`` keep their ``s``
    (``bus``, ``class``, ``status``, ``analysis``, ``alias``, ``metrics``)."""
    if not word.isascii() or not word.endswith("s") or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "shes", "zes")):
        return word[:-2]
    if word.endswith("ches"):  # branches → branch, but caches → cache
        return word[:-1] if word[-5] in "aeiou" else word[:-2]
    if _S_KEEP.fullmatch(word):
        return word
    return word[:-1]


def _latin_keyword(word: str) -> str | None:
    word = word.replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    if "'" in word:  # contractions (don't, it'll) are function words
        return None
    if len(word) < 3 or word.isdigit() or word in EN_STOPWORDS or fold(word) in EN_STOPWORDS:
        return None
    return word


def tokens(text: str) -> set[str]:
    """The keywords of a text: lowercased Latin words and jieba-segmented
    Chinese words, without stop words, numbers and Markdown or URL debris.
    Surface forms are kept (``workers`` stays ``workers``); :func:`fold`
    gives the key two forms are counted under."""
    found: set[str] = set()
    for match in _TOKEN_RE.finditer(_NOISE_RE.sub(" ", text).lower()):
        if han := match.group("han"):
            if len(han) < 2:
                continue
            for piece in _cut(han):
                if len(piece) >= 2 and piece not in ZH_STOPWORDS:
                    found.add(piece)
        elif (word := _latin_keyword(match.group("word"))) is not None:
            found.add(word)
    return found


def language(word: str) -> str:
    """``"zh"`` for a word in Han characters (:func:`builder.text.textlang.content_lang`
    says so by its script), else ``"en"``: keywords are only Han or Latin words."""
    return "zh" if content_lang(word) == "zh" else "en"


@dataclass(frozen=True, slots=True)
class Ranked:
    key: str  # the folded word
    surface: str  # its most common surface form
    forms: tuple[str, ...]  # every surface form seen, most common first
    score: float


def rank(
    hits: Mapping[str, Mapping[int, int]],
    surfaces: Mapping[str, Mapping[str, int]],
    documents: int,
) -> list[Ranked]:
    """Rank folded words by TF-IDF over the counted dreams.

    ``hits[key][n]`` is how many counted dreams hold ``key`` in ``n`` of
    their entries (``n`` = 0 when only the title or summary does);
    ``surfaces[key]`` counts the dreams using each surface form;
    ``documents`` is how many dreams were counted (>= any key's dreams).

    A word scores ``tf * idf``: ``tf`` sums ``1 + ln(max(n, 1))`` over the
    dreams holding it, and ``idf = ln((1 + documents) / (1 + df)) + 1`` is
    the smoothed inverse document frequency (df = dreams holding it): a
    word many dreams hold ranks high, one repeated through a dream's
    entries a little higher, and one that nearly every dream holds
    (a pool's filler the stop lists missed) is held back. Ties go to the
    word more dreams hold, then to the word's alphabetical order, so the
    ranking is a pure function of its input. The surface shown is the form
    most dreams use (ties: the shorter, then alphabetical)."""
    out = []
    df_of = {key: sum(by_n.values()) for key, by_n in hits.items()}
    for key, by_n in hits.items():
        df = df_of[key]
        if df < 1 or df > documents or any(n < 0 or c < 0 for n, c in by_n.items()):
            raise ValueError(f"hits[{key!r}] must count 1 to {documents} dreams, is {dict(by_n)}")
        idf = math.log((1 + documents) / (1 + df)) + 1
        tf = math.fsum(c * (1 + math.log(max(n, 1))) for n, c in sorted(by_n.items()))
        forms = sorted(
            (surfaces.get(key) or {key: df}).items(), key=lambda f: (-f[1], len(f[0]), f[0])
        )
        out.append(Ranked(key, forms[0][0], tuple(f for f, _ in forms), round(tf * idf, 9)))
    out.sort(key=lambda r: (-r.score, -df_of[r.key], r.surface))
    return out


def split_by_language(words: Iterable[str]) -> dict[str, list[str]]:
    """The words by :func:`language`, each list in the given order."""
    out: dict[str, list[str]] = {"en": [], "zh": []}
    for w in words:
        out[language(w)].append(w)
    return out
