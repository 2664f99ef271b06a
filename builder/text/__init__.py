"""Text as a reader sees it, and the rules it must follow.

``mdrender`` is the site's one Markdown renderer and its plain text;
``readerview`` the views of a dream that redaction judges; ``redact`` the
redaction rules; ``textlang`` the language a text is written in, where its
script says it.
"""
