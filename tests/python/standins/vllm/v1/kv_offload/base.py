"""Stand-in for vllm.v1.kv_offload.base, written from the contract, for tests
only: the offload key.

An OffloadKey is bytes: the block hash (any length; vLLM's are 32 bytes of
sha256) followed by the KV cache group index as 4 bytes, big-endian.
"""
from typing import NewType

OffloadKey = NewType("OffloadKey", bytes)

_GROUP_BYTES = 4


def make_offload_key(block_hash: bytes, group_idx: int) -> OffloadKey:
    """The key of `block_hash` in KV cache group `group_idx`."""
    if not isinstance(block_hash, (bytes, bytearray, memoryview)):
        raise TypeError("block_hash must be bytes, not %s" % type(block_hash).__name__)
    if not 0 <= group_idx < 1 << 32:
        raise ValueError("group index %r does not fit 4 bytes" % (group_idx,))
    return OffloadKey(bytes(block_hash) + group_idx.to_bytes(_GROUP_BYTES, "big"))


def get_offload_block_hash(key: OffloadKey) -> bytes:
    """The block hash part of `key` (all of it but the last 4 bytes)."""
    if len(key) < _GROUP_BYTES:
        raise ValueError("offload key of %d bytes is too short" % len(key))
    return bytes(key[:-_GROUP_BYTES])


def get_offload_group_idx(key: OffloadKey) -> int:
    """The KV cache group index of `key` (its last 4 bytes, big-endian)."""
    if len(key) < _GROUP_BYTES:
        raise ValueError("offload key of %d bytes is too short" % len(key))
    return int.from_bytes(key[-_GROUP_BYTES:], "big")
