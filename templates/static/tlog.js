// dreampool tlog.js: the transparency-log formats a browser needs to check a proof,
// each the twin of a builder/ module and as strict:
//
//   signed notes  c2sp.org/signed-note@v1.0.0                         builder/formats/note.py
//   checkpoints   c2sp.org/tlog-checkpoint, tlog-cosignature@v1.0.1  builder/formats/checkpoint.py
//   policies      c2sp.org/tlog-policy                               builder/formats/policy.py
//   proofs        c2sp.org/tlog-proof@v1                             builder/formats/tlogproof.py
//
// A signed note is text, a blank line, then signature lines "— <key name>
// <base64(4-byte key ID || signature)>". A checkpoint is the text of a note:
//
//     example.org/dreams          origin (the log key's name, docs/protocol.md §4)
//     5                           tree size, decimal without leading zeros
//     rra8/idLcKFPsGel5VeCZNsPqbUa9eC6FZFY8yngbnc=    RFC 6962 root, base64
//
//     — example.org/dreams <base64 of key ID and Ed25519 signature>
//
// Parsers are strict and bounded: one bad line fails the whole file, never skipped;
// base64 must be canonical so no two strings carry the same bytes. Sizes are BigInts.
// Messages never echo a value that could be a secret (a private key pasted by mistake).

import { decodeUtf8, encodeUtf8, hasLoneSurrogate } from "./jcs.js";
import {
  HASH_SIZE,
  PUBLIC_KEY_SIZE,
  SIGNATURE_SIZE,
  VerificationError,
  b64decode,
  bytesEqual,
  checkPublicKey,
  concat,
  ed25519Verify,
  fail,
  hex,
  latin1,
  sha256,
} from "./crypto.js";

export { VerificationError };

// --- signed notes (c2sp.org/signed-note@v1.0.0) ---------------------------------------------

export const SIG_ED25519 = 0x01;
export const SIG_COSIGNATURE_V1 = 0x04;
export const MAX_NOTE_SIZE = 1 << 20;
export const MAX_SIGNATURES = 100;
const MAX_KEY_SIZE = 4096;
const KEY_ID_SIZE = 4;
const SIG_PREFIX = "\u2014 "; // em dash, space
const CONTROL = /[\x00-\x09\x0b-\x1f]/; // signed-note §Format: no control but newline
const ANY_CONTROL = /[\x00-\x1f]/;
const KEY_ID_HEX = /^[0-9a-f]{8}$/;
// Unicode White_Space, the set Go's unicode.IsSpace reports.
const UNICODE_SPACE = /[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

/** A valid key name: non-empty, no Unicode space, no "+", no control character. */
export function isValidName(name) {
  return (
    name.length > 0 &&
    !name.includes("+") &&
    !ANY_CONTROL.test(name) &&
    !UNICODE_SPACE.test(name) &&
    !hasLoneSurrogate(name)
  );
}

/** SHA-256(key name || 0x0A || signature type || public key)[:4] (signed-note §Signatures). */
export async function keyId(name, sigType, publicKey) {
  const material = concat(encodeUtf8(name), Uint8Array.of(0x0a, sigType), publicKey);
  return (await sha256(material)).subarray(0, KEY_ID_SIZE);
}

/**
 * Split a note into text and signatures, checking its syntax and verifying nothing:
 * the text must not be trusted until openNote has verified it.
 */
export function splitNote(bytes) {
  if (bytes.length > MAX_NOTE_SIZE)
    fail(`note is ${bytes.length} bytes, want at most ${MAX_NOTE_SIZE}`);
  let msg;
  try {
    msg = decodeUtf8(bytes);
  } catch {
    fail("note is not valid UTF-8");
  }
  const bad = CONTROL.exec(msg);
  if (bad) fail(`note holds an ASCII control character at character ${bad.index}`);
  // The text ends at the last blank line; it keeps its final newline.
  const split = msg.lastIndexOf("\n\n");
  if (split < 0) fail("note has no blank line before its signatures");
  const text = msg.slice(0, split + 1);
  const block = msg.slice(split + 2);
  if (!block || !block.endsWith("\n")) {
    fail("note has no signature lines, or its last line has no newline");
  }
  const lines = block.slice(0, -1).split("\n");
  // Bounded work, like Go's numSig > 100.
  if (lines.length > MAX_SIGNATURES) {
    fail(`note has ${lines.length} signature lines, want at most ${MAX_SIGNATURES}`);
  }
  const signatures = lines.map((line, i) => {
    try {
      return parseSignatureLine(line);
    } catch (err) {
      return fail(`signature line ${i + 1}: ${err.message}`);
    }
  });
  return { text, signatures };
}

function parseSignatureLine(line) {
  if (!line.startsWith(SIG_PREFIX))
    fail("signature line does not start with an em dash and a space");
  const rest = line.slice(SIG_PREFIX.length);
  const space = rest.indexOf(" ");
  if (space < 0) fail("signature line has no space between key name and signature");
  const name = rest.slice(0, space);
  if (!isValidName(name)) fail("signature line has an invalid key name");
  let raw;
  try {
    raw = b64decode(rest.slice(space + 1));
  } catch {
    fail("signature line: signature is not canonical base64");
  }
  // 4 bytes of key ID and a non-empty signature, as Go's len(sig) < 5 check.
  if (raw.length <= KEY_ID_SIZE) {
    fail(`signature line holds ${raw.length} bytes, want more than ${KEY_ID_SIZE}`);
  }
  return { name, keyId: raw.subarray(0, KEY_ID_SIZE), signature: raw.subarray(KEY_ID_SIZE) };
}

function keyTag(name, id) {
  return `${name}+${hex(id)}`;
}

/**
 * Open a note: every signature by a known verifier must verify, the others are
 * ignored (signed-note: "MUST ignore signatures from unknown keys"), and at least
 * one known key must have signed. Returns { text, signatures (verified) }.
 */
export async function openNote(bytes, verifiers) {
  const known = new Map();
  for (const v of verifiers) {
    const tag = keyTag(v.name, v.keyId);
    const prior = known.get(tag);
    if (prior !== undefined && prior !== v) {
      fail(
        `two different verifier keys share the name and key ID ${tag}`,
        "the key list is ambiguous; remove one of the two keys",
      );
    }
    known.set(tag, v);
  }
  const { text, signatures } = splitNote(bytes);
  const textBytes = encodeUtf8(text);
  const verified = [];
  for (const sig of signatures) {
    const tag = keyTag(sig.name, sig.keyId);
    const verifier = known.get(tag);
    if (verifier === undefined) continue;
    // "if the key name and ID match a known key, verifiers MUST verify".
    try {
      await verifier.verify(textBytes, sig.signature);
    } catch (err) {
      if (!(err instanceof VerificationError)) throw err;
      fail(
        `note signature by ${tag} does not verify: ${err.message}`,
        "the note was altered or signed by another key; do not use its text",
      );
    }
    if (
      !verified.some(
        (s) =>
          s.name === sig.name &&
          bytesEqual(s.keyId, sig.keyId) &&
          bytesEqual(s.signature, sig.signature),
      )
    ) {
      verified.push(sig);
    }
  }
  if (verified.length === 0) {
    fail(
      "note has no signature by a known key",
      "check that the verifier key is the one that signed this note",
    );
  }
  return { text, signatures: verified };
}

/** Split a vkey into {name, keyId, sigType, publicKey}, checking its key ID. */
export async function decodeVerifierKey(vkey) {
  if (vkey.startsWith("PRIVATE+KEY+")) {
    fail(
      "verifier key: this is a private key, not a verifier key",
      "give the verifier key (<name>+<hash>+<key>); keep the private key secret",
    );
  }
  if (vkey.length > MAX_KEY_SIZE)
    fail(`verifier key is ${vkey.length} characters, want at most ${MAX_KEY_SIZE}`);
  const first = vkey.indexOf("+");
  const second = first < 0 ? -1 : vkey.indexOf("+", first + 1);
  if (first < 0 || second < 0) fail("verifier key is malformed: want <name>+<key ID>+<base64 key>");
  const name = vkey.slice(0, first);
  const idHex = vkey.slice(first + 1, second);
  if (!isValidName(name))
    fail(
      "verifier key name is invalid: want non-empty UTF-8 with no space, '+' or control character",
    );
  if (!KEY_ID_HEX.test(idHex)) fail("verifier key: key ID is not 8 lowercase hex digits");
  let raw;
  try {
    raw = b64decode(vkey.slice(second + 1));
  } catch {
    fail("verifier key: key is not canonical base64");
  }
  if (raw.length < 2) fail("verifier key: key is too short to hold a type and a public key");
  const sigType = raw[0];
  const publicKey = raw.subarray(1);
  const want = await keyId(name, sigType, publicKey);
  if (hex(want) !== idHex) {
    fail(
      `verifier key: key ID ${idHex} does not match its name and key (want ${hex(want)})`,
      "the key ID is SHA-256(name || 0x0A || type || public key)[:4]",
    );
  }
  return { name, keyId: want, sigType, publicKey };
}

/** An Ed25519 note verifier (type 0x01): a log key. */
export async function parseLogKey(vkey) {
  const k = await decodeVerifierKey(vkey);
  if (k.sigType !== SIG_ED25519) {
    fail(
      `verifier key has signature type 0x${k.sigType.toString(16).padStart(2, "0")}, want 0x01 (Ed25519)`,
    );
  }
  if (k.publicKey.length !== PUBLIC_KEY_SIZE) {
    fail(`verifier key holds ${k.publicKey.length} key bytes, want ${PUBLIC_KEY_SIZE}`);
  }
  checkPublicKey(k.publicKey);
  return {
    ...k,
    vkey,
    verify: (text, signature) => ed25519Verify(k.publicKey, text, signature),
  };
}

// --- checkpoints and cosignatures ----------------------------------------------------------

export const MAX_TREE_SIZE = (1n << 63n) - 1n;
const DECIMAL = /^(?:0|[1-9][0-9]{0,18})$/;
const COSIGNATURE_SIZE = 8 + SIGNATURE_SIZE;

/** Parse checkpoint note text strictly (tlog-checkpoint §Note text). */
export function parseCheckpoint(text) {
  if (text.length > MAX_NOTE_SIZE)
    fail(`checkpoint is ${text.length} characters, want at most ${MAX_NOTE_SIZE}`);
  if (!text.endsWith("\n")) fail("checkpoint text must end in a newline");
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3)
    fail(`checkpoint has ${lines.length} lines, want at least 3 (origin, size, root)`);
  lines.forEach((line, i) => {
    if (!line) fail(`checkpoint line ${i + 1} is empty, want non-empty lines`);
    if (ANY_CONTROL.test(line)) fail(`checkpoint line ${i + 1} holds a control character`);
  });
  const [origin, sizeText, rootText, ...extensions] = lines;
  if (!DECIMAL.test(sizeText)) {
    fail("checkpoint line 2: tree size is not a decimal with no leading zero, below 2^63");
  }
  const size = BigInt(sizeText);
  if (size > MAX_TREE_SIZE) fail("checkpoint line 2: tree size is 2^63 or more");
  let root;
  try {
    root = b64decode(rootText);
  } catch {
    fail("checkpoint line 3: root hash is not canonical base64");
  }
  if (root.length !== 32) fail(`checkpoint line 3: root hash is ${root.length} bytes, want 32`);
  return { origin, size, root, extensions, text };
}

/** A witness's cosignature key (type 0x04, c2sp.org/tlog-cosignature). */
export async function parseWitnessKey(vkey) {
  const k = await decodeVerifierKey(vkey);
  if (k.sigType !== SIG_COSIGNATURE_V1) {
    fail(
      `witness key has signature type 0x${k.sigType.toString(16).padStart(2, "0")}, want 0x04 (cosignature/v1)`,
    );
  }
  if (k.publicKey.length !== PUBLIC_KEY_SIZE)
    fail(`witness key holds ${k.publicKey.length} key bytes, want 32`);
  checkPublicKey(k.publicKey);
  return {
    ...k,
    vkey,
    // tlog-cosignature §Ed25519 signed message: a header line, the time line, the note text.
    async verify(text, signature) {
      if (signature.length !== COSIGNATURE_SIZE) {
        fail(
          `cosignature is ${signature.length} bytes, want ${COSIGNATURE_SIZE} (timestamp and Ed25519 signature)`,
        );
      }
      let timestamp = 0n;
      for (const b of signature.subarray(0, 8)) timestamp = (timestamp << 8n) | BigInt(b);
      // tlog-cosignature §Format: "It MUST NOT exceed 2^63 - 1".
      if (timestamp > MAX_TREE_SIZE) fail("cosignature timestamp exceeds 2^63 - 1");
      const message = concat(encodeUtf8(`cosignature/v1\ntime ${timestamp}\n`), text);
      await ed25519Verify(k.publicKey, message, signature.subarray(8));
    },
  };
}

/**
 * Verify a signed checkpoint under a log key and any witness keys: every signature by
 * a known key verifies, the log key signed, and the origin is the log key's name.
 * Returns { checkpoint, witnesses: key names of the witnesses that cosigned }.
 */
export async function openCheckpoint(bytes, logKey, witnessKeys = []) {
  let note;
  try {
    note = await openNote(bytes, [logKey, ...witnessKeys]);
  } catch (err) {
    if (err instanceof VerificationError) fail(`checkpoint: ${err.message}`, err.hint);
    throw err;
  }
  const logTag = keyTag(logKey.name, logKey.keyId);
  if (!note.signatures.some((s) => keyTag(s.name, s.keyId) === logTag)) {
    fail(
      `checkpoint is not signed by the log key ${logTag}`,
      "check the policy's log key; the checkpoint may come from another log",
    );
  }
  const checkpoint = parseCheckpoint(note.text);
  if (checkpoint.origin !== logKey.name) {
    fail(
      "checkpoint origin does not equal the log key name (docs/protocol.md §4)",
      "the checkpoint belongs to another log",
    );
  }
  const witnesses = [];
  for (const s of note.signatures) {
    if (keyTag(s.name, s.keyId) !== logTag && !witnesses.includes(s.name)) witnesses.push(s.name);
  }
  return { checkpoint, witnesses };
}

// --- policies (c2sp.org/tlog-policy) ------------------------------------------------------

export const MAX_POLICY_SIZE = 64 * 1024;
const MAX_ENTRIES = 256;
const NONE = "none";
const BAD_OCTET = /[\x00-\x08\x0a-\x1f\x7f]/; // only tab, newline, 0x20-0x7e, 0x80-0xff
const BAD_TOKEN = /[\x00-\x20\x7f]/;
const GROUP_K = /^[1-9][0-9]{0,8}$/;

function checkToken(value, what) {
  if (!value || BAD_TOKEN.test(value) || value.startsWith("#")) {
    fail(`${what} must be non-empty, hold no whitespace and not start with #`);
  }
}

/**
 * Parse a tlog-policy file strictly; every refusal names its line. Returns
 * { logs: [{key, url}], witnesses: [{name, key, url}], groups: [{name, required, members}], quorum }.
 */
export async function parsePolicy(bytes) {
  if (bytes.length > MAX_POLICY_SIZE)
    fail(`policy is ${bytes.length} bytes, want at most ${MAX_POLICY_SIZE}`);
  if (bytes.length && bytes[bytes.length - 1] !== 0x0a) {
    fail(
      "policy: the last line has no newline (tlog-policy §Structure)",
      "end the file with a newline",
    );
  }
  const policy = { logs: [], witnesses: [], groups: [], quorum: null };
  const names = new Set(); // witnesses and groups share one namespace
  const logKeys = new Set();
  const witnessKeys = new Set();
  const witnessKeyNames = new Set();
  const counts = { log: 0, witness: 0, group: 0 };
  const count = (kind) => {
    counts[kind] += 1;
    if (counts[kind] > MAX_ENTRIES) fail(`more than ${MAX_ENTRIES} ${kind} lines`);
  };
  const define = (name) => {
    checkToken(name, "name");
    if (name === NONE) fail("the name none is predefined");
    if (names.has(name)) fail("name is already defined (witnesses and groups share names)");
    names.add(name);
  };
  let start = 0;
  let number = 0;
  while (start < bytes.length) {
    const end = bytes.indexOf(0x0a, start);
    const lineBytes = bytes.subarray(start, end);
    start = end + 1;
    number += 1;
    try {
      const bad = lineBytes.findIndex((b) => BAD_OCTET.test(String.fromCharCode(b)));
      if (bad >= 0) {
        fail(
          `octet 0x${lineBytes[bad].toString(16).padStart(2, "0")} is not allowed (only tab, newline, 0x20-0x7e and 0x80-0xff)`,
        );
      }
      let line;
      try {
        line = decodeUtf8(lineBytes);
      } catch {
        fail("line is not valid UTF-8");
      }
      const items = line.split(/[ \t]+/).filter(Boolean);
      if (!items.length || items[0].startsWith("#")) continue;
      const [directive, ...args] = items;
      if (directive === "log") {
        if (args.length !== 1 && args.length !== 2) fail("want log <vkey> [<url>]");
        const key = await parseLogKey(args[0]);
        count("log");
        if (args[1] !== undefined) checkToken(args[1], "url");
        // tlog-policy §Defining a log: "Duplicate logs ... are not allowed".
        if (logKeys.has(hex(key.publicKey)))
          fail("duplicate log: another log line has the same public key");
        logKeys.add(hex(key.publicKey));
        policy.logs.push({ key, url: args[1] ?? null });
      } else if (directive === "witness") {
        if (args.length !== 2 && args.length !== 3) fail("want witness <name> <vkey> [<url>]");
        const key = await parseWitnessKey(args[1]);
        count("witness");
        if (args[2] !== undefined) checkToken(args[2], "url");
        if (witnessKeys.has(hex(key.publicKey)))
          fail("duplicate witness: another witness line has the same public key");
        // Quorum counts witnesses by the key names of verified cosignatures, so a
        // shared name would make one cosignature count twice.
        if (witnessKeyNames.has(key.name)) {
          fail("two witness keys share a key name, so their cosignatures cannot be told apart");
        }
        define(args[0]);
        witnessKeys.add(hex(key.publicKey));
        witnessKeyNames.add(key.name);
        policy.witnesses.push({ name: args[0], key, url: args[2] ?? null });
      } else if (directive === "group") {
        if (args.length < 3)
          fail("want group <name> all|any|<k> <name>... with at least one member");
        const [name, k, ...members] = args;
        let threshold;
        if (k === "all" || k === "any") threshold = k;
        else if (GROUP_K.test(k)) threshold = Number(k);
        else fail("group threshold must be all, any or a decimal k >= 1");
        count("group");
        if (new Set(members).size !== members.length) fail("a group lists a member twice");
        for (const m of members) {
          if (m === NONE) fail("none is not a valid group member");
          if (!names.has(m))
            fail("group member is not a witness or group defined on an earlier line");
        }
        if (typeof threshold === "number" && !(threshold >= 1 && threshold <= members.length)) {
          fail(`group threshold ${threshold} must be between 1 and ${members.length}, its members`);
        }
        define(name);
        const required = threshold === "all" ? members.length : threshold === "any" ? 1 : threshold;
        policy.groups.push({ name, required, members });
      } else if (directive === "quorum") {
        if (args.length !== 1) fail("want quorum <name>");
        if (policy.quorum !== null) fail("a policy has exactly one quorum line");
        if (args[0] !== NONE && !names.has(args[0])) {
          fail(
            "quorum names no witness or group defined on an earlier line",
            "use quorum none to require no cosignature",
          );
        }
        policy.quorum = args[0];
      } else {
        fail("unknown directive, want log, witness, group or quorum", "comments start with #");
      }
    } catch (err) {
      if (err instanceof VerificationError) fail(`policy line ${number}: ${err.message}`, err.hint);
      throw err;
    }
  }
  if (policy.quorum === null) {
    fail(
      "policy: no quorum line (a policy must have exactly one)",
      "add quorum none when no witness is required",
    );
  }
  return policy;
}

/** Throw unless the witnesses that cosigned (verified key names) meet the policy's quorum. */
export function checkQuorum(policy, cosignedNames) {
  if (policy.quorum === NONE) return;
  const cosigned = new Set(cosignedNames);
  const witnessed = new Map();
  for (const w of policy.witnesses) witnessed.set(w.name, cosigned.has(w.key.name));
  // Groups only name earlier definitions, so one pass in file order suffices.
  for (const g of policy.groups) {
    witnessed.set(g.name, g.members.filter((m) => witnessed.get(m)).length >= g.required);
  }
  if (!witnessed.get(policy.quorum)) {
    const n = policy.witnesses.filter((w) => witnessed.get(w.name)).length;
    throw new VerificationError(
      `witness quorum ${policy.quorum} is not met: ${n} of ${policy.witnesses.length} policy witnesses cosigned the checkpoint`,
      { step: 1, hint: "fetch a checkpoint with more cosignatures, or wait for the witnesses" },
    );
  }
}

/**
 * docs/protocol.md §5 step 1: a checkpoint signed by a log of the policy whose name is its
 * origin, quorum met. Returns { checkpoint, witnesses }.
 */
export async function verifyCheckpoint(policy, bytes) {
  // The unverified origin only selects which log key to try.
  const { text, signatures } = splitNote(bytes);
  const origin = parseCheckpoint(text).origin;
  const signed = new Set(signatures.map((s) => keyTag(s.name, s.keyId)));
  const candidates = policy.logs.filter(
    (l) => l.key.name === origin && signed.has(keyTag(l.key.name, l.key.keyId)),
  );
  if (!candidates.length) {
    fail(
      "checkpoint carries no signature by a log of the policy with its origin",
      "the checkpoint comes from a log this policy does not trust",
    );
  }
  const opened = await openCheckpoint(
    bytes,
    candidates[0].key,
    policy.witnesses.map((w) => w.key),
  );
  checkQuorum(policy, opened.witnesses);
  return opened;
}

// --- tlog-proof (c2sp.org/tlog-proof@v1) -----------------------------------------------------

export const TLOG_PROOF_HEADER = "c2sp.org/tlog-proof@v1";
export const MAX_TLOG_PROOF_SIZE = MAX_NOTE_SIZE + 96 * 1024;
const MAX_PROOF_HASHES = 63;
const MAX_EXTRA_SIZE = 65535;

/**
 * Parse a tlog-proof file strictly: header, optional extra, index, hashes, an empty
 * line, then the checkpoint note verbatim. Returns { index (BigInt), extra, hashes, checkpoint }.
 */
export function parseTlogProof(bytes) {
  if (bytes.length > MAX_TLOG_PROOF_SIZE) {
    fail(`tlog-proof is ${bytes.length} bytes, want at most ${MAX_TLOG_PROOF_SIZE}`);
  }
  let pos = 0;
  let number = 0;
  const nextLine = () => {
    const end = bytes.indexOf(0x0a, pos);
    if (end < 0) {
      fail(
        `tlog-proof line ${number + 1}: missing, or has no newline (want header lines, an empty line, then the checkpoint)`,
      );
    }
    const line = bytes.subarray(pos, end);
    pos = end + 1;
    number += 1;
    return line;
  };
  // "The first line MUST be the string c2sp.org/tlog-proof@v1".
  if (latin1(nextLine()) !== TLOG_PROOF_HEADER) {
    fail(
      "tlog-proof line 1: want the header c2sp.org/tlog-proof@v1",
      "this file is not a tlog-proof, or another version of the format",
    );
  }
  // "The second line MAY start with the string extra followed by a space".
  let line = latin1(nextLine());
  let extra = null;
  if (line.startsWith("extra ")) {
    try {
      extra = b64decode(line.slice(6));
    } catch {
      fail(`tlog-proof line ${number}: extra data is not canonical base64`);
    }
    if (!(extra.length > 0 && extra.length <= MAX_EXTRA_SIZE)) {
      fail(
        `tlog-proof line ${number}: extra data is ${extra.length} bytes, want 1 to ${MAX_EXTRA_SIZE}`,
      );
    }
    line = latin1(nextLine());
  }
  // "The next line MUST start with the string index followed by a space".
  if (!line.startsWith("index ")) fail(`tlog-proof line ${number}: want index <decimal>`);
  const indexText = line.slice(6);
  if (!DECIMAL.test(indexText) || BigInt(indexText) > MAX_TREE_SIZE) {
    fail(`tlog-proof line ${number}: index is not a decimal with no leading zero, below 2^63`);
  }
  const index = BigInt(indexText);
  // "The next zero or more non-empty lines are the base64-encoded Merkle inclusion proof".
  const hashes = [];
  for (;;) {
    const raw = nextLine();
    if (raw.length === 0) break;
    if (hashes.length === MAX_PROOF_HASHES)
      fail(`tlog-proof line ${number}: more than ${MAX_PROOF_HASHES} proof hashes`);
    let h;
    try {
      h = b64decode(latin1(raw));
    } catch {
      fail(`tlog-proof line ${number}: proof hash is not canonical base64`);
    }
    if (h.length !== HASH_SIZE)
      fail(`tlog-proof line ${number}: proof hash is ${h.length} bytes, want ${HASH_SIZE}`);
    hashes.push(h);
  }
  // "After the inclusion proof lines and an empty line, the checkpoint ... verbatim".
  const checkpoint = bytes.subarray(pos);
  try {
    parseCheckpoint(splitNote(checkpoint).text);
  } catch (err) {
    if (err instanceof VerificationError) fail(`tlog-proof checkpoint: ${err.message}`, err.hint);
    throw err;
  }
  return { index, extra, hashes, checkpoint };
}
