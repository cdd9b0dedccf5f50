"""[data] validation: a seeded set of training images left out of the training pairs, on which a run chooses its
vectors; reproducible, disjoint from what is trained on, and recorded in the run's config."""

from pathlib import Path

import pytest
import torch

from crl.data import TwoViewPairs, load_digits
from crl.train.config import ConfigError, config_to_toml, load_config, parse_config, parse_saved_config
from crl.train.data import auto_validation_size, build_source, image_split, labelled_inputs, validation_set


def test_auto_holds_out_5000_or_a_tenth() -> None:
    assert auto_validation_size(60000) == 5000 and auto_validation_size(1438) == 143
    assert auto_validation_size(9) == 0


def test_the_validation_images_are_disjoint_from_the_training_images_and_reproducible() -> None:
    split = image_split(1438, validation="auto", seed=0)
    train, queries = set(split.train.tolist()), set(split.queries.tolist())
    assert len(queries) == 143 and len(train) == 1438 - 143 and not train & queries
    assert train | queries == set(range(1438)) and torch.equal(split.gallery, split.train) and split.held_out
    again = image_split(1438, validation="auto", seed=0)
    assert torch.equal(again.queries, split.queries) and torch.equal(again.train, split.train)
    other = image_split(1438, validation="auto", seed=1)
    assert not torch.equal(other.queries, split.queries)
    assert split.train.tolist() == sorted(split.train.tolist())  # the training images keep the file's order


def test_n_train_keeps_the_first_training_images_after_the_validation_images() -> None:
    split = image_split(1000, validation=100, seed=3, n_train=50)
    full = image_split(1000, validation=100, seed=3)
    assert torch.equal(split.train, full.train[:50]) and torch.equal(split.queries, full.queries)


def test_validation_zero_chooses_on_trained_images_and_says_so() -> None:
    split = image_split(1438, validation=0, seed=0)
    assert torch.equal(split.train, torch.arange(1438)) and not split.held_out
    queries, gallery = set(split.queries.tolist()), set(split.gallery.tolist())
    assert len(queries) == 143 and not queries & gallery and queries | gallery == set(range(1438))


def test_first_image_splits_the_later_images_alone_as_the_whole_split_would() -> None:
    """first = F: the split of images F..N-1 is the split of N - F images, shifted by F."""
    split = image_split(1438, validation="auto", seed=2, n_train=500, first=400)
    alone = image_split(1038, validation="auto", seed=2, n_train=500)
    for field in ("train", "queries", "gallery"):
        assert torch.equal(getattr(split, field), getattr(alone, field) + 400)
    assert split.train.min() >= 400 and split.queries.min() >= 400


def test_a_run_with_first_image_never_sees_the_earlier_images() -> None:
    config = parse_config({"data": {"source": "digits", "first_image": 1000, "validation": 50}}).data
    pool = load_digits("train")
    source = build_source(config, seed=0)
    assert isinstance(source, TwoViewPairs) and source.n_pairs == 1438 - 1000 - 50
    split = image_split(len(pool), validation=50, seed=0, first=1000)
    assert torch.equal(source.images.images, pool.images[split.train])
    validation = validation_set(config)
    assert validation is not None
    assert torch.equal(validation.queries.inputs, pool.images[split.queries].squeeze(1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"validation": 1438}, r"\[data\] validation = 1438 leaves none of the 1438 training images"),
        (
            {"validation": "auto", "n_train": 1300},
            r"\[data\] n_train = 1300 exceeds the 1295 training images left",
        ),
        (
            {"validation": 0, "first": 1438},
            r"\[data\] first_image = 1438 leaves none of the 1438 training images; use at most 1437$",
        ),
        (
            {"validation": 0, "n_train": 1500},
            r"\[data\] n_train = 1500 exceeds the 1438 training images; use at most 1438 \(or 0 for all\)$",
        ),
    ],
)
def test_bad_sizes_are_one_line_naming_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        image_split(1438, seed=0, **kwargs)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("value", [-1, "all", 2.5, True])
def test_a_bad_validation_value_is_one_config_line(value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"data": {"source": "digits", "validation": value}})
    assert str(caught.value) == (
        f"config: [data] validation = {value!r} is not allowed: expected 'auto' or a count of images >= 0 (0: no "
        "validation images)"
    )


def test_the_training_pairs_leave_the_validation_images_out() -> None:
    """The digits source trains on exactly the images of the split's train indices; the validation set's queries
    are the other images, and labelled_inputs("train") is the training pairs' images."""
    config = parse_config({"data": {"source": "digits", "validation_seed": 5}}).data
    pool = load_digits("train")
    split = image_split(len(pool), validation="auto", seed=5)
    source = build_source(config, seed=0)
    assert isinstance(source, TwoViewPairs) and source.n_pairs == 1438 - 143
    assert torch.equal(source.images.images, pool.images[split.train])
    validation = validation_set(config)
    assert validation is not None and validation.held_out and validation.seed == 5
    assert torch.equal(validation.queries.inputs, pool.images[split.queries].squeeze(1))
    assert torch.equal(validation.queries.labels, pool.labels[split.queries])
    train = labelled_inputs(config, "train")
    assert train is not None and torch.equal(train.inputs, validation.gallery.inputs)


def test_a_run_records_its_validation_and_an_old_run_reads_as_none_held_out(tmp_path: Path) -> None:
    """config.toml writes validation and validation_seed; a saved config without them comes from a run made
    before them, which trained on every image; a config file of yours without them gets the default."""
    written = config_to_toml(parse_config({"data": {"source": "digits", "validation": 40}}))
    assert "validation = 40\nvalidation_seed = 0" in written
    old = {"data": {"source": "digits", "pairs": "halves"}}
    saved = parse_saved_config(old).data
    assert saved.validation == 0
    assert parse_saved_config({"data": {"source": "digits", "validation": 7}}).data.validation == 7
    (tmp_path / "mine.toml").write_text('[data]\nsource = "digits"\n', encoding="utf-8")
    assert load_config(tmp_path / "mine.toml").data.validation == "auto"
