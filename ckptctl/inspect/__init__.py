"""The read-only commands' cores: ``ls``, ``show``, ``refs``, ``diff`` (one module each, named as
the command, its CLI module ``cli/<command>.py`` and its renderer ``cli/render/<command>.py``).

They only read ``_metadata`` files, so they work on a moved or copied directory: the mapping from
the paths Flink wrote to where the files are now is inferred, applied, and reported as a warning
together with the ``--rebase`` option that commands touching the files will need. ``views`` holds
the plain-data views of a checkpoint's handles they share.
"""
