"""The transparency log.

``logstate`` is the state committed under ``content/log``; ``logbuild`` the
log half of a build (prove the stored tree, admit, append, sign, publish);
``prefix`` and ``checked`` are what a build records of the log for the next
(the leaves it read, the files it checked against them); ``erase`` takes a
dream out of the pool and the site; ``recheck`` runs today's rules over
logged dreams.
"""
