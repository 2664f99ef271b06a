// dreampool markdown.js: a dream summary rendered in the browser exactly as the build
// renders it (builder/site/render.py, render_markdown), so the verifier can compare what a
// page shows with what the verified record says.
//
// markdown-it.min.js is markdown-it 14.1.0 (MIT, https://github.com/markdown-it/markdown-it),
// the JavaScript original that markdown-it-py ports; configured as render.py configures
// it (CommonMark, raw HTML off, images off, http/https/mailto links only, headings two
// levels down) the two give the same HTML (tests/browser/test_verify_trust.py). It is
// loaded only when a reader verifies a dream, and renders into an inert document
// (DOMParser): nothing it makes is ever inserted into the page.

const LINK_SCHEMES = ["http:", "https:", "mailto:"];
let renderer = null;

async function markdownIt() {
  if (renderer) return renderer;
  await import("./markdown-it.min.js"); // a UMD bundle: it defines globalThis.markdownit
  const md = globalThis.markdownit("commonmark", {
    html: false,
    linkify: false,
    typographer: false,
  });
  md.disable("image");
  md.validateLink = (url) => {
    const u = url.trim().toLowerCase();
    return LINK_SCHEMES.some((s) => u.startsWith(s));
  };
  const heading = (tokens, idx, options, env, self) => {
    tokens[idx].tag = `h${Math.min(6, Number(tokens[idx].tag[1]) + 2)}`;
    return self.renderToken(tokens, idx, options);
  };
  md.renderer.rules.heading_open = heading;
  md.renderer.rules.heading_close = heading;
  renderer = md;
  return md;
}

/** The summary's HTML as the build writes it, parsed into an inert body element. */
export async function renderSummary(markdown) {
  const md = await markdownIt();
  return new DOMParser().parseFromString(md.render(markdown), "text/html").body;
}
