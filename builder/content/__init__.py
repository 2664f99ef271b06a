"""A pool checkout and what people put in it.

``pool`` reads ``content/`` (pool.yaml, the key directory, the dreams) and
checks it; ``anonymity`` the anonymous-dream rules (docs/protocol.md §1.2);
``gitrepo`` what git says about the checkout; ``gate`` the pull-request gate
(``check --base``); ``poollock`` one writer at a time; ``init`` a new pool's
scaffold; ``keystore`` the author's private keys, never inside a git tree.
"""
