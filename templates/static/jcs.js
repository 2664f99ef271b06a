// dreampool jcs.js: strict, bounded JSON reading and RFC 8785 (JCS) canonical bytes,
// the browser's twin of builder/formats/strictjson.py.
//
// JSON.parse accepts more than a signed format can afford: duplicate member names
// (the last wins, so two readers can see two objects), lone surrogates, integers
// that lose precision. parseStrict refuses each of them before any value is used:
//
//   * UTF-8 only (fatal decoding), no byte order mark (RFC 8259 §8.1);
//   * at most maxBytes bytes and maxDepth levels of nesting;
//   * no duplicate member names (RFC 8785 §3.1 requires unique names);
//   * no NaN or Infinity, and no number that overflows to infinity;
//   * integers within ±(2^53−1) (RFC 8785 §3.2.2.3, I-JSON RFC 7493 §2.2);
//   * no lone surrogate in any string or member name (RFC 7493 §2.1).
//
// Values: objects have a null prototype (so a member named "__proto__" is a plain
// member), arrays are arrays, a number written as an integer is a number, and a
// number written with a fraction or an exponent is a JsonFloat. Python's json reads
// 1.0 as a float and the dream schema wants integers, so the verifier must tell 1.0
// from 1 too; JCS writes both as 1.
//
// canonicalize(value) is RFC 8785 §3.2: members sorted by their names' UTF-16 code
// units (§3.2.3, what Array.prototype.sort does by default), numbers in the
// ECMAScript Number.prototype.toString form (§3.2.2.3), strings escaped as
// JSON.stringify escapes them (§3.2.2.2), no whitespace. Errors never echo values.

export const MAX_SAFE_INTEGER = Number.MAX_SAFE_INTEGER; // 2^53 - 1
export const DEFAULT_MAX_BYTES = 64 * 1024;
export const DEFAULT_MAX_DEPTH = 32;

const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const ENCODER = new TextEncoder();
// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?:^|[^\ud800-\udbff])[\udc00-\udfff]/;
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
const ESCAPES = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

/** Input is not strict JSON; line is 1-based where known. */
export class JSONError extends Error {
  constructor(message, line = null) {
    super(message);
    this.name = "JSONError";
    this.line = line;
  }
}

/** A JSON number written with a fraction or an exponent (Python reads it as a float). */
export class JsonFloat {
  constructor(value) {
    this.value = value;
    Object.freeze(this);
  }
}

/** Whether a string holds a lone surrogate, which is no Unicode text. */
export function hasLoneSurrogate(text) {
  return LONE_SURROGATE.test(text);
}

/** Decode UTF-8 strictly; throws JSONError naming the byte. */
export function decodeUtf8(bytes) {
  try {
    return UTF8.decode(bytes);
  } catch (err) {
    throw new JSONError("not valid UTF-8");
  }
}

export function encodeUtf8(text) {
  return ENCODER.encode(text);
}

/**
 * Parse strict JSON from bytes (a Uint8Array); throw JSONError on anything loose.
 */
export function parseStrict(
  bytes,
  { maxBytes = DEFAULT_MAX_BYTES, maxDepth = DEFAULT_MAX_DEPTH } = {},
) {
  if (bytes.length > maxBytes) {
    throw new JSONError(`file is ${bytes.length} bytes, the limit is ${maxBytes}`);
  }
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw new JSONError("starts with a UTF-8 byte order mark (BOM); save the file without it", 1);
  }
  const text = decodeUtf8(bytes);
  return new Parser(text, maxDepth).document();
}

class Parser {
  constructor(text, maxDepth) {
    this.text = text;
    this.pos = 0;
    this.depth = 0;
    this.maxDepth = maxDepth;
  }

  fail(message) {
    let line = 1;
    for (let i = 0; i < this.pos && i < this.text.length; i++) {
      if (this.text.charCodeAt(i) === 10) line++;
    }
    throw new JSONError(message, line);
  }

  // RFC 8259 §2: whitespace is space, tab, line feed and carriage return only.
  skip() {
    const t = this.text;
    while (this.pos < t.length) {
      const c = t.charCodeAt(this.pos);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      this.pos++;
    }
  }

  document() {
    this.skip();
    const value = this.value();
    this.skip();
    if (this.pos !== this.text.length) this.fail("not valid JSON: extra data after the value");
    return value;
  }

  value() {
    const c = this.text[this.pos];
    if (c === "{") return this.object();
    if (c === "[") return this.array();
    if (c === '"') return this.string();
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    for (const [word, value] of [
      ["true", true],
      ["false", false],
      ["null", null],
    ]) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        return value;
      }
    }
    if (this.text.startsWith("NaN", this.pos) || this.text.startsWith("Infinity", this.pos)) {
      this.fail("NaN and Infinity are not JSON (RFC 8259 §6 allows only finite numbers)");
    }
    if (this.pos >= this.text.length) this.fail("not valid JSON: unexpected end of input");
    return this.fail("not valid JSON: expected a value");
  }

  enter() {
    this.depth++;
    if (this.depth > this.maxDepth) this.fail(`nested deeper than ${this.maxDepth} levels`);
  }

  object() {
    this.enter();
    this.pos++; // {
    const obj = Object.create(null);
    this.skip();
    if (this.text[this.pos] === "}") {
      this.pos++;
      this.depth--;
      return obj;
    }
    for (;;) {
      this.skip();
      if (this.text[this.pos] !== '"')
        this.fail("not valid JSON: expected a member name in double quotes");
      const name = this.string();
      if (Object.prototype.hasOwnProperty.call(obj, name)) {
        const shown = name.length <= 64 ? JSON.stringify(name) : `<${name.length} chars>`;
        this.fail(`duplicate member name ${shown} in one object`);
      }
      this.skip();
      if (this.text[this.pos] !== ":")
        this.fail("not valid JSON: expected ':' after a member name");
      this.pos++;
      this.skip();
      obj[name] = this.value();
      this.skip();
      const c = this.text[this.pos];
      this.pos++;
      if (c === "}") break;
      if (c !== ",") this.fail("not valid JSON: expected ',' or '}' in an object");
    }
    this.depth--;
    return obj;
  }

  array() {
    this.enter();
    this.pos++; // [
    const arr = [];
    this.skip();
    if (this.text[this.pos] === "]") {
      this.pos++;
      this.depth--;
      return arr;
    }
    for (;;) {
      this.skip();
      arr.push(this.value());
      this.skip();
      const c = this.text[this.pos];
      this.pos++;
      if (c === "]") break;
      if (c !== ",") this.fail("not valid JSON: expected ',' or ']' in an array");
    }
    this.depth--;
    return arr;
  }

  string() {
    const t = this.text;
    this.pos++; // opening quote
    let out = "";
    let run = this.pos;
    for (;;) {
      if (this.pos >= t.length) this.fail("not valid JSON: unterminated string");
      const c = t.charCodeAt(this.pos);
      if (c === 0x22) break;
      if (c < 0x20) this.fail("not valid JSON: control character in a string (escape it)");
      if (c !== 0x5c) {
        this.pos++;
        continue;
      }
      out += t.slice(run, this.pos);
      const e = t[this.pos + 1];
      if (e === "u") {
        const hex = t.slice(this.pos + 2, this.pos + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("not valid JSON: bad \\u escape");
        out += String.fromCharCode(parseInt(hex, 16));
        this.pos += 6;
      } else if (e !== undefined && Object.prototype.hasOwnProperty.call(ESCAPES, e)) {
        out += ESCAPES[e];
        this.pos += 2;
      } else {
        this.fail("not valid JSON: bad escape in a string");
      }
      run = this.pos;
    }
    out += t.slice(run, this.pos);
    this.pos++; // closing quote
    if (hasLoneSurrogate(out)) {
      this.fail("string holds a lone surrogate (\\ud800-\\udfff), not Unicode text");
    }
    return out;
  }

  number() {
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.text);
    if (!m) this.fail("not valid JSON: bad number");
    this.pos += m[0].length;
    const value = Number(m[0]);
    if (m[1] === undefined && m[2] === undefined) {
      // An integer literal. Number() is exact up to 2^53 and never rounds a larger
      // integer below it, so this comparison is exact.
      if (Math.abs(value) > MAX_SAFE_INTEGER) {
        this.fail(`integer of ${m[0].length} digits is beyond ±(2^53-1) (RFC 7493 §2.2)`);
      }
      return value;
    }
    if (!Number.isFinite(value)) this.fail("number overflows to infinity");
    return new JsonFloat(value);
  }
}

/** RFC 8785 canonical text of a JSON value; throws TypeError for what has no JSON form. */
export function canonicalize(value) {
  if (value === null) return "null";
  if (value === true) return "true";
  if (value === false) return "false";
  if (value instanceof JsonFloat) return canonicalNumber(value.value);
  switch (typeof value) {
    case "number":
      return canonicalNumber(value);
    case "string":
      return canonicalString(value);
    case "object":
      if (Array.isArray(value)) return "[" + value.map(canonicalize).join(",") + "]";
      return canonicalObject(value);
    default:
      throw new TypeError(`a ${typeof value} has no JSON form`);
  }
}

/** RFC 8785 canonical UTF-8 bytes of a JSON value. */
export function canonicalBytes(value) {
  return ENCODER.encode(canonicalize(value));
}

/** Whether bytes are exactly the JCS form of the JSON they hold. */
export function isCanonical(bytes) {
  let value;
  try {
    value = parseStrict(bytes, { maxBytes: Math.max(bytes.length, 1) });
  } catch (err) {
    if (err instanceof JSONError) return false;
    throw err;
  }
  const again = canonicalBytes(value);
  return again.length === bytes.length && again.every((b, i) => b === bytes[i]);
}

function canonicalNumber(n) {
  // RFC 8785 §3.2.2.3: the ECMAScript Number serialization; -0 is written 0.
  if (!Number.isFinite(n)) throw new TypeError("NaN and Infinity have no JSON form");
  return JSON.stringify(n);
}

function canonicalString(s) {
  // RFC 8785 §3.2.2.2 is the JSON.stringify string form; a lone surrogate has no
  // UTF-8 form at all, so it is refused rather than escaped.
  if (hasLoneSurrogate(s)) throw new TypeError("a string holds a lone surrogate");
  return JSON.stringify(s);
}

function canonicalObject(obj) {
  // RFC 8785 §3.2.3: sort by the UTF-16 code units of the names, which is what
  // the default sort compares.
  const names = Object.keys(obj).sort();
  const parts = names.map((name) => canonicalString(name) + ":" + canonicalize(obj[name]));
  return "{" + parts.join(",") + "}";
}
