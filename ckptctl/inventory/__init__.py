"""S3 Inventory reports as a file universe: what a listing of a huge bucket would say, read from
the report AWS already writes (``manifest.json`` plus CSV.gz, ORC or Parquet data files).

An inventory is a snapshot taken at its ``creationTimestamp``: objects written after it are not
in it, and objects deleted after it still are. gc uses it for the files of ``shared/``,
``taskowned/`` and ``chk-N/`` only; ``_metadata`` discovery is always a fresh listing, and every
file the inventory cannot speak for (written after the report began) is kept.

The modules: :mod:`~ckptctl.inventory.report` (what a report is), :mod:`~ckptctl.inventory.schema`
(its columns), :mod:`~ckptctl.inventory.manifest` (reading ``manifest.json``) and
:mod:`~ckptctl.inventory.rows` (reading and validating the rows of its data files).
"""
