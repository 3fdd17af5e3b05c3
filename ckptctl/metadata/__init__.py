"""Reading and writing Flink's ``_metadata`` files (format versions 3–7)."""

from ckptctl.metadata.reader import read_header, read_metadata
from ckptctl.metadata.writer import MetadataWriteError, write_metadata

__all__ = ["read_header", "read_metadata", "write_metadata", "MetadataWriteError"]
