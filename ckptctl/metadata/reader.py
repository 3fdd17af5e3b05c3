"""Decoder of Flink's ``_metadata`` files, versions 3–7, into :class:`~ckptctl.metadata.checkpoint.CheckpointMetadata`.

It mirrors ``MetadataV3..V7Serializer`` and ``MetadataV2V3SerializerBase`` field by field. Every
read is bounds-checked and every count is checked against the bytes that remain before anything
is allocated, so a corrupt file fails fast with :class:`MetadataFormatError` naming the byte offset
(never a hang, a giant allocation or a traceback). The whole file is decoded from one ``bytes``
object: Flink metadata is read once and completely, and random access keeps the hot loops cheap.

The decoder is layered by what it decodes, each layer a subclass of the one below so that the hot
loops' ``self.method()`` calls cost what they did in one class (no per-handle indirection):
:mod:`~ckptctl.metadata.read_cursor` (primitives), :mod:`~ckptctl.metadata.read_streams` (stream
handles, incremental file lists), :mod:`~ckptctl.metadata.read_keyed` (keyed handles),
:mod:`~ckptctl.metadata.read_operators` (operator and channel handles, subtasks, operators), and
here the header, the master hook states and the choice between the two V3 readings.
"""

from __future__ import annotations

import struct

from ckptctl.errors import MetadataFormatError, UnsupportedVersionError
from ckptctl.metadata import javaser
from ckptctl.metadata.checkpoint import CheckpointMetadata, MasterState
from ckptctl.metadata.codes import (
    MAGIC,
    MASTER_STATE_MAGIC,
    SUPPORTED_VERSIONS,
)
from ckptctl.metadata.read_cursor import Cursor
from ckptctl.metadata.read_operators import OperatorDecoder
from ckptctl.pycollector import paused_collector


class Decoder(OperatorDecoder):
    """The whole file's decoder: the master hook states here, the operators below
    (:class:`~ckptctl.metadata.read_operators.OperatorDecoder` and the layers under it)."""

    __slots__ = ()

    def master_state(self) -> MasterState:
        at = self.pos
        magic = self.i32() & 0xFFFFFFFF
        if magic != MASTER_STATE_MAGIC:
            raise self.fail(f"bad master state magic 0x{magic:08x}", at)
        at = self.pos
        n = self.i32()
        if n <= 0:
            raise self.fail(f"invalid master state length {n}", at)
        self.need(n, "master state")
        block = Cursor(self.buf, self.path, self.pos, self.pos + n)
        version = block.i32()
        name = block.utf()
        payload = block.raw(block.i32(), "master state payload")
        if block.pos != block.end:
            raise self.fail("trailing bytes in master state", block.pos)
        self.pos += n
        return MasterState(version, name, payload)


def read_header(buf: bytes, path: str | None = None) -> int:
    """Check the magic number and return the format version (raises for unsupported ones)."""
    if len(buf) < 8:
        raise MetadataFormatError(f"truncated: {len(buf)} bytes, not a _metadata file", path=path, offset=0)
    magic, version = struct.unpack_from(">Ii", buf, 0)
    if magic != MAGIC:
        raise MetadataFormatError(
            f"wrong magic number 0x{magic:08x} (expected 0x{MAGIC:08x}): not a Flink _metadata file",
            path=path, offset=0,
        )  # fmt: skip
    if version not in SUPPORTED_VERSIONS:
        hint = " (written by Flink 1.10 or older)" if 0 < version < 3 else ""
        raise UnsupportedVersionError(
            f"unsupported format version {version}{hint}; ckptctl reads versions 3-7", path=path, offset=4
        )
    return version


def read_metadata(buf: bytes, path: str | None = None) -> CheckpointMetadata:
    """Decode a complete ``_metadata`` file from its bytes."""
    with paused_collector():
        return _read_metadata(buf, path)


def _read_metadata(buf: bytes, path: str | None) -> CheckpointMetadata:
    """Decode; a V3 file with changelog handles is decoded as 1.15 and as 1.14 wrote it.

    Version 3 was written by Flink 1.14 and 1.15, and 1.15 changed the layout of the changelog
    handles (codes 8, 9, 10 gained sizes, a materialization id and handle ids) without a new
    version number. When the 1.15 reading meets one, the file is read the 1.14 way too and the
    reading that holds is kept; when both hold, see :func:`_more_like_114`. When neither holds,
    the error is the one that got further into the file.
    """
    version = read_header(buf, path)
    d = Decoder(buf, path, 8, version=version)
    try:
        md, error = _decode(buf, path, version, d), None
    except MetadataFormatError as e:
        md, error = None, e
    if version == 3 and d.met_changelog:
        old = Decoder(buf, path, 8, version=version, flink114=True)
        try:
            md_old, error_old = _decode(buf, path, version, old), None
        except MetadataFormatError as e:
            md_old, error_old = None, e
        if md_old is not None and (md is None or _more_like_114(md, md_old, old)):
            return md_old
        if md is None and error_old is not None and (error_old.offset or 0) > (error.offset or 0):
            raise error_old
    if error is not None:
        raise error
    return md


def _more_like_114(md: CheckpointMetadata, md_old: CheckpointMetadata, old: Decoder) -> bool:
    """Both readings of a V3 file hold: which release wrote it?

    Both releases end a V3 file right after the operators, so a reading that ends there beats one
    that leaves bytes over; otherwise the file is 1.14's if it carries codes only 1.14 writes (3
    and 5: 1.15 writes 12 and 11 for the same handles).
    """
    if (md_old.trailer == b"") != (md.trailer == b""):
        return md_old.trailer == b""
    return old.met_114_codes


def _decode(buf: bytes, path: str | None, version: int, d: Decoder) -> CheckpointMetadata:
    at = d.pos
    checkpoint_id = d.i64()
    if checkpoint_id < 0:
        raise d.fail(f"negative checkpoint id {checkpoint_id}", at)
    masters = tuple(d.master_state() for _ in range(d.count("master states", 12)))
    operators = tuple(d.operator_state(version) for _ in range(d.count("operator states", 28)))
    # V4+ append a Java-serialized CheckpointProperties; V3 files normally end here (Java ignores
    # anything after the operators, so trailing bytes are kept for the round trip, not decoded).
    trailer = buf[d.pos :]
    properties = None
    if version >= 4:
        try:
            properties = javaser.decode_checkpoint_properties(trailer)
        except javaser.JavaSerializationError as e:
            raise MetadataFormatError(
                f"unreadable checkpoint properties trailer: {e.message}", path=path, offset=d.pos + e.offset
            ) from None
    return CheckpointMetadata(version, checkpoint_id, masters, operators, trailer, properties)
