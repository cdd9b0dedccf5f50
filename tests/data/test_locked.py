"""LockedFeaturePairs: training pairs first, then the disjoint pool; every item has a key."""

import pytest
import torch

from crl.data import LockedFeaturePairs


def test_training_pairs_come_first_and_the_pool_serves_only_as_candidates() -> None:
    items_x, items_y = torch.arange(12.0).reshape(6, 2), -torch.arange(6.0)[:, None]
    source = LockedFeaturePairs(items_x, items_y, torch.tensor([0, 1, 1, 3, 4, 5]), n_pairs=4)
    assert (source.n_pairs, source.pool_size, source.anchor_shape, source.positive_shape) == (
        4,
        2,
        (2,),
        (1,),
    )
    assert source.negative_candidates.tolist() == [4, 5]
    x, y = source.pairs(torch.tensor([3, 0]), torch.Generator())
    assert torch.equal(x, items_x[[3, 0]]) and torch.equal(y, items_y[[3, 0]])
    assert torch.equal(source.positives(torch.tensor([5]), torch.Generator()), items_y[[5]])
    assert source.item_ids.tolist() == [0, 1, 1, 3, 4, 5]
    no_pool = LockedFeaturePairs(items_x, items_y, torch.arange(6), n_pairs=6)
    assert no_pool.pool_size == 0 and no_pool.negative_candidates.tolist() == list(range(6))


def test_bad_arrays_are_refused() -> None:
    with pytest.raises(ValueError, match="same N items"):
        LockedFeaturePairs(torch.zeros(3, 2), torch.zeros(4, 2), torch.arange(3), n_pairs=3)
    with pytest.raises(ValueError, match=r"n_pairs = 4 must lie in 1\.\.3"):
        LockedFeaturePairs(torch.zeros(3, 2), torch.zeros(3, 2), torch.arange(3), n_pairs=4)
    with pytest.raises(ValueError, match="finite"):
        LockedFeaturePairs(torch.full((3, 2), float("nan")), torch.zeros(3, 2), torch.arange(3), n_pairs=3)
