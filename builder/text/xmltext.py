"""Text as XML 1.0 character data: the ``xml`` filter of the site's XML templates.

The feeds and sitemaps (``templates/*.xml``, :mod:`builder.site.feeds`) put
every value through :func:`xml`, one function for text and attributes:

* characters outside the XML 1.0 ``Char`` production (§2.2: C0 controls but
  tab, newline and carriage return; lone surrogates; U+FFFE, U+FFFF) cannot
  appear even as character references, so each becomes U+FFFD. Dreams refuse
  control characters (the Unicode policy, docs/protocol.md §1.1), but a feed
  must stay well-formed whatever a title holds;
* ``&``, ``<`` and ``>`` become ``&amp;``, ``&lt;``, ``&gt;`` (``>`` too, so
  ``]]>`` cannot appear in text: §2.4);
* ``\\r`` becomes ``&#13;``, which a parser keeps, where a literal one would
  be read as ``\\n`` (§2.11, end-of-line handling);
* in an attribute value (``attribute=True``) also ``"`` (the templates quote
  with it) and tab and newline, which a parser would turn into spaces
  (§3.3.3, attribute-value normalization).

The result is :class:`~markupsafe.Markup`, so autoescape (on for ``.xml``
templates: :func:`builder.site.render.autoescape`) leaves it as it is; a value
a template forgets to filter is still escaped by autoescape, but not made
``Char``-safe (tests/test_feeds.py parses every feed of a hostile corpus).
"""

from __future__ import annotations

import re

from markupsafe import Markup

# XML 1.0 §2.2 Char: anything else cannot appear even as a character reference.
_NOT_XML_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(value: str) -> str:
    """``value`` with every character XML 1.0 forbids replaced by U+FFFD."""
    return _NOT_XML_CHAR.sub("\ufffd", value)


def xml(value: object, attribute: bool = False) -> Markup:
    """``str(value)`` as XML character data: of an element (default) or of an
    attribute value in double quotes (``attribute=True``)."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if attribute:
        text = text.replace('"', "&quot;")
    # A printable string (str.isprintable) holds no C0 control, surrogate,
    # U+FFFE or U+FFFF (not printable: Cc, Cs, Cn), nor "\r", "\n" or "\t":
    # most text skips the rest (a feed of 10,000 dreams makes 150,000 values).
    if not text.isprintable():
        text = xml_safe(text).replace("\r", "&#13;")
        if attribute:
            text = text.replace("\n", "&#10;").replace("\t", "&#9;")
    return Markup(text)
