"""The operator uids a SQL compiled plan's exec nodes give their transformations.

When a job runs from a compiled plan (``EXECUTE PLAN``; ``table.exec.uid.generation`` PLAN_ONLY, the
default since 1.19, or ALWAYS), every transformation an exec node creates gets the uid
``table.exec.uid.format`` makes of it, by default ``<id>_<transformation>``: the node's ``id`` in the
plan and the transformation's key (``ExecNodeBase.createTransformationMeta(KEY, ...)``), e.g. node 3 of
type ``stream-exec-group-aggregate_1`` → uid ``3_group-aggregate``. A plan records node ids and types,
never the uids: this table holds, per exec node name (the type without ``_<version>``), the keys of the
transformations it may create -- the ``*_TRANSFORMATION`` constants each ``StreamExec*`` class (and its
``CommonExec*`` base) of flink-table-planner 1.20.3, 2.1.3 and 2.3.0 uses (read from the compiled
classes: ``javap -constants``). A key listed for a node that does not create it only adds an id that
matches nothing; a node type missing here makes the mapping of an unmatched operator ``unknown``.
"""

from __future__ import annotations

TRANSFORMATIONS: dict[str, tuple[str, ...]] = {
    "async-calc": ("async-calc",),
    "async-correlate": ("async-correlate",),
    "calc": ("calc",),
    "changelog-normalize": ("changelog-normalize",),
    "correlate": ("correlate",),
    "deduplicate": ("deduplicate",),
    "delta-join": ("delta-join",),
    "drop-update-before": ("drop-update-before",),
    "exchange": ("exchange",),
    "expand": ("expand",),
    "global-group-aggregate": ("global-group-aggregate",),
    "global-window-aggregate": ("global-window-aggregate",),
    "group-aggregate": ("group-aggregate",),
    "group-window-aggregate": ("group-window-aggregate", "window"),
    "incremental-group-aggregate": ("incremental-group-aggregate",),
    "interval-join": ("filter-left", "filter-right", "interval-join", "pad-left", "pad-right"),
    "join": ("join",),
    "limit": ("rank",),
    "local-group-aggregate": ("local-group-aggregate",),
    "local-window-aggregate": ("local-window-aggregate",),
    "lookup-join": (
        "custom-shuffle",
        "lookup-join",
        "lookup-join-key-ordered",
        "lookup-join-materialize",
        "partitioner",
    ),
    "match": ("match", "timestamp-inserter"),
    "mini-batch-assigner": ("mini-batch-assigner",),
    "ml-predict-table-function": ("ml-predict-table-function",),
    "multi-join": ("multi-join",),
    "over-aggregate": ("over-aggregate",),
    "process-table-function": ("process",),
    "python-async-calc": ("python-async-calc",),
    "python-calc": ("python-calc",),
    "python-correlate": ("python-correlate",),
    "python-group-aggregate": ("python-group-aggregate",),
    "python-group-window-aggregate": ("python-group-window-aggregate", "window"),
    "python-over-aggregate": ("python-over-aggregate",),
    "rank": ("rank",),
    "sink": (
        "constraint-validator",
        "partitioner",
        "sink",
        "timestamp-inserter",
        "upsert-materialize",
        "watermark-timestamp-assigner",
    ),
    "sort": ("sort",),
    "sort-limit": ("rank",),
    "table-source-scan": ("partitioner", "source"),
    "temporal-join": ("temporal-join",),
    "temporal-sort": ("temporal-sort",),
    "union": (),
    "values": ("values",),
    "vector-search-table-function": ("vector-search-table-function",),
    "watermark-assigner": ("watermark-assigner",),
    "window-aggregate": ("window-aggregate",),
    "window-deduplicate": ("window-deduplicate",),
    "window-join": ("window-join",),
    "window-rank": ("window-rank",),
    "window-table-function": ("window",),
}
