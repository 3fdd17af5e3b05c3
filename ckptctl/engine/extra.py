"""Whether the Spark engine is installed: pyspark is an optional extra (``ckptctl[spark]``).

Apart from :mod:`ckptctl.engine` (which chooses the engine) and :mod:`ckptctl.engine.spark` (which
starts it), both of which say so in the same line.
"""

from __future__ import annotations

from ckptctl.errors import CkptError

SPARK_EXTRA = "pip install 'ckptctl[spark]'"  # pyspark (~500 MB) is an optional extra


def spark_installed() -> bool:
    """Whether pyspark can be imported (without importing it): ``pip install -e .`` leaves it out,
    ``ckptctl[spark]`` brings it. Without it ``auto`` runs in-process whatever the input's size."""
    import importlib.util

    try:
        return importlib.util.find_spec("pyspark") is not None
    except (ImportError, ValueError):
        return False


def no_spark() -> CkptError:
    """The one line for Spark asked for (``--engine spark``, ``--master``, a plan made on Spark)
    where pyspark is not installed."""
    return CkptError(
        f"the Spark engine needs pyspark, which is not installed: {SPARK_EXTRA} (or use --engine local)"
    )
