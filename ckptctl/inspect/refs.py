"""``refs``: the reference map of one checkpoint or of every checkpoint under a root, one row per
(checkpoint, operator, subtask, handle, file), as a table or written as JSON, NDJSON, CSV or Parquet."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ckptctl.checkpoint.loading import LoadedCheckpoint, Progress
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.storage import Storage


@dataclass
class References:
    """The checkpoints PATH names (``root``: what their paths are shown relative to) and those
    under it that could not be read (directory -> one-line error): written or not, the rest are."""

    checkpoints: list[LoadedCheckpoint]
    root: str
    unreadable: dict[str, str] = field(default_factory=dict)


def read_references(
    storage: Storage, path: str, mappings: Rebase, progress: Progress | None = None
) -> References:
    """The checkpoint PATH names, or every readable one under the root PATH."""
    from ckptctl.checkpoint.targets import checkpoints_at

    unreadable: dict[str, str] = {}
    checkpoints, root = checkpoints_at(storage, path, mappings, progress, unreadable=unreadable)
    return References(checkpoints, root, unreadable)


def reference_map(refs: References) -> ReferenceMap:
    """The rows of every checkpoint, shown relative to :func:`~ckptctl.checkpoint.targets.display_base`."""
    from ckptctl.checkpoint.refs import COLUMNS, reference_rows
    from ckptctl.checkpoint.targets import display_base

    rows: list[tuple] = []
    for ck in refs.checkpoints:
        rows.extend(reference_rows(ck))
    return ReferenceMap(COLUMNS, rows, display_base(refs.root, refs.checkpoints))


def write_references(fmt: str, refs: References, output_file: str | None, stdout: TextIO) -> None:
    """The rows in ``fmt`` (``json``, ``ndjson``, ``csv`` or ``parquet``) to ``output_file``, or to
    ``stdout`` without one. NDJSON, the bulk format, is encoded group by group, never as full rows."""
    from ckptctl import export
    from ckptctl.checkpoint.refs import COLUMNS, reference_rows

    if fmt == "ndjson":
        from ckptctl.checkpoint.refs import GROUP_KEY, reference_groups

        def emit(f: IO[bytes]) -> None:
            for ck in refs.checkpoints:
                export.write_ndjson_groups(COLUMNS, reference_groups(ck), f, GROUP_KEY)

        if output_file:
            with open(output_file, "wb") as f:
                emit(f)
        else:
            stdout.flush()
            emit(stdout.buffer)
            stdout.buffer.flush()
        return
    rows: list[tuple] = []
    for ck in refs.checkpoints:
        rows.extend(reference_rows(ck))
    if fmt == "parquet":
        from ckptctl.checkpoint.refs import rows_to_arrow

        export.write_parquet(rows_to_arrow(rows), output_file)
        return
    writer = {"json": export.write_json, "csv": export.write_csv}[fmt]
    if output_file:
        with open(output_file, "w", encoding="utf-8", newline="") as f:
            writer(COLUMNS, rows, f)
    else:
        writer(COLUMNS, rows, stdout)


EXTENSIONS = {".json": "json", ".ndjson": "ndjson", ".jsonl": "ndjson", ".csv": "csv", ".parquet": "parquet"}


def refs_format(fmt: str | None, as_json: bool, output: str | None) -> str:
    """The one format asked for by --format, --json and the -o file's extension; conflicts are errors."""
    from ckptctl import export
    from ckptctl.errors import CkptError

    if fmt is not None:
        fmt = fmt.lower()
        if fmt not in export.FORMATS:
            raise CkptError(f"unknown --format '{fmt}'; use one of {', '.join(export.FORMATS)}")
    if as_json and fmt not in (None, "json"):
        raise CkptError(f"--json and --format {fmt} conflict; give one of them")
    chosen = fmt or ("json" if as_json else None)
    if output:
        ext = os.path.splitext(output)[1].lower()
        implied = EXTENSIONS.get(ext)
        if chosen == "table":
            raise CkptError(
                "--format table is for the terminal; with -o FILE use json, ndjson, csv or parquet"
            )
        if chosen is None and implied is None:
            raise CkptError(
                f"cannot tell the format of -o {output} from its extension; "
                "name it .json, .ndjson, .csv or .parquet, or pass --format"
            )
        if chosen is not None and implied is not None and implied != chosen:
            how = "--json" if as_json and fmt is None else f"--format {chosen}"
            raise CkptError(f"{how} conflicts with -o {output} (a {implied} file name); give one format")
        chosen = chosen or implied
    chosen = chosen or "table"
    if chosen == "parquet" and not output:
        raise CkptError("--format parquet needs --output FILE")
    return chosen


@dataclass
class ReferenceMap:
    """``refs``: one row per (checkpoint, operator, subtask, handle, file) in ``columns`` order
    (:func:`ckptctl.checkpoint.refs.reference_rows`); shown paths are relative to ``root``."""

    columns: Sequence[str]
    rows: list[tuple]
    root: str | None

    def to_json(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def write_json(self, out: IO[bytes]) -> None:
        """The same document as :meth:`to_json`, encoded row by row (a root can hold 10^5 rows)."""
        import codecs

        from ckptctl.export import write_json

        write_json(self.columns, self.rows, codecs.getwriter("utf-8")(out))
