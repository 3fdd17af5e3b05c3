"""Relocation: copy checkpoints and savepoints anywhere, with every path in ``_metadata`` rewritten.

Incremental, file-merging, changelog and CLAIM-restored checkpoints (and native savepoints of
older releases) name their files by absolute path, so a plain copy still points at the original
location. :mod:`~ckptctl.relocate.plan` works out where every file goes and the new ``_metadata``
of each checkpoint; :mod:`~ckptctl.relocate.apply` copies them and writes every ``_metadata``
last. No Typer or Rich here.
"""
