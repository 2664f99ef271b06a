// dreampool fetchcap.js: one bounded fetch for the browser verifier.
//
// Every file the verifier downloads has a total deadline (headers and body, an
// AbortController) and a size cap (the body is read as a stream and the read stops
// once it passes the cap), so a server that never answers, drips, or sends without
// end cannot hang the panel or fill the tab's memory. A failure is a FetchError whose
// kind says which ("http", "timeout", "too-large", "network"): a withheld file is an
// availability failure for the caller to report, never a verdict (THREATS T31).

export const DEFAULT_DEADLINE_MS = 20000;

export class FetchError extends Error {
  constructor(message, kind, status = null) {
    super(message);
    this.name = "FetchError";
    this.kind = kind;
    this.status = status;
  }
}

function sizeText(n) {
  return n >= 1024 ? `${Math.floor(n / 1024)} KiB` : `${n} bytes`;
}

/**
 * GET url; resolve to its body as a Uint8Array of at most maxBytes, or to a
 * FetchError (never throws). deadlineMs bounds the whole exchange.
 */
export async function fetchCapped(url, maxBytes, deadlineMs = DEFAULT_DEADLINE_MS) {
  const name = url.pathname.split("/").slice(-2).join("/");
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, deadlineMs);
  const late = () =>
    new FetchError(
      `cannot fetch ${name}: no complete answer within ${Math.round(deadlineMs / 1000)} seconds`,
      "timeout",
    );
  const tooLarge = () =>
    new FetchError(
      `cannot fetch ${name}: it is larger than ${sizeText(maxBytes)}, more than this file can hold`,
      "too-large",
    );
  try {
    // no-store: a revalidation that ends in 304 on a coarse Last-Modified could hand
    // back a stale policy or checkpoint, and these files are small.
    const response = await fetch(url, {
      credentials: "same-origin",
      cache: "no-store",
      signal: controller.signal,
    });
    if (!response.ok) {
      controller.abort();
      return new FetchError(
        `cannot fetch ${name}: HTTP ${response.status}`,
        "http",
        response.status,
      );
    }
    const declared = Number(response.headers.get("content-length"));
    if (Number.isFinite(declared) && declared > maxBytes) {
      controller.abort();
      return tooLarge();
    }
    const chunks = [];
    let total = 0;
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
      if (total > maxBytes) {
        controller.abort();
        return tooLarge();
      }
      chunks.push(value);
    }
    const out = new Uint8Array(total);
    let at = 0;
    for (const c of chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  } catch (err) {
    if (timedOut) return late();
    return new FetchError(`cannot fetch ${name}: ${err.message}`, "network");
  } finally {
    clearTimeout(timer);
  }
}
