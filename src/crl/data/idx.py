"""Reader for the IDX format of (Fashion-)MNIST, plain or gzip-compressed.

Layout (big-endian): two zero bytes, a type code, the number of dimensions r, then r uint32 sizes, then the
values in C order. Type codes: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64.
"""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path

import numpy as np

_IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


def read_idx(path: str | Path) -> np.ndarray:
    """Parse one IDX file into a numpy array of native byte order.

    Args:
        path: the file; gzip compression is detected from its first two bytes, not its name.

    Returns:
        The array, of the shape and dtype its header states.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if the file is not valid gzip, has a bad header, or holds more or fewer values than its
            header states. The message names the file.
    """
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise ValueError(f"{path}: {len(raw)} bytes is too short for an IDX header (4 bytes + sizes).")
    if raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (first two bytes {raw[:2].hex()}, expected 0000).")
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_TYPES:
        known = ", ".join(f"0x{code:02X}" for code in _IDX_TYPES)
        raise ValueError(f"{path}: unknown IDX type code 0x{type_code:02X}; expected one of {known}.")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: header announces {ndim} dimensions but the file ends at byte {len(raw)}.")
    shape = tuple(int(size) for size in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_TYPES[type_code]
    expected = math.prod(shape) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(
            f"{path}: header says shape {shape} of {dtype.name} ({expected} bytes) but {len(raw) - header} "
            "bytes follow it; the file is truncated or corrupt (re-install or re-download it)."
        )
    values = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such IDX file.")
    raw = path.read_bytes()
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as error:
        raise ValueError(
            f"{path}: gzip data is corrupt ({error}); re-install or re-download the file."
        ) from error
