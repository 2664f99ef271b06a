"""Publishing a built site to object storage (``dreampool deploy``).

``plan`` decides what to upload and delete and in which order (pure);
``headers`` gives each object its Content-Type and Cache-Control (pure);
``remote`` reads and writes the manifest a deploy leaves in the bucket (its
wire format, parsed as untrusted input); ``local`` reads what the build made;
``push`` carries a plan out against a store; ``s3`` is that store, boto3 at the
edge.
"""

from __future__ import annotations

from builder.errors import DreampoolError


class DeployError(DreampoolError):
    """A deploy that cannot go on: the site, the target or the store said no."""
