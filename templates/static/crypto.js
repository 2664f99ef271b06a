// dreampool crypto.js: bytes, canonical base64 and the two primitives the verifier
// needs, from WebCrypto: SHA-256, and Ed25519 verification with the refusals
// docs/protocol.md §1 adds (builder/formats/b64.py and builder/formats/ed25519.py are the Python twins).
//
// WebCrypto, like plain OpenSSL, accepts an Ed25519 public key of small order (with
// which one signature verifies every message), an R of small order (R = the identity,
// S = k·s, which libsodium refuses) and may accept a non-canonical S; all are refused
// here before WebCrypto sees them. A browser without Ed25519 in WebCrypto
// raises CryptoUnavailableError, which is no property of the input: the page says so
// and points to `dreampool verify-proof`.
//
// One error family for every module of the verifier: VerificationError, with the
// docs/protocol.md §5 step once it is known and a hint. A verify function throws it and
// returns nothing useful: there is no boolean to forget to check.

// --- errors -------------------------------------------------------------------------

/** A check failed or an input is malformed; step is set once a §5 step is known. */
export class VerificationError extends Error {
  constructor(message, { step = null, hint = null } = {}) {
    super(message);
    this.name = "VerificationError";
    this.step = step;
    this.hint = hint;
  }
}

/** This browser cannot check Ed25519 signatures at all (not a property of the input). */
export class CryptoUnavailableError extends Error {
  constructor(message) {
    super(message);
    this.name = "CryptoUnavailableError";
    this.hint =
      "verify on your own machine instead: dreampool verify-proof proof.tlog-proof " +
      "--record record.json --policy policy";
  }
}

export function fail(message, hint = null) {
  throw new VerificationError(message, { hint });
}

// --- bytes and encodings ---------------------------------------------------------------

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_INDEX = new Map([...B64].map((c, i) => [c, i]));
const B64_PADDED = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const B64URL = /^[A-Za-z0-9_-]*$/;

export function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Standard base64 with padding (RFC 4648 §4). */
export function b64encode(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
    out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : "=";
    out += i + 2 < bytes.length ? B64[n & 63] : "=";
  }
  return out;
}

/** Decode canonical padded base64 (RFC 4648 §4); throws Error for any other spelling. */
export function b64decode(text) {
  if (!B64_PADDED.test(text)) throw new Error("not padded standard base64 (RFC 4648 §4)");
  const clean = text.replace(/=+$/, "");
  const out = new Uint8Array(Math.floor((clean.length * 3) / 4));
  let bits = 0;
  let acc = 0;
  let at = 0;
  for (const c of clean) {
    acc = (acc << 6) | B64_INDEX.get(c);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[at++] = (acc >> bits) & 0xff;
    }
  }
  // Re-encoding refuses non-zero unused bits: exactly one string decodes to given bytes.
  if (b64encode(out) !== text) throw new Error("non-canonical base64 (unused bits set)");
  return out;
}

/** Decode canonical unpadded base64url (RFC 4648 §5). */
export function b64urlDecode(text) {
  if (!B64URL.test(text) || text.length % 4 === 1) {
    throw new Error("not unpadded URL-safe base64 (RFC 4648 §5)");
  }
  const std = text.replace(/-/g, "+").replace(/_/g, "/");
  const out = b64decodeLoose(std + "=".repeat((4 - (std.length % 4)) % 4));
  if (b64urlEncode(out) !== text) throw new Error("non-canonical base64url (unused bits set)");
  return out;
}

function b64decodeLoose(padded) {
  try {
    return b64decode(padded);
  } catch {
    throw new Error("non-canonical base64url (unused bits set)");
  }
}

export function b64urlEncode(bytes) {
  return b64encode(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Bytes as a string of code points 0-255, for matching ASCII patterns against bytes. */
export function latin1(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    out += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return out;
}

// --- SHA-256 and Ed25519 ------------------------------------------------------------------

function subtle() {
  if (!globalThis.crypto || !globalThis.crypto.subtle) {
    throw new CryptoUnavailableError(
      "this page has no WebCrypto (browsers offer it only on HTTPS and localhost pages)",
    );
  }
  return globalThis.crypto.subtle;
}

export async function sha256(bytes) {
  return new Uint8Array(await subtle().digest("SHA-256", bytes));
}

// RFC 8032 §5.1: the field prime p and the group order L.
const P = 2n ** 255n - 19n;
const L = 2n ** 252n + 27742317777372353535851937790883648493n;
// The y coordinates of the 8 points of small order: identity (1), order 2 (p-1),
// order 4 (0) and order 8 (±y8), as builder/formats/ed25519.py lists them.
const Y8 = leInt(
  Uint8Array.from(
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05".match(/../g),
    (h) => parseInt(h, 16),
  ),
);
const SMALL_ORDER_Y = new Set([1n, P - 1n, 0n, Y8, P - Y8]);
export const PUBLIC_KEY_SIZE = 32;
export const HASH_SIZE = 32;
export const SIGNATURE_SIZE = 64;

function leInt(bytes) {
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(bytes[i]);
  return n;
}

/** Refuse a public key that is the wrong size, non-canonical or of small order. */
export function checkPublicKey(publicKey) {
  if (publicKey.length !== PUBLIC_KEY_SIZE) {
    fail(`public key is ${publicKey.length} bytes, want ${PUBLIC_KEY_SIZE}`);
  }
  const y = leInt(publicKey) & ((1n << 255n) - 1n);
  if (y >= P) fail("public key is not a canonical point encoding (y >= p)");
  // docs/protocol.md §1: with a key of small order one signature verifies every message,
  // and WebCrypto, like plain OpenSSL, accepts such keys.
  if (SMALL_ORDER_Y.has(y)) {
    fail(
      "public key is a point of small order, with which one signature verifies every message (docs/protocol.md §1)",
    );
  }
}

const keyCache = new Map();
let ed25519Support = null;

/** Throw CryptoUnavailableError unless WebCrypto here verifies Ed25519. */
export async function requireEd25519() {
  if (ed25519Support === null) {
    ed25519Support = (async () => {
      try {
        // RFC 8032 §7.1 TEST 1's public key.
        const pk = Uint8Array.from(
          "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a".match(/../g),
          (h) => parseInt(h, 16),
        );
        await subtle().importKey("raw", pk, { name: "Ed25519" }, false, ["verify"]);
        return true;
      } catch (err) {
        if (err instanceof CryptoUnavailableError) throw err;
        return false;
      }
    })();
  }
  if (!(await ed25519Support)) {
    throw new CryptoUnavailableError("this browser's WebCrypto cannot verify Ed25519 signatures");
  }
}

/**
 * RFC 8032 §5.1.7 verification with the docs/protocol.md §1 refusals: small-order or
 * non-canonical keys and R, and S >= L, are refused here, before WebCrypto sees them.
 * Throws VerificationError.
 */
export async function ed25519Verify(publicKey, message, signature) {
  checkPublicKey(publicKey);
  if (signature.length !== SIGNATURE_SIZE) {
    fail(`signature is ${signature.length} bytes, want ${SIGNATURE_SIZE}`);
  }
  // docs/protocol.md §1: R canonical and not of small order, as a key (R = the identity
  // and S = k·s verify in WebCrypto here and fail in libsodium: every verifier must agree).
  const r = leInt(signature.subarray(0, 32)) & ((1n << 255n) - 1n);
  if (r >= P) fail("signature is not canonical (its R has y >= p)");
  if (SMALL_ORDER_Y.has(r)) fail("signature's R is a point of small order (docs/protocol.md §1)");
  // RFC 8032 §5.1.7 step 1: S must be in [0, L), or signatures are malleable.
  if (leInt(signature.subarray(32)) >= L) fail("signature is not canonical (S >= L)");
  await requireEd25519();
  const id = hex(publicKey);
  let ok;
  try {
    let key = keyCache.get(id);
    if (key === undefined) {
      key = await subtle().importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]);
      keyCache.set(id, key);
    }
    ok = await subtle().verify("Ed25519", key, signature, message);
  } catch (err) {
    // A 32-byte string that is no curve point: WebCrypto may refuse to import it,
    // where OpenSSL lets verification fail.
    if (err instanceof DOMException && err.name !== "NotSupportedError") ok = false;
    else throw err;
  }
  if (!ok) fail("signature does not verify");
}
