"""crl.data.fashion_mnist: the real Debian files, and small IDX folders written here."""

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from crl.data.fashion_mnist import FASHION_MNIST_ROOT, load_fashion_mnist


@pytest.fixture(scope="module")
def train():
    return load_fashion_mnist("train")


def _raw_reference(name: str, offset: int) -> np.ndarray:
    """The loader recipe of DATA.md, independent of crl.data.idx."""
    with gzip.open(FASHION_MNIST_ROOT / name) as handle:
        return np.frombuffer(handle.read(), np.uint8, offset=offset)


def test_real_train_split_shapes_labels_and_values(train) -> None:
    """60,000 float32 images (N, 1, 28, 28) in [0, 1], labels 0..9 with 6,000 per class, pixels = raw / 255."""
    assert train.images.shape == (60000, 1, 28, 28) and train.images.dtype == torch.float32
    assert train.labels.dtype == torch.int64
    assert torch.bincount(train.labels).tolist() == [6000] * 10
    raw_images = _raw_reference("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    raw_labels = _raw_reference("train-labels-idx1-ubyte.gz", 8)
    for i in (0, 1, 31337, 59999):
        np.testing.assert_array_equal(
            (train.images[i, 0] * 255).round().numpy().astype(np.uint8), raw_images[i]
        )
    np.testing.assert_array_equal(train.labels.numpy(), raw_labels)
    assert float(train.images.min()) == 0.0 and float(train.images.max()) == 1.0


def test_real_test_split() -> None:
    """The t10k files: 10,000 images, 1,000 per class."""
    test = load_fashion_mnist("test")
    assert test.images.shape == (10000, 1, 28, 28)
    assert torch.bincount(test.labels).tolist() == [1000] * 10
    assert test.class_names[0] == "T-shirt/top" and test.class_names[9] == "Ankle boot"


def _idx(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(struct.pack(">I", s) for s in array.shape)
    return header + array.astype(np.uint8).tobytes()


def _tiny_root(tmp_path: Path, images: np.ndarray, labels: np.ndarray, gz: bool = True) -> Path:
    suffix = ".gz" if gz else ""
    for name, array in (("t10k-images-idx3-ubyte", images), ("t10k-labels-idx1-ubyte", labels)):
        payload = _idx(array)
        (tmp_path / f"{name}{suffix}").write_bytes(gzip.compress(payload) if gz else payload)
    return tmp_path


@pytest.mark.parametrize("gz", [True, False])
def test_root_argument_reads_a_tiny_copy(tmp_path: Path, gz: bool) -> None:
    """A root folder with small files (gzipped or not) must load exactly those pixels and labels."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    labels = np.array([3, 0, 9, 9, 1], dtype=np.uint8)
    loaded = load_fashion_mnist("test", root=_tiny_root(tmp_path, images, labels, gz))
    np.testing.assert_allclose(loaded.images[:, 0].numpy(), images / 255.0, rtol=0, atol=1e-7)
    assert loaded.labels.tolist() == [3, 0, 9, 9, 1]


def test_missing_files_name_the_debian_package(tmp_path: Path) -> None:
    """Without the files, the error must say how to install them."""
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_fashion_mnist("train", root=tmp_path)


@pytest.mark.parametrize(
    ("images", "labels", "match"),
    [
        (np.zeros((3, 28, 28)), np.zeros(2), "3 images but 2 labels"),
        (np.zeros((3, 28, 27)), np.zeros(3), r"expected uint8 \(N, 28, 28\)"),
        (np.zeros((3, 28, 28)), np.array([0, 10, 1]), "labels must be 0..9"),
        (np.zeros((3, 28, 28)), np.zeros((3, 1)), r"expected uint8 \(N,\)"),
    ],
)
def test_inconsistent_files_raise(tmp_path: Path, images: np.ndarray, labels: np.ndarray, match: str) -> None:
    """Mismatched counts, wrong image size or out-of-range labels must raise ValueError."""
    with pytest.raises(ValueError, match=match):
        load_fashion_mnist("test", root=_tiny_root(tmp_path, images, labels))


def test_bad_split_raises() -> None:
    """Only 'train' and 'test' exist."""
    with pytest.raises(ValueError, match="split: got 'valid'"):
        load_fashion_mnist("valid")  # type: ignore[arg-type]
