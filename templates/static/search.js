// dreampool search: loads index.json beside the search page, then the shards it
// lists (newest first), and filters them in the browser, searching what has
// arrived while the older shards load. Matching is by substring on
// NFKC-lowercased text (query and dream folded alike), so Chinese needs no
// word segmentation. A snippet shows the dream's own text, as written, with
// the match in a <mark>. Results are built with createElement and textContent
// only: dream text never becomes HTML.
(function () {
  "use strict";

  var LIMIT = 50;
  var ID = /^[0-9a-f]{16}$/;
  var SHARD = /^shard-[0-9]+\.json$/;
  var input = document.getElementById("q");
  var status = document.getElementById("search-status");
  var list = document.getElementById("search-results");
  if (!input || !status || !list) return;
  var root = list.getAttribute("data-root") || "../";
  var dreams = [];
  var total = 0; // dreams the index lists
  var loading = true; // shards still to come
  var missing = []; // why shards failed to load: every status says so from then on

  function fold(s) {
    return String(s).normalize("NFKC").toLowerCase();
  }

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  var TIERS = ["maintainer", "member", "guest"];

  function prepare(d) {
    var tags = Array.isArray(d.tags) ? d.tags.map(String) : [];
    return {
      id: String(d.id),
      title: String(d.title),
      author: d.author == null ? null : String(d.author),
      tags: tags,
      // The tier names a style class: one the page knows, else read as a guest's.
      tier: TIERS.indexOf(d.tier) >= 0 ? d.tier : "guest",
      tierText: d.tier == null ? "guest" : String(d.tier),
      date: String(d.date),
      text: String(d.text),
      foldedTitle: fold(d.title),
      haystack: fold([d.title, d.author || "", tags.join("\n"), d.date, d.text].join("\n")),
    };
  }

  // 0: the whole query is in the title; 1: every term is; 2: elsewhere only.
  function rank(d, query, terms) {
    if (d.foldedTitle.indexOf(query) !== -1) return 0;
    for (var i = 0; i < terms.length; i++) {
      if (d.foldedTitle.indexOf(terms[i]) === -1) return 2;
    }
    return 1;
  }

  // A character with its combining marks: folded as one, as in the whole text
  // (NFKC composes "e" + U+0301 into "é").
  var CLUSTER = /\P{M}\p{M}*|\p{M}+/gu;

  // The folded text, and for each of its UTF-16 units the span [from, to) of
  // the original text it came from, so a match in the folded text marks the
  // characters the author wrote. Made for the results shown only.
  function foldedWithMap(text) {
    var folded = "";
    var from = [];
    var to = [];
    var m;
    CLUSTER.lastIndex = 0;
    while ((m = CLUSTER.exec(text)) !== null) {
      var f = fold(m[0]);
      folded += f;
      for (var i = 0; i < f.length; i++) {
        from.push(m.index);
        to.push(m.index + m[0].length);
      }
    }
    return { text: folded, from: from, to: to };
  }

  // White space, CJK and Hangul: a snippet may be cut beside one.
  var CUT = /[\s\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f]/;

  // Not in the middle of a surrogate pair.
  function boundary(text, at) {
    var c = text.charCodeAt(at);
    return at > 0 && at < text.length && c >= 0xdc00 && c <= 0xdfff ? at - 1 : at;
  }

  function snippet(d, terms) {
    var text = d.text;
    var folded = foldedWithMap(text);
    for (var i = 0; i < terms.length; i++) {
      var at = folded.text.indexOf(terms[i]);
      if (at === -1) continue;
      var markStart = folded.from[at];
      var markEnd = folded.to[at + terms[i].length - 1];
      var start = boundary(text, Math.max(0, markStart - 50));
      var end = boundary(text, Math.min(text.length, markEnd + 80));
      // Cut only between tokens (at white space, or beside a character of a
      // script written without spaces), never inside one: "1381234567890" cut
      // to "13812345678" would show a phone number the text does not hold.
      while (start > 0 && !CUT.test(text.charAt(start - 1)) && !CUT.test(text.charAt(start))) start--;
      while (end < text.length && !CUT.test(text.charAt(end - 1)) && !CUT.test(text.charAt(end))) end++;
      var p = el("p", "snippet");
      p.dir = "auto";
      p.appendChild(document.createTextNode((start > 0 ? "…" : "") + text.slice(start, markStart)));
      p.appendChild(el("mark", "", text.slice(markStart, markEnd)));
      p.appendChild(document.createTextNode(text.slice(markEnd, end) + (end < text.length ? "…" : "")));
      return p;
    }
    return null;
  }

  function result(d, terms) {
    var li = el("li", d.tier === "guest" ? "card card-guest" : "card");
    var h = el("h2", "card-title");
    var a = el("a", "", d.title);
    a.href = root + "dreams/" + d.id + "/";
    a.dir = "auto";
    h.appendChild(a);
    li.appendChild(h);
    var meta = el("p", "meta");
    var who = el("span", d.author ? "author" : "author anon", d.author || "anonymous");
    who.dir = "auto";
    meta.appendChild(who);
    meta.appendChild(document.createTextNode(" "));
    var tier = el("span", "tier tier-" + d.tier, d.tierText);
    tier.title = "key trust tier";
    meta.appendChild(tier);
    meta.appendChild(document.createTextNode(" "));
    var time = el("time", "", d.date);
    time.setAttribute("datetime", d.date);
    meta.appendChild(time);
    li.appendChild(meta);
    var snip = snippet(d, terms);
    if (snip) li.appendChild(snip);
    if (d.tags.length) {
      var ul = el("ul", "taglist");
      d.tags.forEach(function (t) {
        var tag = el("li", "");
        var span = el("span", "tag", t);
        span.dir = "auto";
        tag.appendChild(span);
        ul.appendChild(tag);
      });
      li.appendChild(ul);
    }
    return li;
  }

  // While shards load, the status says how much has been searched.
  function progress() {
    return loading ? " (searched " + dreams.length + " of " + total + " dreams; loading…)" : "";
  }

  // Once a shard failed, every status says what the results leave out.
  function gaps() {
    if (!missing.length) return "";
    return " Part of the search index could not be loaded (" + missing.join("; ") + ")" +
      (loading ? "." : ": searched " + dreams.length + " of " + total + " dreams.");
  }

  function run() {
    var query = fold(input.value).trim();
    list.replaceChildren();
    if (!loading && !dreams.length && missing.length) {
      status.textContent = "The search index could not be loaded (" + missing.join("; ") + ").";
      return;
    }
    if (!query) {
      status.textContent = (loading
        ? dreams.length + " of " + total + " dreams indexed, loading the rest. Type to search."
        : dreams.length + " dreams indexed. Type to search.") + gaps();
      return;
    }
    var terms = query.split(/\s+/).filter(Boolean);
    var hits = [];
    dreams.forEach(function (d, order) {
      for (var i = 0; i < terms.length; i++) {
        if (d.haystack.indexOf(terms[i]) === -1) return;
      }
      hits.push({ d: d, rank: rank(d, query, terms), order: order });
    });
    // Stable: title hits first, then the index's order (newest first).
    hits.sort(function (x, y) {
      return x.rank - y.rank || x.order - y.order;
    });
    hits.slice(0, LIMIT).forEach(function (h) {
      list.appendChild(result(h.d, terms));
    });
    var n = hits.length;
    status.textContent =
      (n === 0 ? "No dream matches." :
      n > LIMIT ? "Showing the first " + LIMIT + " of " + n + " matching dreams." :
      n + (n === 1 ? " matching dream." : " matching dreams.")) + progress() + gaps();
  }

  function remember() {
    var q = input.value;
    var url = q ? "?q=" + encodeURIComponent(q) : location.pathname;
    try {
      history.replaceState(null, "", url);
    } catch (e) {
      // file:// pages may refuse; the search still works.
    }
  }

  function getJSON(url) {
    return fetch(url.href, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status + " for " + url.pathname);
      return r.json();
    });
  }

  function ready() {
    input.disabled = false;
    var q = new URLSearchParams(location.search).get("q");
    if (q) input.value = q;
    input.addEventListener("input", function () {
      run();
      remember();
    });
  }

  // One shard at a time, in the index's order (newest first), so the dreams
  // stay newest first; the search reruns as each arrives. A shard that fails
  // is noted and skipped: the older ones still load.
  function load(shards, at) {
    if (at >= shards.length) {
      loading = false;
      if (input.disabled && dreams.length) ready();
      run();
      return;
    }
    getJSON(new URL(shards[at], source))
      .then(
        function (shard) {
          var rows = shard && Array.isArray(shard.dreams) ? shard.dreams : [];
          rows.forEach(function (d) {
            if (d && ID.test(String(d.id))) dreams.push(prepare(d));
          });
          if (input.disabled) ready();
        },
        function (err) {
          missing.push(err.message);
        }
      )
      .then(function () {
        run();
        load(shards, at + 1);
      })
      .catch(fail);
  }

  function fail(err) {
    loading = false;
    status.textContent = "The search index could not be loaded (" + err.message + ").";
  }

  var source = new URL(list.getAttribute("data-index") || "index.json", location.href);
  getJSON(source)
    .then(function (index) {
      var listed = index && Array.isArray(index.shards) ? index.shards : [];
      var shards = [];
      listed.forEach(function (s) {
        if (s && SHARD.test(String(s.path))) {
          shards.push(String(s.path));
          total += Number(s.dreams) || 0;
        }
      });
      load(shards, 0);
    })
    .catch(fail);
})();
