"""What NEW is, told by its content: a snapshot (a directory or ``_metadata``), a SQL compiled
plan, or a job description in JSON or YAML. Kept apart from the description and plan readers so
that each reads one syntax and neither imports the other."""

from __future__ import annotations

from ckptctl.preflight.description import JobDescription, parse_document, read_description
from ckptctl.preflight.plan import looks_like_plan, read_plan

MAX_DOCUMENT_BYTES = 1 << 24


def read_new(storage, against: str, mappings):
    """NEW by its content: a snapshot (directory or ``_metadata``: a :class:`LoadedCheckpoint`),
    else the file's text: a compiled plan (``flinkVersion`` and ``nodes``) or a job description
    (``operators``), in JSON or in YAML. What is none of them is refused in one line."""
    from ckptctl.checkpoint.targets import checkpoint_if_named, one_checkpoint
    from ckptctl.errors import StorageError
    from ckptctl.storage import normalize_uri

    found = checkpoint_if_named(storage, against, mappings)
    if found is not None:
        return found
    uri = normalize_uri(against)
    try:
        data = storage.read_bytes(uri, limit=MAX_DOCUMENT_BYTES)
    except (StorageError, OSError):
        return one_checkpoint(storage, against, mappings)  # says what is wrong with the path
    if data[:4] == b"\x49\x60\x67\x2d":  # a _metadata file under another name
        return one_checkpoint(storage, against, mappings)
    return read_document(data, uri)


def read_document(data: bytes, uri: str) -> JobDescription:
    """A compiled plan or a job description, JSON or YAML, told apart by content."""
    doc = parse_document(data, uri)
    if looks_like_plan(doc):
        return read_plan(doc, uri)
    return read_description(doc, uri)
