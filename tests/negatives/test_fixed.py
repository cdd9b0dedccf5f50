"""Fixed negative sets by keyed hash: SCRL's S_i and SSCRL's pool, deterministic, exact in size, with exclusions."""

import math

import pytest
import torch

from crl.negatives import EmbeddedBatch, embed_negatives
from crl.negatives.fixed import FixedPool, FixedSets, keyed_hash, own_sets, pool_of, set_overlap

N = 60


def _keys() -> torch.Tensor:
    """Items 10-14 share one key (identical texts), as do 20 and 21; every other item has its own."""
    keys = torch.arange(N)
    keys[10:15] = 10
    keys[21] = 20
    return keys


def _batch(rows: list[int]) -> EmbeddedBatch:
    return EmbeddedBatch(torch.zeros(len(rows), 3), torch.zeros(len(rows), 3), indices=torch.tensor(rows))


def test_the_hash_is_a_function_of_seed_row_and_column_alone() -> None:
    whole = keyed_hash(7, torch.arange(5), torch.arange(N))
    part = keyed_hash(7, torch.tensor([3, 1]), torch.tensor([40, 2, 9]))
    assert torch.equal(part, whole[[3, 1]][:, [40, 2, 9]])
    assert not torch.equal(keyed_hash(8, torch.arange(5), torch.arange(N)), whole)
    assert int(whole.min()) >= 0 and int(whole.max()) < 2**32


def test_each_set_is_deterministic_in_seed_and_row_exact_in_size_and_leaves_out_the_anchors_key() -> None:
    keys, candidates, m = _keys(), torch.arange(N), 8
    rows = torch.tensor([12, 0, 21, 33])
    sets = own_sets(3, rows, candidates, keys, m)
    again = own_sets(3, torch.tensor([33, 5, 12]), candidates, keys, m)
    assert torch.equal(again[[0, 2]], sets[[3, 0]])  # the same anchor, another batch: the same set
    assert not torch.equal(own_sets(4, rows, candidates, keys, m), sets)
    assert sets.sum(dim=1).tolist() == [m] * 4
    for row, member in zip(rows.tolist(), sets, strict=True):
        chosen = candidates[member]
        assert row not in chosen.tolist() and bool((keys[chosen] != keys[row]).all())
        eligible = candidates[keys[candidates] != keys[row]]
        order = keyed_hash(3, torch.tensor([row]), eligible)[0]
        smallest = eligible[order.argsort()[:m]]
        assert sorted(smallest.tolist()) == chosen.tolist()  # the m eligible items of smallest h(seed, i, j)


def test_sets_are_nested_in_m_and_hold_every_eligible_item_when_fewer_than_m() -> None:
    keys, candidates, rows = _keys(), torch.arange(N), torch.tensor([10, 3])
    small, large = (own_sets(1, rows, candidates, keys, m) for m in (5, 20))
    assert bool((large | ~small).all())
    everything = own_sets(1, rows, candidates, keys, N)
    assert everything.sum(dim=1).tolist() == [N - 5, N - 1]  # item 10 shares its key with 4 others
    tight = own_sets(1, rows, candidates[:12], keys, 11)  # items 0..11: 10 and 11 share anchor 10's key
    assert tight.sum(dim=1).tolist() == [12 - 2, 11]


def test_kept_masks_are_the_computed_ones_and_the_cache_stays_within_its_bytes() -> None:
    """If this fails, a later epoch trains against other sets than the first (a kept mask that is not own_sets'),
    a batch that repeats a row or mixes kept and new rows gets the wrong row order, or the cache outgrows its bound."""
    keys, candidates, m = _keys(), torch.arange(N), 7
    batches = [
        torch.tensor([3, 12, 40]),
        torch.tensor([40, 5, 3, 5]),
        torch.tensor([59, 12]),
        torch.tensor([0]),
    ]
    unbounded = FixedSets(m, candidates, keys, 9)
    bounded = FixedSets(m, candidates, keys, 9, cache_bytes=2 * N + N // 2)
    afresh = FixedSets(m, candidates, keys, 9, cache_bytes=0)
    for _ in range(2):
        for rows in batches:
            expected = own_sets(9, rows, candidates, keys, m)
            for sampler in (unbounded, bounded, afresh):
                assert torch.equal(sampler.sets(rows), expected)
    assert (unbounded.kept_rows, bounded.kept_rows, afresh.kept_rows) == (6, 2, 0)
    many = torch.arange(1100)  # past the first block of 1,024 kept rows
    blocks = FixedSets(5, many, many, 9)
    for rows in (many, many.flip(0)):
        assert torch.equal(blocks.sets(rows), own_sets(9, rows, many, many, 5))
    assert blocks.kept_rows == 1100
    with pytest.raises(ValueError, match="cache_bytes"):
        FixedSets(m, candidates, keys, 9, cache_bytes=-1)


def test_at_m_equal_to_the_candidates_scrl_is_sscrl() -> None:
    keys, candidates, rows = _keys(), torch.arange(N), torch.tensor([10, 21, 40])
    scrl, sscrl = FixedSets(N, candidates, keys, 0), FixedPool(N, candidates, keys, 0)
    assert torch.equal(scrl.sets(rows), sscrl.sets(rows))
    assert set_overlap(scrl, rows).mean == pytest.approx(set_overlap(sscrl, rows).mean)


def test_pairwise_overlap_is_about_m_over_n_as_for_uniform_sets() -> None:
    """Sets of independent anchors share about m/n of their members, and every item is chosen about equally
    often: the hash behaves like uniform draws (hypergeometric mean m^2/(n-1), sd about 3.75 here)."""
    n, m = 400, 100
    sampler = FixedSets(m, torch.arange(n), torch.arange(n), 11)
    report = set_overlap(sampler, torch.arange(60))
    assert report.expected == pytest.approx(m / (n - 1))
    assert abs(report.mean - report.expected) < 0.01  # one pair's sd is 0.0375; 1,770 pairs average it down
    frequency = sampler.sets(torch.arange(n)).sum(dim=0).double()
    assert float(frequency.mean()) == m
    assert float(frequency.std()) < 1.5 * math.sqrt(m * (1 - m / n))  # binomial spread, not clumped
    assert set_overlap(FixedSets(n, torch.arange(n), torch.arange(n), 11), torch.arange(10)).mean > 0.99


def test_the_pool_is_nested_in_m_and_each_anchor_keeps_it_minus_its_key() -> None:
    keys, candidates = _keys(), torch.arange(N)
    assert set(pool_of(2, candidates, 10).tolist()) < set(pool_of(2, candidates, 30).tolist())
    pool = FixedPool(30, candidates, keys, 2)
    drawn = pool.draw(_batch([10, 3]), torch.Generator())
    assert drawn.regime == "shared" and torch.equal(drawn.y, pool.pool)
    expected = keys[pool.pool][None, :] != keys[torch.tensor([10, 3])][:, None]
    assert drawn.mask is not None and torch.equal(drawn.mask, expected)


def test_a_draw_names_only_the_candidates_the_batch_uses_and_embeds_them_once() -> None:
    keys, candidates = (
        torch.arange(120),
        torch.arange(100, 120),
    )  # a pool of 20 items disjoint from the anchors
    sampler = FixedSets(4, candidates, keys, 5)
    drawn = sampler.draw(_batch([0, 1]), torch.Generator())
    assert drawn.y is not None and drawn.mask is not None
    assert bool(drawn.mask.any(dim=0).all()) and drawn.mask.sum(dim=1).tolist() == [4, 4]
    full = sampler.sets(torch.tensor([0, 1]))
    assert torch.equal(candidates[full[0]], drawn.y[drawn.mask[0]])
    embedded = embed_negatives(drawn, lambda ids: ids.double()[:, None].repeat(1, 3))
    assert (
        embedded.kind == "embeddings" and embedded.y is not None and embedded.y.shape == (drawn.y.shape[0], 3)
    )
    assert embedded.mask is drawn.mask and embedded.n_negatives is None


def test_bad_settings_are_refused_with_the_fix() -> None:
    keys, candidates = _keys(), torch.arange(N)
    with pytest.raises(ValueError, match=f"n_negatives = m = {N + 1} exceeds the {N} candidates"):
        FixedSets(N + 1, candidates, keys, 0)
    with pytest.raises(ValueError, match="needs the item indices"):
        FixedSets(3, candidates, keys, 0).draw(
            EmbeddedBatch(torch.zeros(2, 3), torch.zeros(2, 3)), torch.Generator()
        )
    with pytest.raises(ValueError, match="seed"):
        FixedPool(3, candidates, keys, -1)
