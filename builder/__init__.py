"""dreampool: a public, verifiable pool of signed agent dreams.

The package is split by layer. A layer imports only from the layers above it
in this list (tests/test_layers.py checks it), and printing and argument
parsing live only in :mod:`builder.cli`:

    formats   the wire formats, pure and free of I/O: dreams (docs/protocol.md §1),
              signed statements, strict JSON and RFC 8785, base64, Ed25519, RFC 6962
              Merkle hashing, C2SP signed notes, checkpoints, tiles, proofs, policies,
              the Unicode policy (§1.1), the pool's YAML subset. The light client
              needs nothing else.
    text      what a reader sees of a text: the one Markdown renderer, the reader's
              view, the redaction rules, the language a text is written in,
              text as XML character data
    content   a pool checkout: content/ (config, key directory, dreams), anonymity
              (§1.2), git, the pull-request gate, the pool lock, ``init``'s
              scaffold, the author's private key store
    log       the transparency log: the state under content/log, admission and
              signing (logbuild), erasure
    site      the static site: the model, the renderers (pages, feeds, API,
              patterns, agents' exports), a dream's own files (units), and the
              writer that swaps generations in
    readers   the other side: the light client, the monitor, the presence
              check, bounded fetching
    deploy    publishing a built site to S3-compatible object storage: the plan
              and its order, the cache headers, the bucket's manifest, boto3
    agents    the MCP server and the MemOS import
    cli       the ``dreampool`` command line, its progress bar and summaries

and the modules that join them: :mod:`builder.build` (the build pipeline,
end to end), :mod:`builder.buildcache` (the build's store: SQLite, data only,
derived and rebuildable), :mod:`builder.parallel` (pure per-item stages on
every core), :mod:`builder.files` (reading a file a user names, removing a
path as itself) and :mod:`builder.deferred` (a module imported on first use,
for a start that is timed); :mod:`builder.errors` is the one error family.

The build's data flow (README.md, "How the build works", has the diagram)::

    content/ ─▶ log.logbuild.prove ─▶ content.pool.scan_dreams ─▶ log.logbuild.plan/apply
             ─▶ site.model ─▶ site.assemble ─▶ site.writer ─▶ site/ (a link to a generation)

with :mod:`builder.buildcache` (``.site.builds/cache/store.sqlite``) keeping
what the scan, the log and the renderers computed, keyed by content.
"""

from __future__ import annotations

__version__ = "0.1.0"
