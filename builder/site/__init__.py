"""The static site.

``model`` is everything the pages show, as plain values; ``render`` the HTML
pages, search and static assets, and the one entry point every template goes
through (``render_template``; the templates compiled ahead of time into
``templates_compiled``, by scripts/compile_templates.py); ``feeds`` what the
Atom feeds, sitemaps and robots.txt templates show, and the JSON API;
``charts`` the SVG charts, ``timeline`` the pool by month;
``patterns`` the k-anonymous patterns; ``units`` a
dream's own files, kept while their inputs stand still; ``page`` a file to make
and its key; ``assemble`` writes every renderer's files into the new generation,
through ``writer`` (two generations behind a symlink); ``derived`` decides when
the build's own state may be read back; ``favicon`` the icon; ``serve`` the
preview; ``hosting`` whether the site still fits GitHub Pages.
"""
