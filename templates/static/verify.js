// dreampool verify.js: the verification panel of a dream page and the verify/ page.
//
// The checks themselves are lightclient.js (docs/protocol.md §5 steps 1-5); this module
// fetches or reads the inputs, keeps what the browser trusts between visits, and shows
// each step. Everything shown is set with textContent: no input becomes HTML.
//
// What this browser keeps (localStorage of the site's web origin, per log origin):
//
//   dreampool/v1/pin/<origin>   the policy pinned on first use or pasted by the reader
//   dreampool/v1/seen/<origin>  the last checkpoint this browser verified for the log
//
// Pinning: the first verification takes the log key from the site's log/policy and,
// once it verifies the proof's checkpoint (step 1), pins it; later visits verify with
// the pinned policy only, and a pool whose key changed fails step 1 loudly. A site that
// starts serving a log of another origin, with a pin for the first one kept here, is
// refused the same way: a new origin is no way around a pinned key.
//
// History: each verification of a dream page proves the current log/checkpoint
// consistent with the remembered one (log/consistency/<m>, or equal roots when the
// sizes are equal), so a pool cannot rewrite what this browser once saw.
//
// Programs read the outcome from the panel: data-verify-status ("running", "ok",
// "failed", "unavailable"), data-verify-step (the failed step), data-pin ("first-use",
// "pinned", "changed") and data-history ("first-visit", "unchanged", "rewritten").

import {
  CryptoUnavailableError,
  STEP_TITLES,
  VerificationError,
  verifyProof,
} from "./lightclient.js";
import { bytesEqual, hex, sha256 } from "./crypto.js";
import { parseConsistencyProof, verifyConsistency } from "./merkle.js";
import { TLOG_PROOF_HEADER, parseCheckpoint, parsePolicy, splitNote } from "./tlog.js";

const KEY_PREFIX = "dreampool/v1/";
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

// --- what the browser keeps ----------------------------------------------------------------

function storage() {
  try {
    const s = window.localStorage;
    s.getItem(KEY_PREFIX + "probe");
    return s;
  } catch {
    return null; // storage disabled: trust holds for this visit only
  }
}

function load(kind, origin) {
  const s = storage();
  if (!s) return null;
  try {
    const value = JSON.parse(s.getItem(KEY_PREFIX + kind + "/" + origin) || "null");
    return value && typeof value === "object" ? value : null;
  } catch {
    return null;
  }
}

function save(kind, origin, value) {
  const s = storage();
  if (!s) return false;
  try {
    s.setItem(KEY_PREFIX + kind + "/" + origin, JSON.stringify(value));
    return true;
  } catch {
    return false;
  }
}

function forget(kind, origin) {
  const s = storage();
  if (s) s.removeItem(KEY_PREFIX + kind + "/" + origin);
}

/** The log origins this browser holds a pin for, on this site. */
function pinnedOrigins() {
  const s = storage();
  if (!s) return [];
  const out = [];
  for (let i = 0; i < s.length; i++) {
    const key = s.key(i);
    if (key && key.startsWith(KEY_PREFIX + "pin/")) out.push(key.slice(KEY_PREFIX.length + 4));
  }
  return out.sort();
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

async function fetchBytes(url) {
  try {
    // no-store: a revalidation that ends in 304 on a coarse Last-Modified could hand
    // back a stale policy or checkpoint, and these files are small.
    const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return new Error(`cannot fetch ${url.pathname}: HTTP ${response.status}`);
    return new Uint8Array(await response.arrayBuffer());
  } catch (err) {
    return new Error(`cannot fetch ${url.pathname}: ${err.message}`);
  }
}

// --- showing steps -------------------------------------------------------------------------

function resetPanel(section) {
  section.dataset.verifyStatus = "running";
  delete section.dataset.verifyStep;
  delete section.dataset.history;
  delete section.dataset.pin;
  part(section, "steps").replaceChildren();
  for (const name of ["outcome", "pin", "history"]) {
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
 * 1-5, pin on first use and watch the history. Resolves to the panel's outcome.
 */
export async function verifyDreamPanel(section) {
  const started = performance.now();
  resetPanel(section);
  const base = new URL(section.dataset.root || "../../", location.href);
  const dir = new URL(`dreams/${section.dataset.dreamId}/`, base);
  const [proof, record, sitePolicy, newer] = await Promise.all([
    fetchBytes(new URL("proof.tlog-proof", dir)),
    fetchBytes(new URL("record.json", dir)),
    fetchBytes(new URL("log/policy", base)),
    fetchBytes(new URL("log/checkpoint", base)),
  ]);
  // Which consistency file to fetch, from the unverified sizes: step 5 verifies both.
  const proofCheckpoint = peekProofCheckpoint(proof);
  const current = peekCheckpoint(newer);
  let consistency = new Uint8Array();
  if (proofCheckpoint && current && proofCheckpoint.size < current.size) {
    consistency = await fetchBytes(new URL(`log/consistency/${proofCheckpoint.size}`, base));
  }
  const origin = proofCheckpoint ? proofCheckpoint.origin : section.dataset.origin || "";
  const pin = load("pin", origin);
  const others = pinnedOrigins().filter((o) => o !== origin);
  const policy = pin ? ENCODER.encode(String(pin.policy)) : sitePolicy;
  section.dataset.pin = pin ? "pinned" : "first-use";

  if (!pin && others.length) {
    // A site that switches to a new log origin does not get a fresh first use.
    showStep(section, {
      number: 1,
      title: STEP_TITLES[1],
      ok: false,
      detail: `this site now serves the log ${origin}, but this browser pinned the log ${others.join(", ")} for it`,
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
    const expectId = section.dataset.dreamId;
    result = await verifyProof({ proof, record, policy, newer, consistency, expectId }, (step) => {
      showStep(section, step);
      if (step.number === 1 && step.ok && !pin && sitePolicy instanceof Uint8Array) {
        save("pin", origin, {
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
  await watchHistory(section, origin, result.newer, DECODER.decode(newer), base);
  // The status goes last: a program that waits for it sees the pin and history too.
  const rewritten = section.dataset.history === "rewritten";
  finish(
    section,
    "ok",
    `Verified: dream ${result.id} is entry ${result.index} of ${result.checkpoint.origin}.` +
      (rewritten ? " But the pool's history changed since your last visit: see the warning." : ""),
  );
  return outcomeOf(section, started);
}

function outcomeOf(section, started) {
  return {
    status: section.dataset.verifyStatus,
    step: section.dataset.verifyStep ? Number(section.dataset.verifyStep) : null,
    pin: section.dataset.pin || null,
    history: section.dataset.history || null,
    ms: performance.now() - started,
  };
}

async function showPin(section, origin, firstUse = false) {
  const node = part(section, "pin");
  if (!node) return;
  const pin = load("pin", origin);
  if (!pin) {
    node.textContent = storage()
      ? "No log key is pinned for this pool yet."
      : "This browser keeps no data for this site, so the key is trusted for this visit only.";
    return;
  }
  const fp = await policyFingerprint(String(pin.policy), origin);
  const when = typeof pin.pinned === "string" ? pin.pinned.slice(0, 10) : "an earlier visit";
  node.replaceChildren(
    document.createTextNode(
      firstUse
        ? `First visit: this browser pinned the log key of ${origin}. Compare its fingerprint with a copy you trust: `
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
        : ` This browser pinned another log for this site; the pool now publishes ${origin}` +
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

/**
 * Prove the verified current checkpoint consistent with the one this browser saw last:
 * log/consistency/<m> from the remembered size m, or equal roots when sizes are equal.
 */
async function watchHistory(section, origin, current, currentNote, base) {
  const node = part(section, "history");
  const seen = load("seen", origin);
  // The signed note is kept whole: with its signature it is evidence for anyone.
  const remember = () =>
    save("seen", origin, { checkpoint: currentNote, seen: new Date().toISOString() });
  let old = null;
  try {
    old = seen ? parseCheckpoint(splitNote(ENCODER.encode(String(seen.checkpoint))).text) : null;
  } catch {
    old = null; // unreadable: start over
  }
  if (!old || old.origin !== current.origin) {
    section.dataset.history = "first-visit";
    node.textContent = remember()
      ? `First visit: this browser now remembers checkpoint ${current.size} of ${current.origin}; later visits prove the log only grew from it.`
      : "This browser keeps no data for this site, so the log's history cannot be watched.";
    return;
  }
  let problem = null;
  if (old.size > current.size) {
    problem = `the log shrank from size ${old.size} to ${current.size}`;
  } else if (old.size === current.size) {
    if (!bytesEqual(old.root, current.root)) problem = `two different trees of size ${old.size}`;
  } else {
    const file = await fetchBytes(new URL(`log/consistency/${old.size}`, base));
    if (file instanceof Error) {
      problem = `the pool publishes no consistency proof from size ${old.size} (${file.message})`;
    } else {
      try {
        await verifyConsistency(
          old.size,
          current.size,
          old.root,
          current.root,
          parseConsistencyProof(file),
        );
      } catch (err) {
        if (!(err instanceof VerificationError)) throw err;
        problem = err.message;
      }
    }
  }
  if (problem === null) {
    section.dataset.history = "unchanged";
    node.className = `${node.dataset.baseClass || ""} history-ok`;
    node.textContent = `History unchanged since your last visit (size ${old.size} → ${current.size}).`;
    remember();
    return;
  }
  // Keep the remembered checkpoint: the warning stays until the reader decides.
  section.dataset.history = "rewritten";
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
      ` The checkpoint this browser verified on ${String(seen.seen || "").slice(0, 10) || "an earlier visit"} ` +
        `(size ${old.size}) is not a prefix of the current one (size ${current.size}): ${problem}. ` +
        "A log must only grow; keep both checkpoints below as evidence.",
    ),
    el("p", "history-label", `Checkpoint you saw before (size ${old.size}):`),
    el("pre", "note", String(seen.checkpoint)),
    el("p", "history-label", `Checkpoint the pool serves now (size ${current.size}):`),
    el("pre", "note", currentNote),
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
  // A pasted policy replaces every pin of this site: it is the reader's own choice.
  for (const other of pinnedOrigins()) forget("pin", other);
  if (!save("pin", origin, { policy: text, pinned: new Date().toISOString() })) {
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

/** Which input a dropped file is, by its content (names are only a tie-breaker). */
export function classify(bytes, name = "") {
  const head = DECODER.decode(bytes.subarray(0, 64));
  if (head.startsWith(TLOG_PROOF_HEADER + "\n")) return "proof";
  if (/^\s*\{/.test(head)) return "record";
  if (peekCheckpoint(bytes)) return "checkpoint";
  const text = DECODER.decode(bytes);
  if (!text || /^(?:[A-Za-z0-9+/]{43}=\n)+$/.test(text)) return "consistency";
  if (/^\s*(?:log|quorum|witness|group|#)/m.test(text)) return "policy";
  if (/\.tlog-proof$/i.test(name)) return "proof";
  if (/\.json$/i.test(name)) return "record";
  return "policy";
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
    files.set(slot, { name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) });
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
    for (const file of dropped) {
      const bytes = new Uint8Array(await file.arrayBuffer());
      files.set(classify(bytes, file.name), { name: file.name, bytes });
    }
    show();
    part(section, "dropped").textContent = `${dropped.length} file(s) dropped; see the list below.`;
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
  const pin = load("pin", origin);
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
// ({status, step, pin, history, ms}).
window.dreampoolVerify = (section = document.querySelector("section.verify[data-dream-id]")) => {
  if (!section) return Promise.reject(new Error("this page has no dream to verify"));
  return verifyDreamPanel(section);
};

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
else setUp();
