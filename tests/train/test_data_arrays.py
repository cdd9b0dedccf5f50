"""[data] source = "arrays": your own pairs split into training and held-out pairs, with errors naming the field.

If these fail, training and crl eval could see overlapping or different held-out pairs, or a typo in a key
would surface as a raw KeyError.
"""

from pathlib import Path

import numpy as np
import pytest
import torch

from crl.train.config import ArraysData, ConfigError, parse_config
from crl.train.data import build_source, heldout_pairs, labelled_inputs
from crl.train.data_arrays import read_split


def _save(path: Path, n: int, dim: int = 3, **extra: np.ndarray) -> None:
    x = np.arange(n * dim, dtype=np.float64).reshape(n, dim)
    np.savez(path, x=x, y=-x, **extra)


def test_fraction_split_is_seeded_disjoint_and_covers_the_file(tmp_path: Path) -> None:
    _save(tmp_path / "p.npz", 50)
    config = ArraysData(path=str(tmp_path / "p.npz"), heldout_fraction=0.2, split_seed=3)
    train, heldout = read_split(config, "train"), read_split(config, "test")
    assert (train.n_pairs, heldout.n_pairs) == (40, 10) and train.x.dtype == torch.float32
    rows = sorted(int(v) for v in torch.cat([train.x[:, 0], heldout.x[:, 0]]) / 3)
    assert rows == list(range(50))
    assert torch.equal(read_split(config, "test").x, heldout.x)
    other = read_split(config.model_copy(update={"split_seed": 4}), "test")
    assert not torch.equal(other.x, heldout.x)
    assert read_split(config.model_copy(update={"n_train": 5}), "train").n_pairs == 5


def test_heldout_file_and_labels(tmp_path: Path) -> None:
    _save(tmp_path / "train.npz", 20, c=np.arange(20) % 4)
    _save(tmp_path / "test.npz", 8, c=np.arange(8) % 5)
    document = {
        "data": {
            "source": "arrays",
            "path": str(tmp_path / "train.npz"),
            "heldout_path": str(tmp_path / "test.npz"),
            "labels_key": "c",
        }
    }
    config = parse_config(document)
    assert build_source(config.data, seed=0).n_pairs == 20 and heldout_pairs(config).n_pairs == 8
    labelled = labelled_inputs(config.data, "test")
    assert labelled is not None and labelled.n_classes == 5 and labelled.inputs.shape == (8, 3)


@pytest.mark.parametrize(
    ("data", "needles"),
    [
        ({"x_key": "anchors"}, ["x_key = 'anchors'", "holds ['x', 'y']"]),
        ({"path": "nowhere.npz"}, ["nowhere.npz", "does not exist"]),
        ({"heldout_fraction": 0.999}, ["leaves no training pairs"]),
        ({"n_train": 99}, ["n_train = 99", "at most 9"]),
        ({"heldout_path": "DIM5"}, ["heldout_path", "(5,)", "(3,)"]),
    ],
)
def test_bad_arrays_name_the_field(tmp_path: Path, data: dict, needles: list[str]) -> None:
    _save(tmp_path / "p.npz", 10)
    _save(tmp_path / "dim5.npz", 4, dim=5)
    values = {"path": str(tmp_path / "p.npz"), **data}
    if values.get("heldout_path") == "DIM5":
        values["heldout_path"] = str(tmp_path / "dim5.npz")
    with pytest.raises((ValueError, OSError)) as caught:
        read_split(ArraysData(**values), "train")
    for needle in needles:
        assert needle in str(caught.value)


def test_no_heldout_pairs_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="heldout_fraction = 0 without heldout_path"):
        parse_config({"data": {"source": "arrays", "heldout_fraction": 0.0}})


def test_a_folder_of_npy_files(tmp_path: Path) -> None:
    folder = tmp_path / "arrays"
    folder.mkdir()
    np.save(folder / "x.npy", np.ones((10, 2)))
    np.save(folder / "y.npy", np.zeros((10, 4)))
    train = read_split(ArraysData(path=str(folder)), "train")
    assert train.n_pairs == 9 and train.positive_shape == (4,)
