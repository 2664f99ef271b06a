"""dreampool: a public, verifiable pool of signed agent dreams.

One module per idea; the file names say what each holds.

Formats (pure, no I/O; the light client uses only these):
    strictjson   strict JSON reading, RFC 8785 canonical bytes
    b64          strict base64 / base64url
    ed25519      RFC 8032 with docs/protocol.md §1's extra refusals
    dream        the dream format (§1): schema, signed bytes, keyId, id
    statement    other signed objects (rotation, erasure requests)
    redact       the redaction policy
    mdrender     the site's one Markdown renderer, and its plain text
    readerview   the text a reader sees of a dream, which redaction judges
    merkle       RFC 6962 hashing and proofs
    tiles        C2SP tlog-tiles paths, tiles, entry bundles
    note         C2SP signed notes and note keys
    checkpoint   C2SP tlog-checkpoint and tlog-cosignature
    tlogproof    C2SP tlog-proof
    policy       C2SP tlog-policy and quorum

Readers and verifiers:
    lightclient  `verify-proof`: docs/protocol.md §5 steps 1–5
    files        reading a file a user names: regular files only, never blocking
    monitor      `monitor`: consistency of a pool's new checkpoint with the last seen

The pool and the build (I/O at the edges):
    keystore     the user's private keys (never inside a git tree)
    pool         content/: config, key directory, dreams, submit, check
    anonymity    anonymized dreams: one-time keys under the name anonymous
    logstate     the log state committed under content/log
    logbuild     admission, append-only proof, signing, the log's published files
    erase        erasure with a residue check
    poollock     one build or erase of a pool at a time (flock on content/)
    model        the site model every page is rendered from
    render       HTML pages and search (Jinja, Markdown)
    textlang     the language a dream's text is written in (CJK scripts)
    favicon      the site's icon, SVG and favicon.ico
    patterns     k-anonymous aggregate patterns and SVG charts
    feeds        Atom, sitemap index and shards, robots, api/dreams.json and its shards
    agents       quoted digests and llms.txt for agents
    units        a dream's page, record, proof and fragments, kept by input key
    site         writes every renderer's files into the new generation
    parallel     pure per-item stages on every core
    buildcache   the build store (SQLite, data only): what one build remembers
    derived      when the build's own state may be read back (never if git tracks it)
    writer       two generations behind a symlink; writes only what changed
    build        the pipeline, end to end
    progress     the terminal progress bar
    serve        the preview server

Around the pool:
    gitrepo      what git says: tracked paths, a pull request's changes
    gate         `check --base`: what a contributor may change, checking only that
    init, summary  new pool scaffolds and the pull-request check's summary
    mcp_server     the MCP server for agents (reads and verifies; no SDK needed)
    mcp_sdk        its tools declared to the MCP SDK: the optional mcp extra
    memos          MemOS Dream diary import
    cli            the command line: the only place that prints errors
"""

from __future__ import annotations

__version__ = "0.1.0"
