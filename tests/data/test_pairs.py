"""crl.data.pairs: halves, two augmented views and synthetic pairs as pair sources."""

import pytest
import torch

from crl.data.arrays import PairedArrays
from crl.data.augment import ImageAugmentation
from crl.data.images import ImageSet
from crl.data.pairs import SyntheticPairs, TwoViewPairs, halves_pairs, split_halves
from crl.synthetic.vmf import VMFUniform


def _image_set(n: int = 12, c: int = 1, h: int = 28, w: int = 28) -> ImageSet:
    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (n,), generator=gen)
    return ImageSet(torch.rand(n, c, h, w, generator=gen), labels, ("a", "b", "c"))


@pytest.mark.parametrize("width", [28, 7, 2])
def test_halves_concatenate_back_to_the_image(width: int) -> None:
    """Left and right halves side by side must give the image back, for even and odd widths."""
    images = _image_set(w=width)
    left, right = split_halves(images.images)
    assert left.shape[-1] == width // 2 and right.shape[-1] == width - width // 2
    assert torch.equal(torch.cat([left, right], dim=-1), images.images)


def test_halves_pairs_of_grey_images_are_h_by_half_w_items() -> None:
    """28x28 grey images give (N, 28, 14) anchors and positives with the labels; x = left, y = right."""
    images = _image_set()
    pairs = halves_pairs(images)
    assert pairs.anchor_shape == (28, 14) and pairs.positive_shape == (28, 14) and pairs.n_pairs == 12
    assert torch.equal(torch.cat([pairs.x, pairs.y], dim=-1), images.images[:, 0])
    assert torch.equal(pairs.labels, images.labels)
    x, y = pairs.pairs(torch.tensor([3, 1]), torch.Generator())
    assert torch.equal(x, pairs.x[[3, 1]]) and torch.equal(y, pairs.y[[3, 1]])


def test_two_views_are_deterministic_fresh_and_shaped() -> None:
    """Same seed -> same views; the two views differ; a second call draws new views; items are (H, W)."""
    source = TwoViewPairs(_image_set())
    index = torch.tensor([0, 5, 7])
    x, y = source.pairs(index, torch.Generator().manual_seed(1))
    x2, y2 = source.pairs(index, torch.Generator().manual_seed(1))
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert x.shape == (3, 28, 28) and source.anchor_shape == (28, 28) == source.positive_shape
    assert not torch.equal(x, y)
    generator = torch.Generator().manual_seed(1)
    first, second = source.anchors(index, generator), source.anchors(index, generator)
    assert not torch.equal(first, second)
    assert source.generate_negatives is None and source.n_pairs == 12 == len(source)


def test_identity_augmentation_gives_the_images_and_colour_keeps_channels() -> None:
    """With an identity augmentation both views are the images; C = 3 items keep (3, H, W)."""
    images = _image_set(c=3, h=6, w=5)
    source = TwoViewPairs(images, augmentation=lambda batch, generator: batch)
    x, y = source.pairs(torch.arange(12), torch.Generator())
    assert torch.equal(x, images.images) and torch.equal(y, images.images)
    assert source.anchor_shape == (3, 6, 5)


def test_materialise_is_one_fixed_draw_with_labels() -> None:
    """materialise must return PairedArrays of every image, reproducible from the seed, in any batch size."""
    images = _image_set()
    source = TwoViewPairs(
        images, ImageAugmentation(erase_p=0.0, noise_std=0.0, crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0))
    )
    fixed = source.materialise(torch.Generator().manual_seed(0), batch_size=5)
    again = source.materialise(torch.Generator().manual_seed(0), batch_size=5)
    assert (
        isinstance(fixed, PairedArrays) and fixed.n_pairs == 12 and torch.equal(fixed.labels, images.labels)
    )
    assert torch.equal(fixed.x, again.x) and torch.equal(fixed.y, again.y)
    for view in (fixed.x, fixed.y):
        is_flip = (view == images.images[:, 0].flip(-1)).flatten(1).all(1)
        is_same = (view == images.images[:, 0]).flatten(1).all(1)
        assert bool((is_flip | is_same).all())


class _FakeTruth:
    """A pair sampler: x ~ N(0, I_2), y = 2 x; negatives N(0, I_2)."""

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 2, generator=generator, dtype=torch.float64)
        return x, 2 * x

    def sample_negatives(self, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        return torch.randn(*shape, 2, generator=generator, dtype=torch.float64)


def test_synthetic_pairs_materialise_the_truths_draw() -> None:
    """SyntheticPairs must hold exactly truth.sample(n, g) and expose truth.sample_negatives, cast to dtype."""
    pairs = SyntheticPairs(_FakeTruth(), 50, torch.Generator().manual_seed(3), dtype=torch.float32)
    x = torch.randn(50, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert torch.equal(pairs.x, x.float()) and torch.equal(pairs.y, (2 * x).float())
    assert pairs.anchor_shape == (2,) and pairs.labels is None
    generate = pairs.generate_negatives
    assert generate is not None
    negatives = generate((4, 3), torch.Generator().manual_seed(0))
    assert negatives.shape == (4, 3, 2) and negatives.dtype == torch.float32


def test_synthetic_pairs_from_a_real_ground_truth() -> None:
    """The vMF truth of crl.synthetic plugs in: unit-norm pairs, negatives from its p-."""
    truth = VMFUniform(3, kappa=5.0)
    pairs = SyntheticPairs(truth, 100, torch.Generator().manual_seed(0))
    torch.testing.assert_close(pairs.y.norm(dim=1), torch.ones(100, dtype=torch.float64))
    assert pairs.generate_negatives is not None
    assert pairs.generate_negatives((7,), torch.Generator()).shape == (7, 3)


class _OnlySample:
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(self.rows, 2), torch.zeros(n, 2)


def test_synthetic_pairs_errors_and_pool_fallback() -> None:
    """Bad n, a non-sampler, a wrong-length draw must raise; without sample_negatives the pool is used."""
    assert SyntheticPairs(_OnlySample(4), 4, torch.Generator()).generate_negatives is None
    with pytest.raises(ValueError, match="n: got 0"):
        SyntheticPairs(_OnlySample(4), 0, torch.Generator())
    with pytest.raises(TypeError, match="truth: expected"):
        SyntheticPairs(object(), 4, torch.Generator())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="returned 3 anchors"):
        SyntheticPairs(_OnlySample(3), 4, torch.Generator())
    with pytest.raises(TypeError, match="generator"):
        SyntheticPairs(_OnlySample(4), 4, 0)  # type: ignore[arg-type]


def test_pair_makers_refuse_raw_tensors() -> None:
    """halves_pairs / TwoViewPairs take an ImageSet; a bare tensor must raise TypeError saying so."""
    with pytest.raises(TypeError, match="ImageSet"):
        halves_pairs(torch.rand(2, 1, 4, 4))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ImageSet"):
        TwoViewPairs(torch.rand(2, 1, 4, 4))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="W >= 2"):
        split_halves(torch.rand(2, 1, 4, 1))
