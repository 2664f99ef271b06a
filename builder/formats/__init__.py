"""The wire formats: pure functions over bytes and values, no I/O.

Each module is one format and cites the section of docs/protocol.md or the
C2SP / RFC text it implements: ``dream`` (§1), ``statement`` (§7), ``strictjson``
(strict JSON, RFC 8785), ``b64`` (RFC 4648), ``ed25519`` (RFC 8032 with §1's
refusals), ``merkle`` (RFC 6962), ``note`` (c2sp.org/signed-note),
``checkpoint`` (c2sp.org/tlog-checkpoint, tlog-cosignature), ``tiles``
(c2sp.org/tlog-tiles), ``tlogproof`` (c2sp.org/tlog-proof), ``policy``
(c2sp.org/tlog-policy), ``unicodepolicy`` (§1.1, with the generated
``unicodetables``) and ``safeyaml`` (the YAML subset of key files and
pool.yaml).
"""
