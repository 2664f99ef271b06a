// dreampool history.js: did the pool's log only grow since this browser last looked?
//
// Only a proof makes a verdict (THREATS T28, T31). The answer is "rewritten" only
// with two checkpoints, both signed by the pinned log key, that a verified proof
// shows inconsistent:
//
//   * the same size and different roots (the remembered checkpoint and the current
//     one, or the remembered one and the pool's own log/checkpoints/<m>); or
//   * a consistency proof log/consistency/<m> that rebuilds the NEW signed root but
//     gives another OLD root than the remembered one (RFC 9162 §2.1.4.2).
//
// A missing, garbled, truncated or unverifiable file, or a current checkpoint smaller
// than the remembered one (a stale cache serves an older site for minutes), is
// "unchecked": could not check, try again. It is never called a fork.
//
// This module touches no DOM and no storage; verify.js shows and keeps the outcome.

import { VerificationError, bytesEqual, hex } from "./crypto.js";
import { FetchError } from "./fetchcap.js";
import { MAX_CONSISTENCY_SIZE, consistencyRoots, parseConsistencyProof } from "./merkle.js";
import { MAX_NOTE_SIZE, verifyCheckpoint } from "./tlog.js";

const ENCODER = new TextEncoder();

/**
 * Compare the remembered checkpoint note (text, or null) with the current verified
 * checkpoint. fetchFile(path, maxBytes) resolves to bytes or a FetchError. Resolves
 * to { state, old, detail, evidence } with state one of "first-visit", "unchanged",
 * "rewritten", "unchecked"; evidence is [{label, note}] of signed checkpoints.
 */
export async function checkHistory({ policy, seenNote, current, fetchFile }) {
  const old = seenNote === null ? null : await openRemembered(policy, seenNote);
  if (old === null || old.origin !== current.origin) {
    const detail =
      seenNote !== null && old === null
        ? "the checkpoint this browser kept does not verify under the pinned key, so it is no evidence; starting over"
        : null;
    return { state: "first-visit", old: null, detail, evidence: [] };
  }
  if (old.size > current.size) {
    return {
      state: "unchecked",
      old,
      detail:
        `this site now serves an older checkpoint (size ${current.size}) than the one this browser verified (size ${old.size}). ` +
        "A cache can serve an old copy of a site for some minutes after an update; if this lasts, the pool may have rolled its log back: keep both checkpoints",
      evidence: [],
    };
  }
  if (old.size === current.size) {
    if (bytesEqual(old.root, current.root)) return { state: "unchanged", old, evidence: [] };
    return {
      state: "rewritten",
      old,
      detail: `two different trees of size ${old.size}, both signed by the log key`,
      evidence: [],
    };
  }
  // old.size < current.size: log/consistency/<m> (docs/protocol.md §4).
  const why = await consistencyVerdict(old, current, fetchFile);
  if (why.state !== "unchecked") return { ...why, old, evidence: [] };
  // The pool's own checkpoint of the remembered size (docs/protocol.md §4): a signed
  // checkpoint of size m with another root is a fork whatever the consistency file says.
  const own = await ownCheckpoint(policy, old, fetchFile);
  if (own !== null && !bytesEqual(own.checkpoint.root, old.root)) {
    return {
      state: "rewritten",
      old,
      detail: `two different trees of size ${old.size}: the pool's own log/checkpoints/${old.size} has another root than the one you saw`,
      evidence: [{ label: `The pool's log/checkpoints/${old.size}:`, note: own.note }],
    };
  }
  return { state: "unchecked", old, detail: why.detail, evidence: [] };
}

async function openRemembered(policy, note) {
  try {
    return (await verifyCheckpoint(policy, ENCODER.encode(String(note)))).checkpoint;
  } catch (err) {
    if (err instanceof VerificationError) return null;
    throw err;
  }
}

async function consistencyVerdict(old, current, fetchFile) {
  const path = `log/consistency/${old.size}`;
  const file = await fetchFile(path, MAX_CONSISTENCY_SIZE);
  if (file instanceof FetchError) return { state: "unchecked", detail: file.message };
  let roots;
  try {
    roots = await consistencyRoots(old.size, current.size, old.root, parseConsistencyProof(file));
  } catch (err) {
    if (!(err instanceof VerificationError)) throw err;
    return { state: "unchecked", detail: `${path} is damaged: ${err.message}` };
  }
  const [oldRoot, newRoot] = roots;
  if (!bytesEqual(newRoot, current.root)) {
    // It does not even lead to the signed root: a damaged or stale file, no evidence.
    return {
      state: "unchecked",
      detail: `${path} does not lead to the current signed root (a damaged or stale file)`,
    };
  }
  if (bytesEqual(oldRoot, old.root)) return { state: "unchanged" };
  return {
    state: "rewritten",
    detail: `the pool's consistency proof from size ${old.size} to ${current.size} rebuilds the current signed root but gives old root ${hex(oldRoot)}, not ${hex(old.root)} that you saw`,
  };
}

async function ownCheckpoint(policy, old, fetchFile) {
  const file = await fetchFile(`log/checkpoints/${old.size}`, MAX_NOTE_SIZE);
  if (file instanceof FetchError) return null;
  try {
    const { checkpoint } = await verifyCheckpoint(policy, file);
    if (checkpoint.size !== old.size || checkpoint.origin !== old.origin) return null;
    return { checkpoint, note: new TextDecoder().decode(file) };
  } catch (err) {
    if (err instanceof VerificationError) return null;
    throw err;
  }
}
