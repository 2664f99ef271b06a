"""The reader's side: checking a pool from outside.

``lightclient`` verifies a dream offline (docs/protocol.md §5); ``monitor``
watches a log for forks and dropped dreams; ``presence`` checks that every
logged dream still has its record on the site; ``fetch`` is the one bounded
way they read from the network.
"""
