"""The transparency log.

``logstate`` is the state committed under ``content/log``; ``logbuild`` the
log half of a build (prove the stored tree, admit, append, sign, publish);
``erase`` takes a dream out of the pool and the site.
"""
