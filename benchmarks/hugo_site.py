"""A Hugo site with the same pages as a generated dream pool (the baseline).

For each dream of a pool made by ``genpool.py`` this writes one Markdown page
with the same title, summary, entries, tags and author, and a minimal theme
(single page, list pages, taxonomies for tags and authors, RSS): the work
Hugo does per page is comparable to ours, minus everything only dreampool does
(canonical JSON, signatures, redaction checks, the Merkle log, proofs).

    python benchmarks/hugo_site.py POOL_CONTENT OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

LAYOUTS = {
    "_default/baseof.html": """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{{ .Title }}</title><link rel="stylesheet" href="{{ "style.css" | relURL }}"></head>
<body><header><a href="{{ "/" | relURL }}">{{ site.Title }}</a></header>
<main>{{ block "main" . }}{{ end }}</main></body></html>
""",
    "_default/single.html": """{{ define "main" }}<article><h1>{{ .Title }}</h1>
<p>by {{ range .Params.authors }}
<a href="{{ (print "/authors/" (urlize .)) | relURL }}">{{ . }}</a>{{ end }}
· {{ .Date.Format "2006-01-02" }}</p>
<p>{{ range .Params.tags }}
<a href="{{ (print "/tags/" (urlize .)) | relURL }}">#{{ . }}</a> {{ end }}</p>
{{ .Content }}
<section>{{ range .Params.entries }}<div class="entry {{ .type }}"><b>{{ .type }}</b> {{ .text }}
<i>{{ .confidence }}</i></div>{{ end }}</section></article>{{ end }}
""",
    "_default/list.html": """{{ define "main" }}<h1>{{ .Title }}</h1><ol>
{{ range .Pages }}<li><a href="{{ .RelPermalink }}">{{ .Title }}</a> {{ .Summary }}</li>{{ end }}
</ol>{{ end }}
""",
    "_default/terms.html": """{{ define "main" }}<h1>{{ .Title }}</h1><ul>
{{ range .Data.Terms.ByCount }}<li><a href="{{ .Page.RelPermalink }}">{{ .Page.Title }}</a>
{{ .Count }}</li>{{ end }}</ul>{{ end }}
""",
    "index.html": """{{ define "main" }}<h1>{{ site.Title }}</h1><ol>
{{ range first 20 (where site.RegularPages "Section" "dreams") }}<li>
<a href="{{ .RelPermalink }}">{{ .Title }}</a></li>{{ end }}</ol>{{ end }}
""",
}

CONFIG = """baseURL = "https://example.org/"
title = "Benchmark pool"
disableKinds = []
[taxonomies]
tag = "tags"
author = "authors"
[markup.goldmark.renderer]
unsafe = false
"""


def write_site(content: Path, out: Path) -> int:
    (out / "content" / "dreams").mkdir(parents=True, exist_ok=True)
    (out / "hugo.toml").write_text(CONFIG)
    for rel, text in LAYOUTS.items():
        (out / "layouts" / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / "layouts" / rel).write_text(text)
    (out / "static").mkdir(exist_ok=True)
    (out / "static" / "style.css").write_text("body{font-family:sans-serif}")
    n = 0
    for path in sorted((content / "dreams").glob("*.json")):
        dream = json.loads(path.read_text(encoding="utf-8"))
        front = {
            "title": dream["title"],
            "date": "2026-11-01T00:00:00Z",
            "tags": dream.get("tags", []),
            "authors": [dream["author"]],
            "entries": dream["entries"],
        }
        page = json.dumps(front, ensure_ascii=False) + "\n\n" + dream.get("summary", "") + "\n"
        (out / "content" / "dreams" / f"{path.stem}.md").write_text(page, encoding="utf-8")
        n += 1
    return n


if __name__ == "__main__":
    print(write_site(Path(sys.argv[1]), Path(sys.argv[2])), "pages")
