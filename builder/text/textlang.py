"""The language of an author's text, where its script says it: CJK only.

A dream page's interface is English (``<html lang="en">``), but a dream may
be written in Chinese, Japanese or Korean; screen readers, hyphenation, line
breaking and font selection follow ``lang``, so each piece of the author's
text (title, summary, entry, source) says its own. Only scripts are detected,
never languages that share one: Han characters alone are ``zh``, with kana
``ja``, with Hangul ``ko``; Latin-script text says nothing and inherits the
page's language.

A piece is CJK when its CJK characters count for at least half as much as its
ASCII letters (one Han character carries about a word): "用 pytest 跑测试" is
``zh``, an English sentence quoting "联系我" is not.
"""

from __future__ import annotations

import re

__all__ = ["content_lang"]

_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_LATIN = re.compile("[A-Za-z]")


def content_lang(text: str) -> str | None:
    """``"zh"``, ``"ja"`` or ``"ko"`` for text written mostly in that script, else None."""
    if text.isascii():
        return None
    han = len(_HAN.findall(text))
    kana = len(_KANA.findall(text))
    hangul = len(_HANGUL.findall(text))
    cjk = han + kana + hangul
    if not cjk or cjk * 2 < len(_LATIN.findall(text)):
        return None
    if hangul > han + kana:
        return "ko"
    return "ja" if kana else "zh"
