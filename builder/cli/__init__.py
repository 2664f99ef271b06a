"""The ``dreampool`` command line: the only layer that prints or parses arguments.

``main`` holds the commands; ``progress`` the progress bar; ``summary`` what
``check`` tells a GitHub Actions run.
"""
