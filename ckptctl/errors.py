"""The one exception family ckptctl lets escape its core.

Every failure a user can cause with bad input (a truncated ``_metadata``, a missing directory, an
unreachable bucket) is raised as a :class:`CkptError`, so the CLI can turn it into a single line and
a non-zero exit code, and never into a traceback. Anything else escaping is a bug in ckptctl.
"""

from __future__ import annotations


class CkptError(Exception):
    """Base class: a problem with the user's input or environment, reported in one line."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class MetadataFormatError(CkptError):
    """A ``_metadata`` file that cannot be decoded; names the file and the byte offset."""

    def __init__(self, message: str, *, path: str | None, offset: int) -> None:
        super().__init__(message, path=path)
        self.offset = offset

    def __str__(self) -> str:
        where = self.path or "<metadata>"
        return f"{where}: byte {self.offset}: {self.message}"


class UnsupportedVersionError(MetadataFormatError):
    """A well-formed header with a metadata version ckptctl does not read."""


class LayoutError(CkptError):
    """A path that is not a checkpoint, savepoint, job or root directory ckptctl understands."""


class StorageError(CkptError):
    """Listing, reading or deleting on the storage failed (permissions, network, missing file)."""
