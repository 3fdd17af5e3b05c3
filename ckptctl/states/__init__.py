"""What state each operator holds: the catalog (metadata only) and the deep scan (RocksDB, TTL ages).

The modules, in the order the work flows:

* :mod:`~ckptctl.states.catalog`: per operator, its states and their serializers from the keyed
  backend headers (parsed by :mod:`ckptctl.metadata.keyedproxy`) and the operator state handles;
* :mod:`~ckptctl.states.scan`: ``--deep``'s tasks and the function that runs them on an engine
  (:mod:`ckptctl.engine`): entries, bytes and TTL ages per column family and key group;
* :mod:`~ckptctl.states.deep`: the driver: tasks from the catalog, records added up per state,
  the ``--histogram`` Parquet;
* :mod:`~ckptctl.states.report`: the ``states`` document.
"""

from __future__ import annotations

from ckptctl.metadata.keyedproxy import short_class
from ckptctl.states.catalog import OperatorCatalog, StateEntry, catalog
from ckptctl.states.deep import DeepResult, deep_scan, write_histogram
from ckptctl.states.report import StatesReport

__all__ = [
    "DeepResult", "OperatorCatalog", "StateEntry", "StatesReport", "catalog", "deep_scan",
    "short_class", "write_histogram",
]  # fmt: skip
