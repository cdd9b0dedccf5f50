"""crl.data.idx.read_idx on IDX files written here byte by byte (plain and gzip), good and malformed."""

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from crl.data.idx import read_idx

TYPE_CODES = {
    np.uint8: 0x08,
    np.int8: 0x09,
    np.int16: 0x0B,
    np.int32: 0x0C,
    np.float32: 0x0D,
    np.float64: 0x0E,
}


def _idx_bytes(array: np.ndarray, type_code: int) -> bytes:
    """The IDX encoding written from the format's definition: header, big-endian sizes, big-endian values."""
    header = bytes([0, 0, type_code, array.ndim]) + b"".join(struct.pack(">I", size) for size in array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def _write(path: Path, payload: bytes, compress: bool) -> Path:
    path.write_bytes(gzip.compress(payload) if compress else payload)
    return path


@pytest.mark.parametrize("dtype", list(TYPE_CODES))
@pytest.mark.parametrize("compress", [False, True])
def test_round_trip_every_type(tmp_path: Path, dtype: type, compress: bool) -> None:
    """Every IDX type, plain and gzipped, must parse to the same values, shape and dtype."""
    rng = np.random.default_rng(0)
    array = (rng.normal(size=(3, 4, 5)) * 50).astype(dtype)
    parsed = read_idx(_write(tmp_path / "a.idx", _idx_bytes(array, TYPE_CODES[dtype]), compress))
    assert parsed.dtype == np.dtype(dtype) and parsed.dtype.isnative
    np.testing.assert_array_equal(parsed, array)


def test_gzip_is_detected_by_content_not_name(tmp_path: Path) -> None:
    """A gzipped file without .gz (and a plain one with .gz) must both parse."""
    labels = np.arange(7, dtype=np.uint8)
    np.testing.assert_array_equal(read_idx(_write(tmp_path / "l", _idx_bytes(labels, 8), True)), labels)
    np.testing.assert_array_equal(read_idx(_write(tmp_path / "l.gz", _idx_bytes(labels, 8), False)), labels)


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"\x00\x00", "too short"),
        (b"\x01\x00\x08\x01" + struct.pack(">I", 1) + b"\x00", "not an IDX file"),
        (b"\x00\x00\x07\x01" + struct.pack(">I", 1) + b"\x00", "unknown IDX type code 0x07"),
        (b"\x00\x00\x08\x03" + struct.pack(">I", 1), "announces 3 dimensions"),
        (b"\x00\x00\x08\x02" + struct.pack(">II", 2, 3) + bytes(5), "truncated or corrupt"),
        (b"\x00\x00\x08\x01" + struct.pack(">I", 2) + bytes(3), "truncated or corrupt"),
        (b"\x00\x00\x0c\x01" + struct.pack(">I", 2) + bytes(7), "truncated or corrupt"),
    ],
)
def test_malformed_files_raise_naming_the_file(tmp_path: Path, payload: bytes, match: str) -> None:
    """Short headers, bad magic, unknown types, missing or extra bytes must raise, naming the file."""
    path = _write(tmp_path / "bad.idx", payload, False)
    with pytest.raises(ValueError, match=match) as error:
        read_idx(path)
    assert str(path) in str(error.value)


def test_corrupt_gzip_raises_value_error(tmp_path: Path) -> None:
    """A gzip stream cut in half must raise ValueError naming the file, not a bare zlib/EOF error."""
    data = gzip.compress(_idx_bytes(np.arange(1000, dtype=np.int32), 0x0C))
    path = tmp_path / "cut.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="gzip data is corrupt"):
        read_idx(path)


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    """A missing path must raise FileNotFoundError naming it."""
    with pytest.raises(FileNotFoundError, match=r"nothing\.idx"):
        read_idx(tmp_path / "nothing.idx")
