"""The operator id Flink derives from a user-set uid, in pure Python.

``StreamGraphHasherV2.generateUserSpecifiedHash`` hashes the uid's UTF-8 bytes with Guava's
``murmur3_128(0)`` (MurmurHash3_x64_128, seed 0) and takes ``asBytes()``: h1 then h2, each
little-endian. Those 16 bytes, as lowercase hex, are the 32-character operator id that
``_metadata`` records, so a snapshot's operator can be matched to a uid of the new job without
a JVM.
"""

from __future__ import annotations

import struct

_M = 0xFFFFFFFFFFFFFFFF
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M
    k ^= k >> 33
    return k


def murmur3_x64_128(data: bytes, seed: int = 0) -> bytes:
    """MurmurHash3_x64_128 of ``data``: the 16 bytes h1, h2, little-endian (Guava's ``asBytes``)."""
    h1 = h2 = seed & _M
    n = len(data)
    blocks = n // 16
    for i in range(blocks):
        k1, k2 = struct.unpack_from("<QQ", data, i * 16)
        k1 = (_rotl((k1 * _C1) & _M, 31) * _C2) & _M
        h1 ^= k1
        h1 = (((_rotl(h1, 27) + h2) & _M) * 5 + 0x52DCE729) & _M
        k2 = (_rotl((k2 * _C2) & _M, 33) * _C1) & _M
        h2 ^= k2
        h2 = (((_rotl(h2, 31) + h1) & _M) * 5 + 0x38495AB5) & _M
    tail = data[blocks * 16 :]
    k1 = k2 = 0
    for i in range(len(tail) - 1, 7, -1):
        k2 ^= tail[i] << ((i - 8) * 8)
    if len(tail) > 8:
        h2 ^= (_rotl((k2 * _C2) & _M, 33) * _C1) & _M
    for i in range(min(len(tail), 8) - 1, -1, -1):
        k1 ^= tail[i] << (i * 8)
    if tail:
        h1 ^= (_rotl((k1 * _C1) & _M, 31) * _C2) & _M
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M
    h2 = (h2 + h1) & _M
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _M
    h2 = (h2 + h1) & _M
    return struct.pack("<QQ", h1, h2)


def operator_id_of_uid(uid: str) -> str:
    """The 32-hex operator id Flink gives an operator whose uid is ``uid``."""
    return murmur3_x64_128(uid.encode("utf-8")).hex()
