"""The static site.

``model`` is everything the pages show, as plain values; ``render`` the HTML
pages, search and static assets (its templates compiled ahead of time into
``templates_compiled``, by scripts/compile_templates.py); ``feeds`` Atom,
sitemaps and the JSON API; ``patterns`` the k-anonymous patterns; ``units`` a
dream's own files, kept while their inputs stand still; ``page`` a file to make
and its key; ``assemble`` writes every renderer's files into the new generation,
through ``writer`` (two generations behind a symlink); ``derived`` decides when
the build's own state may be read back; ``favicon`` the icon; ``serve`` the
preview; ``hosting`` whether the site still fits GitHub Pages.
"""
