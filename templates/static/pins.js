// dreampool pins.js: what this browser remembers about a pool, keyed by the pool.
//
// localStorage belongs to a web origin, and one web origin can serve many pools
// (https://alice.github.io/a/ and /b/). So every entry is keyed by the pool itself:
//
//   "dreampool/v2 <kind> <web origin><path of the pool root> <log origin>"
//
// kind is "pin" (the policy pinned on first use or pasted by the reader) or "seen"
// (the last checkpoint this browser verified for the log). The three parts are
// separated by single spaces, which neither a URL path (percent-encoded) nor a log
// origin (a note key name, docs/protocol.md §4.1) can hold, so no two pools share a
// key. Pools on one host never see each other's pins.
//
// The earlier layout kept one entry per log origin for the whole web origin
// ("dreampool/v1/pin/<log origin>"). Such an entry is adopted, read only, by a pool of
// that log origin that has no entry of its own yet (it copies it under its own key),
// so an upgrade is no fresh first use; it never counts as a pin of another pool.
//
// Any script of the web origin can read, write or clear all of this: a pin guards
// against a site that changes its key, not against the site's own scripts. See
// docs/verifiers.md, "What the browser remembers".

const PREFIX = "dreampool/v2 ";
const LEGACY = "dreampool/v1/";

function storage() {
  try {
    const s = window.localStorage;
    s.getItem(PREFIX + "probe");
    return s;
  } catch {
    return null; // storage disabled: trust holds for this visit only
  }
}

/** Whether this browser keeps anything for this site. */
export function canRemember() {
  return storage() !== null;
}

/** The pool part of a key: web origin and root path, e.g. "https://h.example/a/". */
export function poolOf(rootUrl) {
  const url = new URL(rootUrl);
  return url.origin + url.pathname;
}

function keyOf(kind, pool, logOrigin) {
  return `${PREFIX}${kind} ${pool} ${logOrigin}`;
}

function parse(raw) {
  try {
    const value = JSON.parse(raw || "null");
    return value && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

/** What is kept for (kind, pool, log origin), adopting an entry of the old layout. */
export function load(kind, pool, logOrigin) {
  const s = storage();
  if (!s || !logOrigin) return null;
  const own = parse(s.getItem(keyOf(kind, pool, logOrigin)));
  if (own) return own;
  const legacy = parse(s.getItem(`${LEGACY}${kind}/${logOrigin}`));
  if (legacy) save(kind, pool, logOrigin, legacy);
  return legacy;
}

export function save(kind, pool, logOrigin, value) {
  const s = storage();
  if (!s || !logOrigin) return false;
  try {
    s.setItem(keyOf(kind, pool, logOrigin), JSON.stringify(value));
    return true;
  } catch {
    return false;
  }
}

export function forget(kind, pool, logOrigin) {
  const s = storage();
  if (s) s.removeItem(keyOf(kind, pool, logOrigin));
}

/** The log origins this browser holds a pin for, for this pool (this root) only. */
export function pinnedLogs(pool) {
  const s = storage();
  if (!s) return [];
  const head = keyOf("pin", pool, "");
  const out = [];
  for (let i = 0; i < s.length; i++) {
    const key = s.key(i);
    if (key && key.startsWith(head) && key.length > head.length) out.push(key.slice(head.length));
  }
  return out.sort();
}
