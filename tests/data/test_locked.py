"""LockedFeaturePairs: training pairs first, then the disjoint pool; every item has a key."""

import pytest
import torch

from crl.data import LockedFeaturePairs
from crl.data.locked import rows_of


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


@pytest.mark.parametrize(
    "indices",
    [[2, 3, 4], [0, 1, 2, 3, 4, 5], [5], [1, 3, 4], [4, 3], [1, 1, 2], [-2, -1], [], [4, 5, 6]],
)
def test_rows_of_is_indexing_and_a_view_only_for_an_ascending_run_inside(indices: list[int]) -> None:
    """If this fails, a fixed set's draw of every candidate reads other features than indexing would (a run
    past the end truncated, a negative run wrapped to an empty slice), or a view leaks where a copy is due."""
    items = torch.arange(18.0).reshape(6, 3)
    index = torch.tensor(indices, dtype=torch.int64)
    run = bool(indices) and indices == list(range(indices[0], indices[0] + len(indices))) and indices[0] >= 0
    if run and indices[-1] >= 6:
        with pytest.raises(IndexError):
            rows_of(items, index)
        return
    got = rows_of(items, index)
    assert torch.equal(got, items[index])
    assert (got.untyped_storage().data_ptr() == items.untyped_storage().data_ptr()) == run


def test_bad_arrays_are_refused() -> None:
    with pytest.raises(ValueError, match="same N items"):
        LockedFeaturePairs(torch.zeros(3, 2), torch.zeros(4, 2), torch.arange(3), n_pairs=3)
    with pytest.raises(ValueError, match=r"n_pairs = 4 must lie in 1\.\.3"):
        LockedFeaturePairs(torch.zeros(3, 2), torch.zeros(3, 2), torch.arange(3), n_pairs=4)
    with pytest.raises(ValueError, match="finite"):
        LockedFeaturePairs(torch.full((3, 2), float("nan")), torch.zeros(3, 2), torch.arange(3), n_pairs=3)
