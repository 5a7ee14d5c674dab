"""A minimal writer of TF1 checkpoint ``.index`` files (LevelDB table, uncompressed, one data block) for hostile
test cases: entries whose fields are crafted but whose block checksums are valid, so only the entry checks of
``speechblocks.tf1_checkpoint_file`` can refuse them. Written from the format descriptions (leveldb
``table_format.md``, tensorflow ``tensor_bundle.proto``), independently of the library's parser."""
from __future__ import annotations

from speechblocks.crc32c import crc32c, mask

MAGIC = 0xDB4775248B80FB57


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 -> ten bytes of two's complement, as protobuf does
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def _field_bytes(number: int, value: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(value)) + value


def header(num_shards: int = 1, big_endian: bool = False) -> bytes:
    """A ``BundleHeaderProto``."""
    return (_field_varint(1, num_shards) + (_field_varint(2, 1) if big_endian else b"")
            + _field_bytes(3, _field_varint(1, 1)))


def entry(dtype: int, shape, offset: int, size: int, crc: int, shard: int = 0) -> bytes:
    """A ``BundleEntryProto`` (``crc`` unmasked; stored masked, as TensorFlow does)."""
    dims = b"".join(_field_bytes(2, _field_varint(1, d)) for d in shape)
    return (_field_varint(1, dtype) + _field_bytes(2, dims) + _field_varint(3, shard) + _field_varint(4, offset)
            + _field_varint(5, size) + varint(6 << 3 | 5) + mask(crc).to_bytes(4, "little"))


def _block(pairs) -> bytes:
    body = bytearray()
    for key, value in pairs:  # no key sharing: one restart point per entry
        body += varint(0) + varint(len(key)) + varint(len(value)) + key + value
    n = max(1, len(pairs))
    restarts, pos = [], 0
    for key, value in pairs:
        restarts.append(pos)
        pos += len(varint(0) + varint(len(key)) + varint(len(value))) + len(key) + len(value)
    restarts = restarts or [0]
    body += b"".join(r.to_bytes(4, "little") for r in restarts) + n.to_bytes(4, "little")
    return bytes(body)


def _with_trailer(block: bytes) -> bytes:
    return block + b"\x00" + mask(crc32c(block + b"\x00")).to_bytes(4, "little")


def table(pairs) -> bytes:
    """The bytes of a table holding ``pairs`` (``[(key bytes, value bytes)]``, in the order given)."""
    data = _with_trailer(_block(pairs))
    meta_at = len(data)
    meta = _with_trailer(_block([]))
    index_at = meta_at + len(meta)
    last = pairs[-1][0] if pairs else b""
    index = _with_trailer(_block([(last + b"\xff", varint(0) + varint(len(data) - 5))]))
    handles = varint(meta_at) + varint(len(meta) - 5) + varint(index_at) + varint(len(index) - 5)
    footer = handles + b"\x00" * (40 - len(handles)) + MAGIC.to_bytes(8, "little")
    return data + meta + index + footer
