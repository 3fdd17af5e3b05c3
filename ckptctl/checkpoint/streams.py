"""The bytes of one stream state handle (or a part of it), wherever Flink left them: inline in
``_metadata``, a range of a shared file (file merging), or a file of its own. Read by ``states``
(serialization proxies, heap snapshots) and by ``paimon`` (a sink's committables in operator
state): the checkpoint model's, below both."""

from __future__ import annotations

from ckptctl.errors import CkptError


def read_stream(storage, resolve, h, offset: int = 0, length: int | None = None) -> tuple[bytes, str]:
    """Bytes of a stream handle (or a part); returns (bytes, a name for error messages)."""
    src = h.source(resolve) if h is not None else None
    if src is None:
        raise CkptError(f"unsupported stream handle {type(h).__name__}")
    if src[0] == "inline":
        data = src[1]
        end = len(data) if length is None else offset + length
        return data[offset:end], f"{h.name} (inline)"
    if src[0] == "range":
        _kind, uri, start, size = src
        n = size - offset if length is None else min(length, size - offset)
        return storage.read_range(uri, start + offset, n), uri
    uri = src[1]
    if offset == 0 and length is None:
        return storage.read_recorded(uri, src[2]), uri
    if length is None:
        length = h.state_size - offset
    return storage.read_range(uri, offset, length), uri
