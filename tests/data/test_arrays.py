"""crl.data.arrays: PairedArrays as a Dataset and a pair source, and .npz loading without pickle."""

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from crl.data.arrays import PairedArrays, load_paired_npz
from crl.data.images import ImageSet


def test_items_batches_and_subsets() -> None:
    """Items are (x_i, y_i[, label_i]); a DataLoader must collate them; subset must keep the pairing."""
    x, y, labels = torch.arange(10.0)[:, None], -torch.arange(10.0)[:, None], torch.arange(10) % 3
    plain, labelled = PairedArrays(x, y), PairedArrays(x, y, labels)
    assert len(plain[4]) == 2 and torch.equal(plain[4][1], y[4])
    assert len(labelled[4]) == 3 and int(labelled[4][2]) == 1
    bx, by, bl = next(iter(DataLoader(labelled, batch_size=4)))
    assert torch.equal(bx, x[:4]) and torch.equal(by, y[:4]) and torch.equal(bl, labels[:4])
    head = labelled.subset(slice(2, 5))
    assert (
        torch.equal(head.x, x[2:5]) and torch.equal(head.y, y[2:5]) and torch.equal(head.labels, labels[2:5])
    )
    assert plain.anchors(torch.tensor([1]), torch.Generator()).item() == 1.0
    assert plain.positives(torch.tensor([1]), torch.Generator()).item() == -1.0


@pytest.mark.parametrize(
    ("x", "y", "labels", "error", "match"),
    [
        (torch.zeros(3, 2), torch.zeros(4, 2), None, ValueError, "3 anchors but 4 positives"),
        (torch.zeros(0, 2), torch.zeros(0, 2), None, ValueError, "x: expected a tensor"),
        (torch.full((3, 2), float("nan")), torch.zeros(3, 2), None, ValueError, "x: contains NaN"),
        (
            torch.zeros(3, 2),
            torch.zeros(3, 2),
            torch.zeros(3),
            TypeError,
            r"labels has dtype torch\.float32; pass an integer",
        ),
        (
            torch.zeros(3, 2),
            torch.zeros(3, 2),
            torch.zeros(2, dtype=torch.long),
            ValueError,
            "labels: expected",
        ),
    ],
)
def test_bad_arrays_raise(x, y, labels, error: type, match: str) -> None:
    """Unpaired, empty, non-finite or badly labelled arrays must be refused with the argument named."""
    with pytest.raises(error, match=match):
        PairedArrays(x, y, labels)


def test_npz_round_trip_and_errors(tmp_path: Path) -> None:
    """A saved .npz must load back exactly; a missing key lists the keys; object arrays are refused."""
    rng = np.random.default_rng(0)
    x, y, labels = rng.normal(size=(6, 3)), rng.normal(size=(6, 5)), np.arange(6)
    np.savez(tmp_path / "pairs.npz", anchors=x, positives=y, labels=labels)
    pairs = load_paired_npz(tmp_path / "pairs.npz", x_key="anchors", y_key="positives", labels_key="labels")
    assert np.array_equal(pairs.x.numpy(), x) and np.array_equal(pairs.y.numpy(), y)
    assert pairs.labels.tolist() == list(range(6))
    with pytest.raises(KeyError, match="holds"):
        load_paired_npz(tmp_path / "pairs.npz")
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}] * 2, dtype=object), y=np.zeros((2, 1)))
    with pytest.raises(ValueError, match="without pickle"):
        load_paired_npz(tmp_path / "objects.npz")


@pytest.mark.parametrize(
    ("images", "labels", "error", "match"),
    [
        (
            torch.rand(2, 4, 4),
            torch.zeros(2, dtype=torch.long),
            ValueError,
            r"images: expected a \(N, C, H, W\)",
        ),
        (
            torch.rand(2, 1, 4, 4).double(),
            torch.zeros(2, dtype=torch.long),
            TypeError,
            "images: expected float32",
        ),
        (torch.rand(2, 1, 4, 4) * 3, torch.zeros(2, dtype=torch.long), ValueError, r"expected \[0, 1\]"),
        (torch.rand(2, 1, 4, 4), torch.zeros(3, dtype=torch.long), ValueError, "labels: expected shape"),
        (torch.rand(2, 1, 4, 4), torch.tensor([0, 2]), ValueError, "labels must lie in 0..1"),
    ],
)
def test_image_set_validates(images, labels, error: type, match: str) -> None:
    """ImageSet must refuse wrong layouts, dtypes, ranges and labels outside its classes."""
    with pytest.raises(error, match=match):
        ImageSet(images, labels, ("a", "b"))
