// dreampool verify.js: the verification panel of a dream page and the verify/ page.
//
// The checks themselves are lightclient.js (docs/protocol.md §5 steps 1-5); this module
// fetches or reads the inputs, keeps what the browser trusts between visits, and shows
// each step. Everything shown is set with textContent: no input becomes HTML.
//
// What this browser keeps (localStorage of the site's web origin, keyed by the pool:
// web origin, pool root path and log origin; pins.js): the policy pinned on first use
// or pasted by the reader, and the last checkpoint this browser verified for the log.
//
// Pinning: the first verification takes the log key from the site's log/policy and,
// once it verifies the proof's checkpoint (step 1), pins it; later visits verify with
// the pinned policy only, and a pool whose key changed fails step 1 loudly. A pool
// that starts serving a log of another origin, with a pin for the first one kept
// here, is refused the same way: a new origin is no way around a pinned key.
//
// History (history.js): each verification of a dream page checks the current
// log/checkpoint against the remembered one; only a proof makes a verdict.
//
// What the page shows (display.js): "Verified" only when every field of the dream the
// page shows equals the verified record, and nothing else of <main> claims to be it.
//
// Where the pool is comes from this script's own address (<root>/static/verify.js) and
// which dream from the page's address (<root>/dreams/<id>/), never from markup alone.
// Every fetch has a deadline and a size cap (fetchcap.js).
//
// Programs read the outcome from the panel: data-verify-status ("running", "ok",
// "failed", "differs", "incomplete", "unavailable"), data-verify-step (the failed
// step), data-differs (the fields that differ), data-pin ("first-use", "pinned",
// "changed") and data-history ("first-visit", "unchanged", "rewritten", "unchecked").

import {
  CryptoUnavailableError,
  STEP_TITLES,
  VerificationError,
  verifyProof,
} from "./lightclient.js";
import { hex, sha256 } from "./crypto.js";
import { NOT_COVERED, compareDisplay } from "./display.js";
import { DEFAULT_DEADLINE_MS, FetchError, fetchCapped } from "./fetchcap.js";
import { checkHistory } from "./history.js";
import { MAX_RECORD_SIZE } from "./lightclient.js";
import { MAX_CONSISTENCY_SIZE } from "./merkle.js";
import { canRemember, forget, load, pinnedLogs, poolOf, save } from "./pins.js";
import {
  MAX_NOTE_SIZE,
  MAX_POLICY_SIZE,
  MAX_TLOG_PROOF_SIZE,
  TLOG_PROOF_HEADER,
  parseCheckpoint,
  parsePolicy,
  splitNote,
} from "./tlog.js";

// The pool's root: this script is <root>/static/verify.js.
const ROOT = new URL("../", import.meta.url);
const POOL = poolOf(ROOT);
const DREAM_PATH = /^dreams\/([0-9a-f]{16})\/(?:index\.html)?$/;
// No file a reader gives is larger than a proof (docs/protocol.md §4.1, §5).
const MAX_GIVEN_FILE = MAX_TLOG_PROOF_SIZE;
const ENCODER = new TextEncoder();
const DECODER = new TextDecoder();
const CLI = "dreampool verify-proof proof.tlog-proof --record record.json --policy policy";

// --- small DOM helpers (textContent only) ------------------------------------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function part(section, name) {
  return section.querySelector(`[data-part="${name}"]`);
}

// --- reading the inputs without trusting them --------------------------------------------

/** The checkpoint a proof carries, parsed but not verified: only to pick files and pins. */
function peekProofCheckpoint(proof) {
  if (!(proof instanceof Uint8Array)) return null;
  for (let i = 0; i + 1 < proof.length; i++) {
    if (proof[i] === 0x0a && proof[i + 1] === 0x0a) return peekCheckpoint(proof.subarray(i + 2));
  }
  return null;
}

function peekCheckpoint(note) {
  if (!(note instanceof Uint8Array)) return null;
  try {
    return parseCheckpoint(splitNote(note).text);
  } catch {
    return null;
  }
}

/** The log of a parsed policy whose key name is origin, or null. */
function logOf(policy, origin) {
  return policy.logs.find((l) => l.key.name === origin) || null;
}

/** "a1b2 c3d4 …": the first 128 bits of SHA-256 of the raw log public key. */
async function fingerprint(publicKey) {
  return hex(await sha256(publicKey))
    .slice(0, 32)
    .match(/..../g)
    .join(" ");
}

async function policyFingerprint(policyText, origin) {
  try {
    const log = logOf(await parsePolicy(ENCODER.encode(policyText)), origin);
    return log ? { fingerprint: await fingerprint(log.key.publicKey), vkey: log.key.vkey } : null;
  } catch {
    return null;
  }
}

/** The dream id the page's address names, or null: <root>/dreams/<id>/. */
function dreamIdOfPage() {
  const here = new URL(location.href);
  if (here.origin !== ROOT.origin || !here.pathname.startsWith(ROOT.pathname)) return null;
  const m = DREAM_PATH.exec(here.pathname.slice(ROOT.pathname.length));
  return m ? m[1] : null;
}

/** A fetch that failed for want of an answer (not an HTTP refusal): nothing to judge. */
function unanswered(file) {
  return file instanceof FetchError && file.kind !== "http";
}

// --- showing steps -------------------------------------------------------------------------

function resetPanel(section) {
  section.dataset.verifyStatus = "running";
  delete section.dataset.verifyStep;
  delete section.dataset.differs;
  delete section.dataset.history;
  delete section.dataset.pin;
  part(section, "steps").replaceChildren();
  for (const name of ["outcome", "pin", "history", "scope"]) {
    const node = part(section, name);
    if (node) {
      node.replaceChildren();
      node.className = node.dataset.baseClass || "";
      if (name !== "outcome") node.removeAttribute("role");
    }
  }
  part(section, "outcome").textContent = "Verifying…";
}

function showStep(section, step) {
  const li = el("li", `step ${step.ok ? "step-ok" : "step-failed"}`);
  li.dataset.step = String(step.number);
  li.dataset.ok = String(step.ok);
  const head = el("p", "step-head");
  head.append(
    el("span", "step-num", `Step ${step.number}`),
    el("span", "step-title", step.title),
    el("span", "step-result", step.ok ? "✓ ok" : "✗ failed"),
  );
  li.append(head, el("p", "step-detail", step.detail));
  if (!step.ok && step.hint) li.append(el("p", "step-hint", `hint: ${step.hint}`));
  part(section, "steps").append(li);
}

function showSkipped(section, number, why) {
  const li = el("li", "step step-skipped");
  li.dataset.step = String(number);
  const head = el("p", "step-head");
  head.append(
    el("span", "step-num", `Step ${number}`),
    el("span", "step-title", STEP_TITLES[number]),
    el("span", "step-result", "– skipped"),
  );
  li.append(head, el("p", "step-detail", why));
  part(section, "steps").append(li);
}

function finish(section, status, message, step = null) {
  section.dataset.verifyStatus = status;
  if (step !== null) section.dataset.verifyStep = String(step);
  const outcome = part(section, "outcome");
  outcome.replaceChildren(el("strong", "", message));
  outcome.className = `${outcome.dataset.baseClass || ""} outcome-${status}`;
}

function unavailable(section, err) {
  finish(section, "unavailable", `This browser cannot verify here: ${err.message}.`);
  const outcome = part(section, "outcome");
  const pre = el("pre", "cmd");
  pre.append(el("code", "", CLI));
  outcome.append(el("p", "", "Verify on your own machine instead:"), pre);
}

// --- the dream page ---------------------------------------------------------------------------

/**
 * Verify the dream of a dream page's panel: fetch its record, proof, the pool's policy
 * (unless one is pinned), the current checkpoint and the consistency proof, run steps
 * 1-5, pin on first use, watch the history and compare what the page shows with the
 * verified record. options.deadlineMs bounds each fetch. Resolves to the outcome.
 */
export async function verifyDreamPanel(section, options = {}) {
  const started = performance.now();
  const deadlineMs = Number(options.deadlineMs) > 0 ? Number(options.deadlineMs) : DEFAULT_DEADLINE_MS;
  resetPanel(section);
  const pageId = dreamIdOfPage();
  const dreamId = pageId || section.dataset.dreamId || "";
  const dir = new URL(`dreams/${dreamId}/`, ROOT);
  const get = (url, cap) => fetchCapped(url, cap, deadlineMs);
  const [proof, record, sitePolicy, newer] = await Promise.all([
    get(new URL("proof.tlog-proof", dir), MAX_TLOG_PROOF_SIZE),
    get(new URL("record.json", dir), MAX_RECORD_SIZE),
    get(new URL("log/policy", ROOT), MAX_POLICY_SIZE),
    get(new URL("log/checkpoint", ROOT), MAX_NOTE_SIZE),
  ]);
  // Which consistency file to fetch, from the unverified sizes: step 5 verifies both.
  const proofCheckpoint = peekProofCheckpoint(proof);
  const current = peekCheckpoint(newer);
  let consistency = new Uint8Array();
  if (proofCheckpoint && current && proofCheckpoint.size < current.size) {
    consistency = await get(
      new URL(`log/consistency/${proofCheckpoint.size}`, ROOT),
      MAX_CONSISTENCY_SIZE,
    );
  }
  const missing = [proof, record, newer, consistency].find(unanswered);
  if (missing) return incomplete(section, started, missing.message);
  const origin = proofCheckpoint ? proofCheckpoint.origin : section.dataset.origin || "";
  const pin = load("pin", POOL, origin);
  if (!pin && unanswered(sitePolicy)) return incomplete(section, started, sitePolicy.message);
  const others = pinnedLogs(POOL).filter((o) => o !== origin);
  const policy = pin ? ENCODER.encode(String(pin.policy)) : sitePolicy;
  section.dataset.pin = pin ? "pinned" : "first-use";

  if (!pin && others.length) {
    // A pool that switches to a new log origin does not get a fresh first use.
    showStep(section, {
      number: 1,
      title: STEP_TITLES[1],
      ok: false,
      detail: `this pool now serves the log ${origin}, but this browser pinned the log ${others.join(", ")} for it`,
      hint: "if the pool really moved to a new log, paste its new policy under “Trusted log key”",
    });
    section.dataset.pin = "changed";
    await showKeyChange(section, origin, null, sitePolicy);
    finish(
      section,
      "failed",
      "Not verified: step 1 failed. The pool's log changed since you pinned it.",
      1,
    );
    return outcomeOf(section, started);
  }

  let result;
  try {
    const expectId = dreamId;
    result = await verifyProof({ proof, record, policy, newer, consistency, expectId }, (step) => {
      showStep(section, step);
      if (step.number === 1 && step.ok && !pin && sitePolicy instanceof Uint8Array) {
        save("pin", POOL, origin, {
          policy: DECODER.decode(sitePolicy),
          pinned: new Date().toISOString(),
        });
      }
    });
  } catch (err) {
    if (err instanceof CryptoUnavailableError) {
      unavailable(section, err);
      return outcomeOf(section, started);
    }
    if (!(err instanceof VerificationError)) throw err;
    if (err.step === 1 && pin) {
      const changed = await showKeyChange(section, origin, pin, sitePolicy);
      if (changed) {
        section.dataset.pin = "changed";
        finish(
          section,
          "failed",
          "Not verified: step 1 failed. The pool's log key changed since you pinned it.",
          1,
        );
        return outcomeOf(section, started);
      }
    }
    await showPin(section, origin);
    showHistoryNotChecked(section);
    finish(section, "failed", `Not verified: step ${err.step} failed. ${err.message}`, err.step);
    return outcomeOf(section, started);
  }
  await showPin(section, origin, !pin);
  await watchHistory(section, origin, result, DECODER.decode(newer), (path, cap) =>
    get(new URL(path, ROOT), cap),
  );
  // What the page shows must be what verified (display.js).
  const main = section.closest("main") || document.body;
  const { differs, notCovered } = await compareDisplay(main, section, result.dream.body);
  if (pageId === null || pageId !== section.dataset.dreamId) {
    differs.unshift({
      field: "dream",
      why: `this page is not the page of dream ${result.id} at dreams/${result.id}/ of this pool`,
    });
  }
  if (new URL(section.dataset.root || "", location.href).href !== ROOT.href) {
    differs.unshift({ field: "root", why: "the panel names another folder as the pool's root" });
  }
  // The status goes last: a program that waits for it sees the pin and history too.
  const rewritten = section.dataset.history === "rewritten";
  const warn = rewritten ? " But the pool's history changed since your last visit: see the warning." : "";
  if (differs.length) {
    showDiffers(section, result, differs);
    return outcomeOf(section, started);
  }
  showScope(section, notCovered);
  finish(
    section,
    "ok",
    `Verified: dream ${result.id} is entry ${result.index} of ${result.checkpoint.origin}, ` +
      `and this page shows it as logged.${warn}`,
  );
  return outcomeOf(section, started);
}

function incomplete(section, started, message) {
  finish(
    section,
    "incomplete",
    `Could not check: ${message}. Nothing was decided about this dream; try again later.`,
  );
  return outcomeOf(section, started);
}

function showDiffers(section, result, differs) {
  section.dataset.differs = [...new Set(differs.map((d) => d.field))].join(" ");
  finish(
    section,
    "differs",
    `Not verified: the log holds dream ${result.id}, but this page shows something else. ` +
      "Read the dream from its record.json or with dreampool verify-proof.",
  );
  const list = el("ul", "differs");
  for (const d of differs.slice(0, 20)) list.append(el("li", "", `${d.field}: ${d.why}`));
  part(section, "outcome").append(list);
}

function showScope(section, notCovered) {
  const node = part(section, "scope");
  if (!node) return;
  const pool = notCovered.length ? notCovered : Object.values(NOT_COVERED);
  node.textContent =
    "Verified covers what this page shows of the dream itself: its id, title, author, key, " +
    "tags, summary, entries and lineage. Not covered, as the pool's own statements the log " +
    `does not sign: ${pool.join(", ")}.`;
}

function outcomeOf(section, started) {
  return {
    status: section.dataset.verifyStatus,
    step: section.dataset.verifyStep ? Number(section.dataset.verifyStep) : null,
    pin: section.dataset.pin || null,
    history: section.dataset.history || null,
    differs: section.dataset.differs || null,
    ms: performance.now() - started,
  };
}

async function showPin(section, origin, firstUse = false) {
  const node = part(section, "pin");
  if (!node) return;
  const pin = load("pin", POOL, origin);
  if (!pin) {
    node.textContent = canRemember()
      ? "No log key is pinned for this pool yet."
      : "This browser keeps no data for this site, so the key is trusted for this visit only.";
    return;
  }
  const fp = await policyFingerprint(String(pin.policy), origin);
  const when = typeof pin.pinned === "string" ? pin.pinned.slice(0, 10) : "an earlier visit";
  node.replaceChildren(
    document.createTextNode(
      firstUse
        ? `First visit: this browser pinned the log key of ${origin}. Compare its fingerprint with a copy you trust (the pool's README or announcement): `
        : `Checked against the log key of ${origin} that you pinned on ${when}, fingerprint `,
    ),
    el("code", "fingerprint", fp ? fp.fingerprint : "?"),
    document.createTextNode("."),
  );
}

/** Say loudly that the site's policy names another key than the pinned one; true if so. */
async function showKeyChange(section, origin, pin, sitePolicy) {
  let siteKey = null;
  if (sitePolicy instanceof Uint8Array) {
    siteKey = await policyFingerprint(DECODER.decode(sitePolicy), origin);
  }
  const pinnedKey = pin ? await policyFingerprint(String(pin.policy), origin) : null;
  if (pin && siteKey && pinnedKey && siteKey.fingerprint === pinnedKey.fingerprint) return false;
  const node = part(section, "pin");
  node.className = `${node.dataset.baseClass || ""} callout callout-danger`;
  node.setAttribute("role", "alert");
  const when = pin && typeof pin.pinned === "string" ? pin.pinned.slice(0, 10) : "an earlier visit";
  node.replaceChildren(
    el("strong", "", "Warning: the pool's log key changed."),
    el(
      "span",
      "",
      pin
        ? (pinnedKey
            ? ` You pinned fingerprint ${pinnedKey.fingerprint} on ${when}`
            : ` The policy you pinned on ${when} names no usable key for this log`) +
            "; the pool now publishes " +
            (siteKey ? `fingerprint ${siteKey.fingerprint}.` : "no usable key for this log.")
        : ` This browser pinned another log for this pool; the pool now publishes ${origin}` +
            (siteKey ? ` with fingerprint ${siteKey.fingerprint}.` : "."),
    ),
    el(
      "span",
      "",
      " Either the pool rotated its key or someone is showing you a different log. " +
        "Do not trust this pool until you know which; if the change is expected, paste the new policy under “Trusted log key”.",
    ),
  );
  return true;
}

// --- watching the pool's history -------------------------------------------------------------

function showHistoryNotChecked(section) {
  const node = part(section, "history");
  if (node) node.textContent = "History not checked: the dream did not verify.";
}

/** Check the verified current checkpoint against the remembered one (history.js). */
async function watchHistory(section, origin, result, currentNote, fetchFile) {
  const node = part(section, "history");
  const current = result.newer || result.checkpoint;
  const seen = load("seen", POOL, origin);
  // The signed note is kept whole: with its signature it is evidence for anyone.
  const remember = () =>
    save("seen", POOL, origin, { checkpoint: currentNote, seen: new Date().toISOString() });
  const seenNote = seen && typeof seen.checkpoint === "string" ? seen.checkpoint : null;
  const verdict = await checkHistory({ policy: result.policy, seenNote, current, fetchFile });
  section.dataset.history = verdict.state;
  const { old } = verdict;
  if (verdict.state === "first-visit") {
    node.textContent = remember()
      ? `First visit: this browser now remembers checkpoint ${current.size} of ${current.origin}; later visits prove the log only grew from it.` +
        (verdict.detail ? ` (${verdict.detail}.)` : "")
      : "This browser keeps no data for this site, so the log's history cannot be watched.";
    return;
  }
  if (verdict.state === "unchanged") {
    node.className = `${node.dataset.baseClass || ""} history-ok`;
    node.textContent = `History unchanged since your last visit (size ${old.size} → ${current.size}).`;
    remember();
    return;
  }
  const when = String(seen.seen || "").slice(0, 10) || "an earlier visit";
  if (verdict.state === "unchecked") {
    // No verdict, and the remembered checkpoint stays the baseline.
    node.className = `${node.dataset.baseClass || ""} callout callout-info`;
    node.replaceChildren(
      el("strong", "", "Could not check the pool's history this time."),
      el(
        "span",
        "",
        ` ${verdict.detail}. This is not a verdict on the pool: nothing here proves its history changed. ` +
          `This browser still compares with the checkpoint it verified on ${when} (size ${old.size}); try again later.`,
      ),
    );
    return;
  }
  // Rewritten: proved by two signed checkpoints. Keep the remembered one: the warning
  // stays until the reader decides.
  node.className = `${node.dataset.baseClass || ""} callout callout-danger`;
  node.setAttribute("role", "alert");
  const accept = el("button", "button", "Accept the current checkpoint as the new baseline");
  accept.type = "button";
  accept.addEventListener("click", () => {
    remember();
    accept.disabled = true;
    accept.textContent = "Accepted: later visits compare with the current checkpoint";
  });
  node.replaceChildren(
    el("strong", "", "Warning: the pool rewrote its history."),
    el(
      "span",
      "",
      ` The checkpoint this browser verified on ${when} ` +
        `(size ${old.size}) is not a prefix of the current one (size ${current.size}): ${verdict.detail}. ` +
        "A log must only grow; keep the signed checkpoints below as evidence.",
    ),
    el("p", "history-label", `Checkpoint you saw before (size ${old.size}):`),
    el("pre", "note", String(seen.checkpoint)),
    el("p", "history-label", `Checkpoint the pool serves now (size ${current.size}):`),
    el("pre", "note", currentNote),
    ...verdict.evidence.flatMap((e) => [el("p", "history-label", e.label), el("pre", "note", e.note)]),
    accept,
  );
}

// --- pasting a policy ---------------------------------------------------------------------------

async function pinPasted(section) {
  const area = part(section, "paste");
  const message = part(section, "paste-message");
  let text = area.value.replace(/\r\n?/g, "\n");
  if (text && !text.endsWith("\n")) text += "\n";
  const origin = section.dataset.origin || "";
  let policy;
  try {
    policy = await parsePolicy(ENCODER.encode(text));
  } catch (err) {
    if (!(err instanceof VerificationError)) throw err;
    message.textContent = `Not pinned: ${err.message}.`;
    return;
  }
  const log = logOf(policy, origin);
  if (!log) {
    message.textContent = `Not pinned: the policy names no log ${origin}, the log of this pool.`;
    return;
  }
  // A pasted policy replaces every pin of this pool: it is the reader's own choice.
  for (const other of pinnedLogs(POOL)) forget("pin", POOL, other);
  if (!save("pin", POOL, origin, { policy: text, pinned: new Date().toISOString() })) {
    message.textContent = "Not pinned: this browser keeps no data for this site.";
    return;
  }
  message.textContent = `Pinned: log key of ${origin}, fingerprint ${await fingerprint(log.key.publicKey)}. Verifying again…`;
  await verifyDreamPanel(section);
}

function setUpDreamPanel(section) {
  const ui = part(section, "ui");
  if (!ui) return;
  ui.hidden = false;
  const run = part(section, "run");
  run.addEventListener("click", async () => {
    run.disabled = true;
    try {
      await verifyDreamPanel(section);
    } finally {
      run.disabled = false;
    }
  });
  part(section, "paste-save").addEventListener("click", () => pinPasted(section));
}

// --- the verify/ page: local files only --------------------------------------------------------

const SLOTS = ["proof", "record", "policy", "checkpoint", "consistency"];
const SLOT_NAMES = {
  proof: "proof (proof.tlog-proof)",
  record: "record (record.json)",
  policy: "policy (log/policy)",
  checkpoint: "newer checkpoint (log/checkpoint)",
  consistency: "consistency proof (log/consistency/<m>)",
};

/**
 * Which input a dropped file is, by its content (names are only a tie-breaker). Linear
 * in the file's size: each test reads the bytes once, no pattern backtracks over lines.
 */
export function classify(bytes, name = "") {
  const head = DECODER.decode(bytes.subarray(0, 64));
  if (head.startsWith(TLOG_PROOF_HEADER + "\n")) return "proof";
  if (/^\s*\{/.test(head)) return "record";
  if (peekCheckpoint(bytes)) return "checkpoint";
  const text = DECODER.decode(bytes);
  if (!text || isConsistencyText(text)) return "consistency";
  if (isPolicyText(text)) return "policy";
  if (/\.tlog-proof$/i.test(name)) return "proof";
  if (/\.json$/i.test(name)) return "record";
  return "policy";
}

const HASH_LINE = /[A-Za-z0-9+/]{43}=\n/y; // one b64 SHA-256 and its newline: 45 chars
const POLICY_WORD = /log|quorum|witness|group|#/y;

/** One b64 SHA-256 per line, each ending in a newline (docs/protocol.md §4). */
function isConsistencyText(text) {
  if (text.length % 45 !== 0) return false;
  for (let at = 0; at < text.length; at += 45) {
    HASH_LINE.lastIndex = at;
    if (!HASH_LINE.test(text)) return false;
  }
  return true;
}

/** A line whose first item is a tlog-policy directive or a comment: one pass. */
function isPolicyText(text) {
  let start = true;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x0a) start = true;
    else if (start && c !== 0x20 && (c < 0x09 || c > 0x0d)) {
      POLICY_WORD.lastIndex = i;
      if (POLICY_WORD.test(text)) return true;
      start = false;
    }
  }
  return false;
}

/** Read a file the reader gave, or say why not: none of the inputs is this large. */
async function readGiven(file) {
  if (file.size > MAX_GIVEN_FILE) {
    return new Error(
      `${file.name}: too large (${file.size} bytes; no file this page checks is over ${MAX_GIVEN_FILE} bytes), not read`,
    );
  }
  return new Uint8Array(await file.arrayBuffer());
}

function setUpFilePage(section) {
  const ui = part(section, "ui");
  if (!ui) return;
  ui.hidden = false;
  const files = new Map(); // slot -> { name, bytes }
  const listing = part(section, "files");

  const show = () => {
    listing.replaceChildren(
      ...SLOTS.map((slot) => {
        const li = el("li", files.has(slot) ? "file-given" : "file-missing");
        li.dataset.slot = slot;
        const f = files.get(slot);
        li.append(
          el("span", "file-slot", SLOT_NAMES[slot] + ": "),
          el("span", "file-name", f ? `${f.name} (${f.bytes.length} bytes)` : "not given"),
        );
        return li;
      }),
    );
  };

  const take = async (slot, file) => {
    const bytes = await readGiven(file);
    if (bytes instanceof Error) {
      files.delete(slot);
      part(section, "dropped").textContent = bytes.message;
    } else {
      files.set(slot, { name: file.name, bytes });
    }
    show();
  };

  for (const slot of SLOTS) {
    const input = section.querySelector(`input[data-slot="${slot}"]`);
    if (!input) continue;
    input.addEventListener("change", async () => {
      if (input.files && input.files[0]) await take(slot, input.files[0]);
      else {
        files.delete(slot);
        show();
      }
    });
  }

  const zone = part(section, "dropzone");
  const stop = (event) => {
    event.preventDefault();
    event.stopPropagation();
  };
  zone.addEventListener("dragenter", (e) => {
    stop(e);
    zone.classList.add("dropzone-active");
  });
  zone.addEventListener("dragover", stop);
  zone.addEventListener("dragleave", (e) => {
    stop(e);
    zone.classList.remove("dropzone-active");
  });
  zone.addEventListener("drop", async (e) => {
    stop(e);
    zone.classList.remove("dropzone-active");
    const dropped = e.dataTransfer ? [...e.dataTransfer.files] : [];
    const refused = [];
    for (const file of dropped) {
      const bytes = await readGiven(file);
      if (bytes instanceof Error) refused.push(bytes.message);
      else files.set(classify(bytes, file.name), { name: file.name, bytes });
    }
    show();
    part(section, "dropped").textContent =
      `${dropped.length} file(s) dropped; see the list below.` +
      (refused.length ? ` ${refused.join("; ")}.` : "");
  });

  const run = part(section, "run");
  run.addEventListener("click", async () => {
    run.disabled = true;
    try {
      await verifyFiles(section, files);
    } finally {
      run.disabled = false;
    }
  });
  show();
}

/** Verify files the reader gave, with no network at all. */
export async function verifyFiles(section, files) {
  const started = performance.now();
  resetPanel(section);
  const bytes = (slot) => (files.has(slot) ? files.get(slot).bytes : null);
  const proof = bytes("proof");
  const record = bytes("record");
  if (!proof || !record) {
    finish(section, "failed", "Give at least the proof and the record.");
    return outcomeOf(section, started);
  }
  const peeked = peekProofCheckpoint(proof);
  const origin = peeked ? peeked.origin : "";
  const pin = load("pin", POOL, origin);
  let policy = bytes("policy");
  let usedPin = false;
  if (!policy && pin) {
    policy = ENCODER.encode(String(pin.policy));
    usedPin = true;
  }
  if (!policy) {
    finish(
      section,
      "failed",
      `Give the pool's policy: no policy for ${origin || "this log"} is pinned in this browser.`,
    );
    return outcomeOf(section, started);
  }
  let result;
  try {
    result = await verifyProof(
      { proof, record, policy, newer: bytes("checkpoint"), consistency: bytes("consistency") },
      (step) => showStep(section, step),
    );
  } catch (err) {
    if (err instanceof CryptoUnavailableError) {
      unavailable(section, err);
      return outcomeOf(section, started);
    }
    if (!(err instanceof VerificationError)) throw err;
    finish(section, "failed", `Not verified: step ${err.step} failed. ${err.message}`, err.step);
    return outcomeOf(section, started);
  }
  if (!result.newer) {
    showSkipped(section, 5, "no newer checkpoint and consistency proof given");
  }
  await comparePin(section, origin, policy, usedPin, pin);
  finish(
    section,
    "ok",
    `Verified: dream ${result.id} is entry ${result.index} of ${result.checkpoint.origin}.`,
  );
  return outcomeOf(section, started);
}

async function comparePin(section, origin, policy, usedPin, pin) {
  const node = part(section, "pin");
  const given = await policyFingerprint(DECODER.decode(policy), origin);
  const fp = given ? given.fingerprint : "?";
  if (usedPin) {
    node.textContent = `Checked against the policy you pinned in this browser for ${origin}, fingerprint ${fp}.`;
    section.dataset.pin = "pinned";
    return;
  }
  if (!pin) {
    node.textContent = `Checked against the policy you gave, log key fingerprint ${fp}. Compare it with a copy you trust.`;
    return;
  }
  const pinned = await policyFingerprint(String(pin.policy), origin);
  if (pinned && pinned.fingerprint === fp) {
    node.textContent = `The policy you gave names the key you pinned in this browser (fingerprint ${fp}).`;
    section.dataset.pin = "pinned";
  } else {
    node.className = `${node.dataset.baseClass || ""} callout callout-danger`;
    node.setAttribute("role", "alert");
    node.textContent =
      `Warning: the policy you gave names the key ${fp}, not the one you pinned in this browser ` +
      `(${pinned ? pinned.fingerprint : "?"}). The proof verifies against the policy you gave, not against your pin.`;
    section.dataset.pin = "changed";
  }
}

// --- wiring -----------------------------------------------------------------------------------

function setUp() {
  for (const section of document.querySelectorAll("section.verify[data-dream-id]"))
    setUpDreamPanel(section);
  for (const section of document.querySelectorAll("section.verify[data-verify-files]"))
    setUpFilePage(section);
}

// A hook for programs and the benchmark: verify a dream page's panel, get its outcome
// ({status, step, pin, history, differs, ms}); options: {deadlineMs} for each fetch.
window.dreampoolVerify = (
  section = document.querySelector("section.verify[data-dream-id]"),
  options = {},
) => {
  if (!section) return Promise.reject(new Error("this page has no dream to verify"));
  return verifyDreamPanel(section, options);
};

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
else setUp();
