// dreampool display.js: does the page show the dream that verified, and only it?
//
// "Verified" is about the text the reader sees. The template marks what it shows of
// the dream (templates/dream.html):
//
//   data-field="<name>"   a field of the signed dream (id, title, author, key, tag,
//                         summary, entry-heading, entry-text, entry-confidence,
//                         entry-source, generation, parent); compared with the record
//   data-pool="<kind>"    the pool's own statement about the dream, which the log
//                         does not sign (tier, admitted, guest, child, patterns); held
//                         to the shape of its kind and named as not covered
//   data-entry-type, data-entry   the sections and items of the entry list
//
// The rule (docs/verifiers.md, "What Verified covers"): every field the page shows
// equals the verified record, compared as text a reader sees (textContent with runs of
// ASCII white space as one space, trimmed) and, for links, the href; the summary is
// rendered from the record by markdown.js and compared the same way, links included.
// Every other visible text in <main> but the panel is a label of the template. No
// field is hidden (hidden, display, visibility, opacity, zero size, off the page), no
// style element or attribute, and no script or stylesheet but the site's own.
// compareDisplay returns every difference as {field, why}; none means the page shows
// exactly the verified dream.

import { renderSummary } from "./markdown.js";

const ENTRY_ORDER = ["fact", "decision", "preference", "lesson", "rule", "warning", "theory", "plan"];
const ENTRY_HEADINGS = {
  fact: "Facts",
  decision: "Decisions",
  preference: "Preferences",
  lesson: "Lessons",
  rule: "Rules",
  warning: "Warnings",
  theory: "Theories",
  plan: "Plans",
};
// The template's own words (templates/dream.html), as they read once normalised.
const LABELS = new Set([
  "Dream",
  "by",
  "· admitted",
  "source:",
  "Author",
  "Key",
  "Trust tier",
  "Admitted",
  "Lineage",
  "Patterns",
  "·",
  "diary",
  "none declared",
  "all chains",
  "The author asked not to be named here.",
  "Signed by keys the pool's maintainers have not vouched for. Naming this dream as their parent does not make them its author's work.",
]);
// What each kind of pool statement may say; anything else is text outside the dream.
const POOL_SHAPES = {
  tier: /^[a-z]{1,16}$/,
  admitted: /^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2} UTC)?$/,
  guest: /^Third-party content \(guest key\)\. This dream was signed by a key that the pool's maintainers have not vouched for\. Read it as a quoted claim, not as advice or instructions\.$/,
  child: /^(child|reply): .+$/,
  replies: /^\d+ guest repl(y|ies)$/,
  patterns: /^(counts toward aggregate patterns|excluded from patterns \(no consent to derivatives\)|not counted in aggregate patterns: they count dreams by members and maintainers only)$/,
};
export const NOT_COVERED = {
  tier: "trust tier",
  admitted: "admitted date",
  guest: "guest-key notice",
  child: "child dreams",
  replies: "child dreams",
  patterns: "patterns note",
};
const WEB_URL = /^https?:\/\/[^\s<>"'`]{1,290}$/;

/** Text as a reader reads it: runs of ASCII white space as one space, trimmed. */
export function normalise(text) {
  return text.replace(/[ \t\n\r\f]+/g, " ").trim();
}

/** A subtree's meaning: its text, and each link's target where the link starts. */
function meaning(node) {
  const parts = [];
  const walk = (n) => {
    if (n.nodeType === Node.TEXT_NODE) {
      parts.push(n.data);
      return;
    }
    if (n.nodeType !== Node.ELEMENT_NODE) return;
    const link = n.localName === "a";
    if (link) parts.push(` \u27e8${n.getAttribute("href") ?? ""}\u27e9 `);
    for (const c of n.childNodes) walk(c);
    if (link) parts.push(" \u27e8/\u27e9 ");
  };
  walk(node);
  return normalise(parts.join(""));
}

function text(el) {
  return normalise(el.textContent);
}

/** Whether a reader can see el: not hidden by attribute, CSS, size or position. */
function shown(el) {
  if (el.closest("[hidden], [aria-hidden='true']")) return false;
  if (
    typeof el.checkVisibility === "function" &&
    !el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true, contentVisibilityAuto: true })
  ) {
    return false;
  }
  const style = getComputedStyle(el);
  if (parseFloat(style.fontSize) < 6) return false;
  const color = /rgba?\(([^)]*)\)/.exec(style.color);
  if (color) {
    const parts = color[1].split(/[,\s/]+/).filter(Boolean);
    if (parts.length === 4 && parseFloat(parts[3]) === 0) return false;
  }
  const rect = el.getBoundingClientRect();
  if (rect.width < 1 || rect.height < 1) return false;
  return rect.right + window.scrollX > 0 && rect.bottom + window.scrollY > 0;
}

/**
 * Compare what main shows (but the panel) with the verified dream (the record's
 * "dream" object). Resolves to { differs: [{field, why}], notCovered: [names] }.
 */
export async function compareDisplay(main, panel, dream) {
  const differs = [];
  const add = (field, why) => differs.push({ field, why });
  const inMain = (el) => !panel.contains(el);
  const all = (selector) => [...main.querySelectorAll(selector)].filter(inMain);
  const fields = (name) => all(`[data-field="${name}"]`);

  checkPage(main, add);

  const one = (name, want, label = name) => {
    const found = fields(name);
    if (want === null) {
      if (found.length) add(label, `the page shows a ${label} the dream does not have`);
      return;
    }
    if (!found.length) add(label, `the page does not show the dream's ${label}`);
    for (const el of found) {
      if (text(el) !== want) add(label, `the page shows another ${label} than the logged dream`);
    }
  };
  const anonymous = dream.consent && dream.consent.anonymize === true;
  one("title", dream.title);
  if (fields("title").length > 1) add("title", "the page shows more than one title");
  if (!document.title.startsWith(`${dream.title} · `)) {
    add("title", "the window title is not the logged dream's title");
  }
  one("author", anonymous ? "anonymous author" : dream.author);
  one("key", anonymous ? null : dream.sig.keyId);

  const tags = fields("tag").map(text);
  const wantTags = dream.tags || [];
  if (tags.length !== wantTags.length || tags.some((t, i) => t !== wantTags[i])) {
    add("tag", "the page shows other tags than the logged dream");
  }

  await compareSummary(fields("summary"), dream.summary || "", add);
  compareEntries(all, dream.entries, add);

  const lineage = dream.lineage || {};
  one("generation", "generation" in lineage ? `gen ${lineage.generation}` : null);
  const parents = fields("parent");
  if (!("parent" in lineage)) {
    if (parents.length) add("parent", "the page shows a parent the dream does not name");
  } else if (parents.length !== 1 || !namesDream(parents[0], lineage.parent)) {
    add("parent", "the page does not show the parent the dream names");
  }

  const notCovered = coverText(main, panel, add);
  return { differs, notCovered };
}

async function compareSummary(found, summary, add) {
  if (!summary) {
    if (found.length) add("summary", "the page shows a summary the dream does not have");
    return;
  }
  if (found.length !== 1) {
    add("summary", found.length ? "the page shows more than one summary" : "the page does not show the dream's summary");
    return;
  }
  const want = meaning(await renderSummary(summary));
  if (meaning(found[0]) !== want) add("summary", "the page shows another summary than the logged dream");
}

function compareEntries(all, entries, add) {
  const groups = ENTRY_ORDER.map((type) => [type, entries.filter((e) => e.type === type)]).filter(
    ([, list]) => list.length,
  );
  const sections = all("[data-entry-type]");
  const items = all("[data-entry]");
  const entryFields = all('[data-field^="entry-"]');
  if (items.some((li) => !li.parentElement.closest("[data-entry-type]"))) {
    add("entry", "the page shows an entry outside the entry lists");
  }
  if (entryFields.some((f) => f.dataset.field !== "entry-heading" && !f.closest("[data-entry]"))) {
    add("entry", "the page shows entry text outside an entry");
  }
  if (sections.length !== groups.length) {
    add("entry", `the page shows ${sections.length} kinds of entries, the dream has ${groups.length}`);
    return;
  }
  sections.forEach((section, g) => {
    const [type, list] = groups[g];
    const heading = [...section.querySelectorAll('[data-field="entry-heading"]')];
    const want = `${type} ${ENTRY_HEADINGS[type]} ${list.length}`;
    if (heading.length !== 1 || text(heading[0]) !== want) {
      add("entry", `the heading of the ${type} entries is not what the dream says`);
    }
    const shownItems = [...section.querySelectorAll("[data-entry]")];
    if (shownItems.length !== list.length) {
      add("entry", `the page shows ${shownItems.length} ${type} entries, the dream has ${list.length}`);
      return;
    }
    shownItems.forEach((li, i) => compareEntry(li, list[i], `${type} entry ${i + 1}`, add));
  });
}

function compareEntry(li, entry, where, add) {
  const pick = (name) => [...li.querySelectorAll(`[data-field="${name}"]`)];
  const texts = pick("entry-text");
  if (texts.length !== 1 || text(texts[0]) !== normalise(entry.text)) {
    add("entry", `${where}: the page shows another text than the logged dream`);
  }
  const conf = pick("entry-confidence");
  if (conf.length !== 1 || text(conf[0]) !== entry.confidence) {
    add("entry", `${where}: the page shows another confidence than the logged dream`);
  }
  const source = pick("entry-source");
  if (!("source" in entry) || entry.source === "") {
    if (source.length) add("entry", `${where}: the page shows a source the dream does not have`);
    return;
  }
  if (source.length !== 1 || text(source[0]) !== entry.source) {
    add("entry", `${where}: the page shows another source than the logged dream`);
    return;
  }
  const links = [...source[0].querySelectorAll("a"), ...(source[0].localName === "a" ? [source[0]] : [])];
  for (const a of links) {
    if (!WEB_URL.test(entry.source) || a.getAttribute("href") !== entry.source) {
      add("entry", `${where}: the source links somewhere else than the logged source`);
    }
  }
}

/** Whether a parent reference names dream id: a link to dreams/<id>/ or its id as code. */
function namesDream(el, id) {
  const refs = [...el.querySelectorAll("a[href]")].map((a) => {
    const m = /\/dreams\/([^/]+)\/(?:index\.html)?$/.exec(new URL(a.href).pathname);
    return m ? decodeURIComponent(m[1]) : null;
  });
  const codes = [...el.querySelectorAll("code")].map(text);
  return refs.every((r) => r === id) && (refs.includes(id) || codes.includes(normalise(id)));
}

/** Every visible text of main is a field, a pool statement of its shape, or a label. */
function coverText(main, panel, add) {
  const notCovered = new Set();
  for (const el of [...main.querySelectorAll("[data-pool]")].filter((e) => !panel.contains(e))) {
    const kind = el.dataset.pool;
    const shape = POOL_SHAPES[kind];
    if (!shape || !shape.test(text(el)) || el.querySelector("[data-field], [data-pool]")) {
      add("text outside", `the page shows text the dream does not hold: ${short(text(el))}`);
    } else {
      notCovered.add(NOT_COVERED[kind]);
    }
  }
  for (const el of [...main.querySelectorAll("[data-field]")].filter((e) => !panel.contains(e))) {
    if (!shown(el)) add("hidden", `the page hides the dream's ${el.dataset.field}`);
  }
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const value = normalise(node.data);
    const parent = node.parentElement;
    if (!value || !parent || panel.contains(parent)) continue;
    if (["script", "style", "template", "noscript"].includes(parent.localName)) continue;
    if (parent.closest("[data-field], [data-pool]")) continue;
    if (LABELS.has(value)) continue;
    if (!shown(parent)) continue; // unseen text says nothing to the reader
    add("text outside", `the page shows text the dream does not hold: ${short(value)}`);
  }
  return [...notCovered];
}

function short(value) {
  return value.length > 60 ? `«${value.slice(0, 59)}…»` : `«${value}»`;
}

/** The page itself: the site's CSP, its own scripts and stylesheet, no inline style. */
function checkPage(main, add) {
  const csp = [...document.querySelectorAll('meta[http-equiv="Content-Security-Policy" i]')];
  const policy = csp.map((m) => m.getAttribute("content") || "").join(";");
  if (!csp.length || /unsafe-inline|unsafe-eval/.test(policy) || !/script-src 'self'/.test(policy)) {
    add("page", "the page does not carry the site's Content-Security-Policy");
  }
  const here = new URL(import.meta.url);
  for (const s of document.querySelectorAll("script")) {
    if (!s.src || new URL(s.src).href !== new URL("verify.js", here).href) {
      add("page", "the page carries a script that is not the site's verifier");
    }
  }
  const sheet = new URL("style.css", here).href;
  for (const l of document.querySelectorAll('link[rel~="stylesheet" i]')) {
    if (l.href !== sheet) add("page", "the page loads a stylesheet that is not the site's");
  }
  if (document.querySelector("style") || main.querySelector("[style]")) {
    add("page", "the page restyles its own text");
  }
}
