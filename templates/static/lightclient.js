// dreampool lightclient.js: docs/protocol.md §5 in the browser, step for step the twin of
// builder/readers/lightclient.py (`dreampool verify-proof`). From a proof, a record and a
// pinned policy, with no trust in the site that served them:
//
//   1. Checkpoint. The proof file is a c2sp.org/tlog-proof@v1 whose embedded
//      checkpoint is signed by a log key of the policy, that key's name is the
//      checkpoint's origin, and the policy's witness quorum is met.
//   2. Leaf data. From record.json, commitment = hex(H(JCS({"dream", "salt"}))) and
//      leaf = JCS({"v":1,"kind":"dream","id","commitment"}); the proof's extra must be
//      JCS-canonical and equal leaf byte for byte, and its index must be the record's.
//   3. Inclusion. H(0x00 ‖ leaf) is included at index under the checkpoint root,
//      index < size (RFC 9162 §2.1.3.2).
//   4. Dream. The dream meets the docs/protocol.md §1 schema, its Ed25519 signature
//      verifies under its publicKey, keyId names that key, and the record's id is the
//      dream id, the first 16 hex of H(signature).
//   5. Consistency (given a newer checkpoint and log/consistency/<m>). The newer
//      checkpoint verifies as in step 1, is of the same log, and the RFC 6962
//      consistency proof links the proof's checkpoint to it (RFC 9162 §2.1.4.2).
//
// verifyProof runs the steps in order, reports each to onStep as it ends (the failed
// one too) and throws VerificationError with .step set at the first that fails; it
// returns a result only when every step held. Given expectId (a dream page knows which
// dream it shows), step 2 also requires the record to be of that dream. The proof file is read by three steps:
// its header line and checkpoint by step 1, its extra and index lines by step 2, its
// hash lines by step 3, so a byte changed anywhere fails the step that part belongs to.
// This module touches no DOM and no network: every input is bytes (Uint8Array).

import { JSONError, JsonFloat, canonicalBytes, isCanonical, parseStrict } from "./jcs.js";
import {
  CryptoUnavailableError,
  VerificationError,
  b64decode,
  b64urlDecode,
  bytesEqual,
  ed25519Verify,
  hex,
  latin1,
  requireEd25519,
  sha256,
} from "./crypto.js";
import { leafHash, parseConsistencyProof, verifyConsistency, verifyInclusion } from "./merkle.js";
import { UNICODE_VERSION, firstRefused } from "./unicodepolicy.js";
import {
  MAX_TLOG_PROOF_SIZE,
  TLOG_PROOF_HEADER,
  parsePolicy,
  parseTlogProof,
  verifyCheckpoint,
} from "./tlog.js";

export { CryptoUnavailableError, VerificationError };

export const RECORD_FORMAT = "dreampool-record/v1";
const RECORD_FIELDS = ["format", "id", "index", "salt", "dream"];
export const MAX_RECORD_SIZE = 256 * 1024;
const SALT_SIZE = 32;
const MAX_DREAM_BYTES = 64 * 1024;

/** The docs/protocol.md §5 steps, by number (the titles of builder/readers/lightclient.py). */
export const STEP_TITLES = Object.freeze({
  1: "checkpoint signed by the policy's log, witness quorum met",
  2: "leaf data recomputed from the record equals the proof's extra",
  3: "leaf included at its index under the checkpoint root",
  4: "dream schema, signature, keyId and id",
  5: "checkpoint consistent with the newer checkpoint",
});

const STEP_HINTS = Object.freeze({
  1: "check that the policy is the pool's pinned log/policy and that the proof comes from that pool; download dreams/<id>/proof.tlog-proof again",
  2: "the record or the proof was changed, or they belong to different dreams; download both from the same dreams/<id>/ directory again",
  3: "the proof's hashes do not lead to the signed root: the proof file was changed; download it again",
  4: "the log holds a dream that does not verify; report it to the pool's operators",
  5: "give the log's current checkpoint (log/checkpoint) and log/consistency/<size of the proof's checkpoint>",
});

const ENCODER = new TextEncoder();
const INDEX_LINE = /^index (0|[1-9][0-9]{0,18})$/;

/**
 * Run docs/protocol.md §5 on { proof, record, policy, newer?, consistency? } (Uint8Arrays).
 * newer and consistency run step 5; give both or neither. onStep({number, title, ok,
 * detail}) hears each step as it ends. Throws VerificationError (step set) at the first
 * failure, CryptoUnavailableError if this browser cannot verify Ed25519 at all.
 */
export async function verifyProof(
  { proof, record, policy, newer = null, consistency = null, expectId = null },
  onStep = () => {},
) {
  await requireEd25519(); // a browser without Ed25519 is not a failed step 1
  const steps = [];
  const report = (step) => {
    steps.push(step);
    onStep(step);
  };
  // Step 1: the checkpoint the proof carries, against the pinned policy.
  const { parsedPolicy, checkpoint, witnesses } = await run(1, report, () =>
    checkCheckpoint(need(policy, "the policy"), need(proof, "the proof")),
  );
  // Step 2: the leaf data, recomputed from the record, is the proof's extra.
  const rec = await run(2, report, () =>
    checkLeafData(need(record, "the record"), proof, expectId),
  );
  // Step 3: that leaf is in the tree the checkpoint signs.
  await run(3, report, () => checkInclusion(proof, rec, checkpoint));
  // Step 4: the dream itself.
  const dream = await run(4, report, () => checkDream(rec));
  // Step 5 (optional): the proof's checkpoint is a prefix of a newer one.
  let newerCheckpoint = null;
  if (newer !== null || consistency !== null) {
    newerCheckpoint = await run(5, report, () =>
      checkConsistency(
        parsedPolicy,
        checkpoint,
        need(newer, "the newer checkpoint"),
        need(consistency, "the consistency proof"),
      ),
    );
  }
  return {
    id: dream.id,
    dream,
    index: rec.index,
    leafData: rec.leafData,
    checkpoint,
    witnesses,
    newer: newerCheckpoint,
    policy: parsedPolicy,
    steps,
  };
}

/**
 * An input the caller could not read (a failed download) is passed as an Error; the
 * step that reads it fails with that error's message, as a bad file would.
 */
function need(input, what) {
  if (input instanceof Error) fail(`${what}: ${input.message}`, `get ${what} again`);
  return input;
}

async function run(number, report, check) {
  const title = STEP_TITLES[number];
  let value;
  let detail;
  try {
    [value, detail] = await check();
  } catch (err) {
    if (
      err instanceof CryptoUnavailableError ||
      !(err instanceof VerificationError || err instanceof JSONError)
    ) {
      throw err; // not a property of the input: a bug, or a browser without Ed25519
    }
    const error = new VerificationError(err.message, {
      step: number,
      hint: err.hint || STEP_HINTS[number],
    });
    report({ number, title, ok: false, detail: error.message, hint: error.hint });
    throw error;
  }
  report({ number, title, ok: true, detail });
  return value;
}

function fail(message, hint = null) {
  throw new VerificationError(message, { hint });
}

// --- step 1 ---------------------------------------------------------------------------

async function checkCheckpoint(policyBytes, proof) {
  const parsedPolicy = await parsePolicy(policyBytes);
  const note = checkpointNote(proof);
  let opened;
  try {
    opened = await verifyCheckpoint(parsedPolicy, note);
  } catch (err) {
    if (err instanceof VerificationError) fail(`proof: ${err.message}`, err.hint);
    throw err;
  }
  const { checkpoint, witnesses } = opened;
  const quorum =
    parsedPolicy.quorum === "none"
      ? "quorum none"
      : `quorum ${parsedPolicy.quorum} met (cosigned by ${witnesses.join(", ")})`;
  const detail = `checkpoint ${checkpoint.origin} size ${checkpoint.size} signed by its log key, ${quorum}`;
  return [{ parsedPolicy, checkpoint, witnesses }, detail];
}

/** Where the header lines end: the first empty line (tlog-proof §Format), or -1. */
function headerEnd(proof) {
  for (let i = 0; i + 1 < proof.length; i++) {
    if (proof[i] === 0x0a && proof[i + 1] === 0x0a) return i;
  }
  return -1;
}

/**
 * The checkpoint note a tlog-proof ends with. The header, extra, index and hash lines
 * are all non-empty, so the first empty line ends them and the checkpoint follows.
 */
export function checkpointNote(proof) {
  if (proof.length > MAX_TLOG_PROOF_SIZE) {
    fail(
      `proof is ${proof.length} bytes, want at most ${MAX_TLOG_PROOF_SIZE}`,
      "this is not a dream's proof.tlog-proof",
    );
  }
  const header = ENCODER.encode(TLOG_PROOF_HEADER + "\n");
  if (!bytesEqual(proof.subarray(0, header.length), header)) {
    fail(
      "proof: line 1 is not the header c2sp.org/tlog-proof@v1",
      "give the dream's proof.tlog-proof file (c2sp.org/tlog-proof@v1)",
    );
  }
  const cut = headerEnd(proof);
  if (cut < 0) {
    fail(
      "proof: no empty line before the checkpoint (tlog-proof §Format)",
      "the proof file is truncated; download it again",
    );
  }
  return proof.subarray(cut + 2);
}

// --- step 2 ---------------------------------------------------------------------------

function splitLines(bytes) {
  const lines = [];
  let start = 0;
  for (;;) {
    const end = bytes.indexOf(0x0a, start);
    if (end < 0) {
      lines.push(bytes.subarray(start));
      return lines;
    }
    lines.push(bytes.subarray(start, end));
    start = end + 1;
  }
}

async function checkLeafData(recordBytes, proof, expectId) {
  const rec = await parseRecord(recordBytes);
  // A dream page asks about one dream: a valid record and proof of another are no answer.
  if (expectId !== null && rec.id !== expectId) {
    fail(`the record is of dream ${rec.id}, not of dream ${expectId} that this page shows`);
  }
  // Step 1 found the empty line and checked line 1; lines 2 and 3 are extra and index.
  const lines = splitLines(proof.subarray(0, headerEnd(proof)));
  const extra = extraOf(lines.length > 1 ? lines[1] : new Uint8Array());
  // docs/protocol.md §5: extra is JCS-canonical and equals the recomputed leaf data.
  if (!isCanonical(extra)) {
    fail("proof: extra is not JCS-canonical JSON (RFC 8785), so it is no leaf of this log");
  }
  if (!bytesEqual(extra, rec.leafData)) fail(leafMismatch(extra, rec));
  const match = INDEX_LINE.exec(lines.length > 2 ? latin1(lines[2]) : "");
  if (match === null) fail("proof: line 3 is not index <decimal> (tlog-proof §Format)");
  if (BigInt(match[1]) !== BigInt(rec.index)) {
    fail(`proof is for leaf index ${match[1]}, the record says index ${rec.index}`);
  }
  return [rec, `leaf data of dream ${rec.id} equals the proof's extra`];
}

/** record.json (docs/protocol.md §2): strict JSON with exactly the five fields, well typed. */
async function parseRecord(data) {
  let obj;
  try {
    obj = parseStrict(data, { maxBytes: MAX_RECORD_SIZE });
  } catch (err) {
    if (!(err instanceof JSONError)) throw err;
    const where = err.line === null ? "record" : `record line ${err.line}`;
    fail(
      `${where}: ${err.message}`,
      "give the dream's record.json, unchanged, as the site serves it",
    );
  }
  if (!isObject(obj)) fail("record: must be a JSON object");
  const unknown = Object.keys(obj).filter((k) => !RECORD_FIELDS.includes(k));
  if (unknown.length) {
    fail(`record: ${unknown.length} unknown field(s); want exactly ${RECORD_FIELDS.join(", ")}`);
  }
  const missing = RECORD_FIELDS.filter((k) => !(k in obj));
  if (missing.length) fail(`record: missing field(s) ${missing.join(", ")}`);
  if (obj.format !== RECORD_FORMAT) {
    fail(
      `record: /format is not ${RECORD_FORMAT}`,
      "this is not a dreampool record, or one of a version this client cannot read",
    );
  }
  const { id, index, salt, dream } = obj;
  if (typeof id !== "string" || !DREAM_ID.test(id))
    fail("record: /id must be 16 lowercase hex characters");
  if (typeof index !== "number" || !Number.isInteger(index) || index < 0) {
    fail("record: /index must be an integer >= 0");
  }
  if (typeof salt !== "string") fail(`record: /salt must be a b64url string of ${SALT_SIZE} bytes`);
  let saltBytes;
  try {
    saltBytes = b64urlDecode(salt);
  } catch (err) {
    fail(`record: /salt: ${err.message}`);
  }
  if (saltBytes.length !== SALT_SIZE) {
    fail(`record: /salt decodes to ${saltBytes.length} bytes, want ${SALT_SIZE}`);
  }
  if (!isObject(dream)) fail("record: /dream must be an object");
  let jcs;
  try {
    jcs = canonicalBytes({ dream, salt });
  } catch (err) {
    fail(`record: /dream has no JCS form: ${err.message}`);
  }
  // docs/protocol.md §2: commitment = hex(H(JCS({"dream", "salt"}))), the salt as written.
  const commitment = hex(await sha256(jcs));
  // docs/protocol.md §3: the dream leaf.
  const leafData = canonicalBytes({ v: 1, kind: "dream", id, commitment });
  return { id, index, dream, leafData };
}

function extraOf(line) {
  // docs/protocol.md §5 requires the optional tlog-proof extra line: it is the leaf data.
  const text = latin1(line);
  if (!text.startsWith("extra ")) fail("proof: line 2 is not extra <base64 of the leaf data>");
  try {
    return b64decode(text.slice(6));
  } catch {
    return fail("proof: extra is not canonical base64 (RFC 4648 §4)");
  }
}

/** Say how the logged leaf differs from the recomputed one, echoing only ids. */
function leafMismatch(extra, rec) {
  const logged = parseStrict(extra, { maxBytes: extra.length });
  const want = parseStrict(rec.leafData, { maxBytes: rec.leafData.length });
  if (!isObject(logged) || logged.kind !== "dream") {
    return "proof: extra is not a dream leaf, so the proof is not about a dream";
  }
  const names = [...new Set([...Object.keys(logged), ...Object.keys(want)])].sort();
  const differing = names.filter((k) => canonicalOrNull(logged[k]) !== canonicalOrNull(want[k]));
  if (differing.includes("id")) {
    const shown = typeof logged.id === "string" && DREAM_ID.test(logged.id) ? logged.id : "?";
    return `proof is for dream ${shown}, the record is dream ${rec.id}`;
  }
  if (differing.length === 1 && differing[0] === "commitment") {
    return `record of dream ${rec.id} does not hash to the logged commitment: its dream or salt differs from what was logged`;
  }
  return "proof: extra is not the leaf data recomputed from the record";
}

function canonicalOrNull(value) {
  return value === undefined ? null : new TextDecoder().decode(canonicalBytes(value));
}

// --- step 3 ---------------------------------------------------------------------------

async function checkInclusion(proof, rec, checkpoint) {
  // Steps 1 and 2 read the checkpoint, extra and index lines; what remains are the hashes.
  const parsed = parseTlogProof(proof);
  if (
    parsed.index !== BigInt(rec.index) ||
    parsed.extra === null ||
    !bytesEqual(parsed.extra, rec.leafData)
  ) {
    fail("proof: parses to another index or extra than step 2 read");
  }
  // RFC 9162 §2.1.3.2: the proof is only about leaves inside the tree.
  if (!(parsed.index < checkpoint.size)) {
    fail(
      `leaf index ${rec.index} is not inside the checkpoint's tree of size ${checkpoint.size} (want index < size)`,
      "the proof's checkpoint does not hold this leaf; download the proof again",
    );
  }
  // docs/protocol.md §3: leaf hash = H(0x00 || leaf data) (RFC 6962 §2.1).
  await verifyInclusion(
    await leafHash(rec.leafData),
    parsed.index,
    checkpoint.size,
    parsed.hashes,
    checkpoint.root,
  );
  return [
    null,
    `leaf ${rec.index} included in the tree of size ${checkpoint.size} (${parsed.hashes.length} proof hashes)`,
  ];
}

// --- step 4 ---------------------------------------------------------------------------

async function checkDream(rec) {
  const problems = validateDream(rec.dream);
  if (problems.length) {
    const more = problems.length > 1 ? ` (and ${problems.length - 1} more problem(s))` : "";
    fail(`record /dream: ${problems[0]}${more}`, STEP_HINTS[4]);
  }
  const size = canonicalBytes(rec.dream).length;
  if (size > MAX_DREAM_BYTES) {
    fail(
      `record /dream: is ${size} bytes as JCS, want at most ${MAX_DREAM_BYTES} (docs/protocol.md §1)`,
    );
  }
  const sig = rec.dream.sig;
  const publicKey = b64urlDecode(sig.publicKey);
  const signature = b64urlDecode(sig.value);
  // docs/protocol.md §1: signed bytes = JCS of exactly the present signed fields.
  const signed = Object.create(null);
  for (const k of SIGNED_FIELDS) if (k in rec.dream) signed[k] = rec.dream[k];
  try {
    await ed25519Verify(publicKey, canonicalBytes(signed), signature);
  } catch (err) {
    if (err instanceof VerificationError) {
      fail(
        `record /dream: /sig: ${err.message}`,
        "the dream was changed after signing, or signed with another key; report it to the pool's operators",
      );
    }
    throw err;
  }
  // docs/protocol.md §1: keyId = "sha256:" + first 16 hex of H(raw public key).
  const keyId = "sha256:" + hex(await sha256(publicKey)).slice(0, 16);
  if (sig.keyId !== keyId)
    fail(`record /dream: /sig/keyId: does not match the public key (want ${keyId})`);
  // docs/protocol.md §1: id = first 16 hex of H(raw signature).
  const id = hex(await sha256(signature)).slice(0, 16);
  if (id !== rec.id) {
    fail(
      `record /id ${rec.id} is not the dream's id ${id} (the first 16 hex of SHA-256 of its signature)`,
    );
  }
  const dream = {
    id,
    keyId,
    publicKey,
    author: rec.dream.author,
    title: rec.dream.title,
    body: rec.dream,
  };
  return [dream, `dream ${id} by ${rec.dream.author} verifies under key ${keyId}`];
}

// The docs/protocol.md §1 schema, as builder/formats/dream.py validates it: every broken rule, as
// "<pointer>: <rule>", never echoing a value. Lengths count code points.
const ENTRY_TYPES = [
  "fact",
  "decision",
  "preference",
  "lesson",
  "rule",
  "warning",
  "theory",
  "plan",
];
const CONFIDENCES = ["confirmed", "unconfirmed", "theory"];
const SIGNED_FIELDS = ["author", "title", "summary", "entries", "tags", "lineage", "consent"];
const TOP_FIELDS = [...SIGNED_FIELDS, "sig"];
const REQUIRED_TOP = ["author", "title", "entries", "consent", "sig"];
// Every text field follows docs/protocol.md §1.1, the same policy and tables as
// builder/formats/unicodepolicy.py (unicodepolicy.js is generated from them).
const KEY_ID_RE = /^sha256:[0-9a-f]{16}$/;
const DREAM_ID = /^[0-9a-f]{16}$/;

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof JsonFloat);
}

function kind(v) {
  if (v === null) return "null";
  if (typeof v === "boolean") return "a boolean";
  if (typeof v === "number") return "an integer";
  if (v instanceof JsonFloat) return "a number";
  if (typeof v === "string") return `a string of ${[...v].length} characters`;
  if (Array.isArray(v)) return `an array of ${v.length} items`;
  return "an object";
}

function escapePointer(name) {
  return name.replace(/~/g, "~0").replace(/\//g, "~1");
}

export function validateDream(obj) {
  const problems = [];
  const add = (pointer, rule) => problems.push(pointer ? `${pointer}: ${rule}` : rule);
  const unknown = (pointer, o, allowed) => {
    for (const name of Object.keys(o)) {
      if (!allowed.includes(name)) {
        const shown = name.length <= 40 && firstRefused(name) === null ? name : "…";
        add(
          `${pointer}/${escapePointer(shown)}`,
          `unknown field (allowed here: ${allowed.join(", ")})`,
        );
      }
    }
  };
  const required = (pointer, o, names) => {
    for (const name of names)
      if (!(name in o)) add(`${pointer}/${name}`, "is required but missing");
  };
  const string = (pointer, v, lo, hi, newline = false) => {
    if (typeof v !== "string") {
      add(pointer, `must be a string of ${lo}–${hi} characters, is ${kind(v)}`);
      return false;
    }
    const n = [...v].length;
    if (n < lo || n > hi) {
      add(pointer, `must be ${lo}–${hi} characters, is ${n}`);
      return false;
    }
    const bad = firstRefused(v, newline); // docs/protocol.md §1.1
    if (bad) {
      const what =
        bad.codePoint === 0x0a
          ? "a newline"
          : `U+${bad.codePoint.toString(16).toUpperCase().padStart(4, "0")}`;
      add(
        pointer,
        `holds ${what} at character ${bad.index}; text holds no control, format, invisible, private-use or unassigned character (docs/protocol.md §1.1, Unicode ${UNICODE_VERSION})${newline ? "" : " (newlines are allowed only in summary and entry text)"}`,
      );
      return false;
    }
    return true;
  };
  const choice = (pointer, v, allowed) => {
    if (typeof v !== "string" || !allowed.includes(v))
      add(pointer, `must be one of ${allowed.join(", ")}`);
  };
  const b64url = (pointer, v, size) => {
    if (typeof v !== "string") {
      add(pointer, `must be unpadded base64url of ${size} bytes, is ${kind(v)}`);
      return;
    }
    let raw;
    try {
      raw = b64urlDecode(v);
    } catch (err) {
      add(pointer, `${err.message} (${v.length} characters)`);
      return;
    }
    if (raw.length !== size) add(pointer, `must decode to ${size} bytes, decodes to ${raw.length}`);
  };

  if (!isObject(obj)) {
    add("", `must be a JSON object, is ${kind(obj)}`);
    return problems;
  }
  unknown("", obj, TOP_FIELDS);
  required("", obj, REQUIRED_TOP);
  if ("author" in obj) string("/author", obj.author, 1, 64);
  if ("title" in obj) string("/title", obj.title, 1, 120);
  if ("summary" in obj) string("/summary", obj.summary, 0, 800, true);
  if ("entries" in obj) {
    const entries = obj.entries;
    if (!Array.isArray(entries)) {
      add("/entries", `must be an array of 1–50 entries, is ${kind(entries)}`);
    } else {
      if (entries.length < 1 || entries.length > 50)
        add("/entries", `must hold 1–50 entries, holds ${entries.length}`);
      entries.slice(0, 50).forEach((entry, i) => {
        const p = `/entries/${i}`;
        if (!isObject(entry)) {
          add(p, `must be an object {text, type, confidence, source?}, is ${kind(entry)}`);
          return;
        }
        unknown(p, entry, ["text", "type", "confidence", "source"]);
        required(p, entry, ["text", "type", "confidence"]);
        if ("text" in entry) string(`${p}/text`, entry.text, 1, 300, true);
        if ("type" in entry) choice(`${p}/type`, entry.type, ENTRY_TYPES);
        if ("confidence" in entry) choice(`${p}/confidence`, entry.confidence, CONFIDENCES);
        if ("source" in entry) string(`${p}/source`, entry.source, 0, 300);
      });
    }
  }
  if ("tags" in obj) {
    const tags = obj.tags;
    if (!Array.isArray(tags)) {
      add("/tags", `must be an array of 0–8 strings, is ${kind(tags)}`);
    } else {
      if (tags.length > 8) add("/tags", `must hold 0–8 tags, holds ${tags.length}`);
      const seen = new Set();
      tags.slice(0, 8).forEach((tag, i) => {
        if (string(`/tags/${i}`, tag, 1, 32) && seen.has(tag))
          add(`/tags/${i}`, "repeats an earlier tag");
        if (typeof tag === "string") seen.add(tag);
      });
    }
  }
  if ("lineage" in obj) {
    const lineage = obj.lineage;
    if (!isObject(lineage)) {
      add("/lineage", `must be an object {parent?, generation}, is ${kind(lineage)}`);
    } else {
      unknown("/lineage", lineage, ["parent", "generation"]);
      required("/lineage", lineage, ["generation"]);
      if ("parent" in lineage) string("/lineage/parent", lineage.parent, 1, 64);
      if ("generation" in lineage) {
        const gen = lineage.generation;
        // A JsonFloat (1.0) is no integer here, as in Python.
        if (typeof gen !== "number" || !Number.isInteger(gen) || gen < 0 || gen > 1000) {
          add("/lineage/generation", `must be an integer 0–1000, is ${kind(gen)}`);
        }
      }
    }
  }
  if ("consent" in obj) {
    const consent = obj.consent;
    if (!isObject(consent)) {
      add("/consent", `must be an object {share, derivatives, anonymize}, is ${kind(consent)}`);
    } else {
      unknown("/consent", consent, ["share", "derivatives", "anonymize"]);
      required("/consent", consent, ["share", "anonymize"]);
      if ("share" in consent && consent.share !== true) {
        add("/consent/share", "must be true: only dreams consented for sharing enter a pool");
      }
      for (const name of ["derivatives", "anonymize"]) {
        if (name in consent && typeof consent[name] !== "boolean") {
          add(`/consent/${name}`, `must be true or false, is ${kind(consent[name])}`);
        }
      }
    }
  }
  if ("sig" in obj) {
    const sig = obj.sig;
    if (!isObject(sig)) {
      add("/sig", `must be an object {alg, keyId, publicKey, value}, is ${kind(sig)}`);
    } else {
      unknown("/sig", sig, ["alg", "keyId", "publicKey", "value"]);
      required("/sig", sig, ["alg", "keyId", "publicKey", "value"]);
      if ("alg" in sig && sig.alg !== "ed25519") add("/sig/alg", 'must be "ed25519"');
      if ("keyId" in sig && !(typeof sig.keyId === "string" && KEY_ID_RE.test(sig.keyId))) {
        add("/sig/keyId", 'must be "sha256:" followed by 16 lowercase hex characters');
      }
      if ("publicKey" in sig) b64url("/sig/publicKey", sig.publicKey, 32);
      if ("value" in sig) b64url("/sig/value", sig.value, 64);
    }
  }
  return problems;
}

// --- step 5 ---------------------------------------------------------------------------

async function checkConsistency(policy, checkpoint, newer, consistency) {
  if (newer === null || consistency === null) {
    fail("step 5 needs both a newer checkpoint and the consistency proof to it");
  }
  let opened;
  try {
    opened = await verifyCheckpoint(policy, newer);
  } catch (err) {
    if (err instanceof VerificationError) fail(`newer checkpoint: ${err.message}`, err.hint);
    throw err;
  }
  const current = opened.checkpoint;
  if (current.origin !== checkpoint.origin) {
    fail(
      `newer checkpoint is of log ${current.origin}, the proof's of ${checkpoint.origin}`,
      "give a checkpoint of the log the proof is from",
    );
  }
  if (current.size < checkpoint.size) {
    fail(
      `newer checkpoint has size ${current.size}, smaller than the proof's ${checkpoint.size}`,
      "give the log's current checkpoint; a log never shrinks",
    );
  }
  const hashes = parseConsistencyProof(consistency);
  // RFC 9162 §2.1.4.2; equal sizes need an empty proof and equal roots.
  await verifyConsistency(checkpoint.size, current.size, checkpoint.root, current.root, hashes);
  const detail =
    current.size === checkpoint.size
      ? `same checkpoint: the proof's checkpoint of size ${checkpoint.size} is the log's current one`
      : `checkpoint of size ${checkpoint.size} is a prefix of the newer one of size ${current.size} (${hashes.length} proof hashes)`;
  return [current, detail];
}
