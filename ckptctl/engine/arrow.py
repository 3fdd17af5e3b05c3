"""Arrow record batches between Spark and the tasks of its executors: columns at a time instead of
a pickled row each, and ``mapInArrow`` without pandas.

Apart from :mod:`ckptctl.engine.spark` (the session and the JVM's life): these run on executors
too, and hold nothing of the session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any


def map_in_arrow(frame: Any, fn: Callable[[Iterator[Any]], Iterator[Any]], schema: str) -> Any:
    """``frame.mapInArrow(fn, schema)``: ``fn`` maps the partition's Arrow record batches to
    record batches of ``schema``. PySpark's own method builds its UDF with ``pandas_udf``, which
    refuses to start without pandas although Arrow batches never touch it (pandas is not a
    dependency of ckptctl): the same UDF is made here by ``vectorized_udf``, as ``pandas_udf``
    makes it once pandas is found."""
    from pyspark.sql import DataFrame
    from pyspark.sql.pandas.functions import vectorized_udf
    from pyspark.util import PythonEvalType

    udf = vectorized_udf(fn, schema, PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
    column = udf(*[frame[c] for c in frame.columns])
    return DataFrame(frame._jdf.mapInArrow(column._jc, False, None), frame.sparkSession)


_ARROW_TYPES = {"string": "string", "int": "int32", "long": "int64", "double": "float64", "boolean": "bool_",
                "binary": "binary"}  # fmt: skip


def arrow_schema(ddl: str) -> Any:
    """The Arrow schema of ``ddl`` (``"name type, ..."`` of flat Spark types)."""
    import pyarrow as pa

    return pa.schema([(n, getattr(pa, _ARROW_TYPES[t])()) for n, t in (f.split() for f in ddl.split(","))])


def arrow_batches(rows: Iterable[tuple], ddl: str, chunk: int = 65536) -> Iterator[Any]:
    """Tuples in the order of the fields of ``ddl`` (``"name type, ..."`` of flat Spark types) as
    Arrow record batches of at most ``chunk`` rows: what a task hands back through
    :func:`map_in_arrow`, columns at a time instead of a pickled row each."""
    import itertools

    import pyarrow as pa

    schema = arrow_schema(ddl)
    rows = iter(rows)
    while batch := list(itertools.islice(rows, chunk)):
        columns = list(zip(*batch, strict=True))
        yield pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)],
                                         schema=schema)  # fmt: skip
