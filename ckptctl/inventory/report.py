"""What an S3 Inventory report is, as ckptctl holds it: the parsed manifest (:class:`Inventory`, listing
:class:`DataFile` objects), the counts of a read (:class:`ReadStats`), the error that names a broken
report, and the bounds every size and time of a report is held to.

Below :mod:`~ckptctl.inventory.manifest` (which builds it) and :mod:`~ckptctl.inventory.rows` (which
reads the data files it lists): the one model both use.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ckptctl.errors import CkptError

FORMATS = ("CSV", "ORC", "Parquet")
# The bounds every time of a report is held to (a time outside them is a broken report: exit 2,
# never a plan). S3 Inventory was launched on 2016-11-30 (the manifest's "version"): no report was
# created before. No object was written before S3 launched (2006-03-14). Neither is later than the
# ``latest`` the caller gives (the storage clock plus its tolerance): a report cannot speak of a
# time that has not come yet.
INVENTORY_LAUNCH = 1_480_464_000.0  # 2016-11-30T00:00:00Z
S3_LAUNCH = 1_142_294_400.0  # 2006-03-14T00:00:00Z
# S3's largest object (50 TB since December 2025; 5 TiB before): a larger size is a broken row
MAX_OBJECT_SIZE = 50 * 10**12
MD5_HEX = re.compile(r"[0-9a-fA-F]{32}")


class InventoryError(CkptError):
    """The manifest or a data file cannot be used (exit 2, one line naming the file)."""


@dataclass(frozen=True)
class DataFile:
    uri: str
    size: int
    md5: str | None


@dataclass(frozen=True)
class Inventory:
    """A parsed ``manifest.json``."""

    uri: str
    source_bucket: str
    destination_bucket: str
    version: str
    created: float  # creationTimestamp, epoch seconds
    file_format: str
    file_schema: str
    files: tuple[DataFile, ...]
    latest: float = math.inf  # no time of the report may be later (the storage clock plus its tolerance)

    def describe(self) -> dict[str, Any]:
        return {"uri": self.uri, "source_bucket": self.source_bucket, "created": self.created,
                "format": self.file_format, "data_files": len(self.files)}  # fmt: skip


@dataclass
class ReadStats:
    rows_read: int = 0  # every row of every data file
    rows_kept: int = 0  # latest, not a delete marker, under a scope
    files_read: int = 0
    by_file: list[dict[str, Any]] = field(default_factory=list)


def iso_time(t: float) -> str:
    """An epoch time as UTC ISO 8601; one beyond what Python's calendar holds as said."""
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "beyond year 9999" if t > 0 else "before year 1"
