"""dreampool: a public, verifiable pool of signed agent dreams.

The package is laid out as a pipeline, each module holding one idea:

* format modules (pure): ``strictjson`` (strict reading, RFC 8785 bytes),
  ``ed25519`` (RFC 8032 with the protocol's extra refusals), ``dream``
  (PROTOCOL.md §1 schema, signed bytes, ids), ``redact`` (the redaction policy);
* pool modules (I/O at the edge): ``keystore`` (the user's private keys),
  ``pool`` (the ``content/`` directory: config, key directory, dreams);
* ``cli``: argument parsing and the only place that prints errors.
"""

from __future__ import annotations

__version__ = "0.1.0"
