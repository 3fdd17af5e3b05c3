"""The one exception family ckptctl lets escape its core.

Every failure a user can cause with bad input (a truncated ``_metadata``, a missing directory, an
unreachable bucket) is raised as a :class:`CkptError`, so the CLI can turn it into a single line and
a non-zero exit code, and never into a traceback. Anything else escaping is a bug in ckptctl.
"""

from __future__ import annotations

from ckptctl.shown import visible


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
        # what it quotes from the file (a file name, a serializer key) is any bytes a corrupt length
        # took in: escaped, so that the error is one line
        return visible(f"{where}: byte {self.offset}: {self.message}")


class UnsupportedVersionError(MetadataFormatError):
    """A well-formed header with a metadata version ckptctl does not read."""


class LayoutError(CkptError):
    """A path that is not a checkpoint, savepoint, job or root directory ckptctl understands."""


class StorageError(CkptError):
    """Listing, reading or deleting on the storage failed (permissions, network, missing file)."""


class StoreUnanswered(CkptError):
    """The store accepted connections but answered none within the deadline (a hung S3 gateway,
    a load balancer with no backend). Not a :class:`StorageError` on purpose: code that reports one
    file's or one checkpoint's storage error and goes on to the next must not go on here -- each
    next request would wait out the same deadline (a 20 s wait per file, per checkpoint)."""

    def at(self, path: str) -> StoreUnanswered:
        """This error naming ``path`` (the first request that went unanswered), unless it names one."""
        if self.path is None:
            self.path = path
        return self
