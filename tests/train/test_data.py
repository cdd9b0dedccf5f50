"""The data sources' registry: every ``[data]`` kind has one entry, and a synthetic kind names its truth."""

from typing import get_args

from crl.data.text import TEXT_SOURCES
from crl.synthetic import GaussianTwoTower, VMFUniform
from crl.train.config import DataConfig, SyntheticData, TextData, parse_config
from crl.train.data import DATA_KINDS, data_kind, synthetic_truth


def test_every_data_kind_has_one_registry_entry() -> None:
    kinds = set(get_args(get_args(DataConfig)[0]))
    assert set(DATA_KINDS) == kinds


def test_every_text_source_of_the_config_has_one_text_registry_entry() -> None:
    sources = {get_args(kind.model_fields["source"].annotation)[0] for kind in get_args(TextData)}
    assert set(TEXT_SOURCES) == sources


def test_only_synthetic_sources_have_a_truth() -> None:
    assert [kind for kind, entry in DATA_KINDS.items() if entry.truth is not None] == [SyntheticData]


def test_synthetic_truth_follows_the_config() -> None:
    vmf = parse_config({"data": {"source": "synthetic", "n_train": 8, "dim": 3, "kappa": 2.0}}).data
    gaussian = parse_config({"data": {"source": "synthetic", "n_train": 8, "truth": "gaussian"}}).data
    assert isinstance(vmf, SyntheticData) and isinstance(gaussian, SyntheticData)
    assert isinstance(synthetic_truth(vmf), VMFUniform)
    assert isinstance(synthetic_truth(gaussian), GaussianTwoTower)
    assert data_kind(vmf).truth is synthetic_truth


def test_no_labels_names_the_fix_for_arrays() -> None:
    arrays = parse_config({"data": {"source": "arrays"}}).data
    digits = parse_config({"data": {"source": "digits"}}).data
    assert "labels_key" in data_kind(arrays).no_labels(arrays)
    assert data_kind(digits).no_labels(digits) == "[data] source = 'digits' has no class labels"
