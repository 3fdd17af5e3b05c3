"""ckptctl: inspect and repair Apache Flink checkpoint directories."""

__version__ = "0.1.0"
