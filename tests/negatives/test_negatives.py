"""Tests of crl.negatives: the regimes, m independent of n, the queue's FIFO memory, embedding of draws."""

from collections import deque

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from crl.negatives import (
    Draw,
    EmbeddedBatch,
    Gathered,
    Independent,
    Queue,
    Shared,
    all_gather_with_grad,
    embed_negatives,
)


def _batch(n: int, d: int = 3, seed: int = 0) -> EmbeddedBatch:
    g = torch.Generator().manual_seed(seed)
    return EmbeddedBatch(torch.randn(n, d, generator=g), torch.randn(n, d, generator=g))


def _gaussian(shape: tuple[int, ...], rng: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, 2, generator=rng)


def test_in_batch_marks_the_batch_itself() -> None:
    """Shared.in_batch must not invent negatives: it returns the in-batch marker of the shared regime."""
    drawn = Shared.in_batch().draw(_batch(5), torch.Generator())
    assert (drawn.regime, drawn.kind, drawn.y, drawn.x) == ("shared", "in_batch", None, None)


@pytest.mark.parametrize("n", [1, 7, 64])
def test_shared_pool_draw_has_m_rows_whatever_the_batch_size(n: int) -> None:
    """m is a parameter of its own: a shared draw has m indices for every batch size n."""
    drawn = Shared.from_pool(pool_size=30, n_negatives=11).draw(_batch(n), torch.Generator().manual_seed(1))
    assert drawn.regime == "shared" and drawn.kind == "indices"
    assert drawn.y.shape == (11,) and drawn.n_negatives == 11
    assert int(drawn.y.min()) >= 0 and int(drawn.y.max()) < 30


@pytest.mark.parametrize("n", [1, 7, 64])
def test_independent_pool_draw_is_n_by_m(n: int) -> None:
    """SCRL: every anchor gets its own m negatives, shape (n, m), with m independent of n."""
    drawn = Independent.from_pool(pool_size=30, n_negatives=5).draw(
        _batch(n), torch.Generator().manual_seed(1)
    )
    assert drawn.regime == "independent" and drawn.y.shape == (n, 5) and drawn.n_negatives == 5


def test_pool_draws_are_uniform_over_the_pool() -> None:
    """Pool negatives are i.i.d. from the empirical marginal: a chi-square test against the uniform law."""
    drawn = Independent.from_pool(pool_size=13, n_negatives=500).draw(
        _batch(40), torch.Generator().manual_seed(3)
    )
    counts = np.bincount(drawn.y.flatten().numpy(), minlength=13)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_independent_rows_are_not_shared() -> None:
    """In SCRL the rows of different anchors are independent draws, so they must not all coincide."""
    drawn = Independent.from_pool(pool_size=1000, n_negatives=16).draw(
        _batch(8), torch.Generator().manual_seed(0)
    )
    assert len({tuple(row.tolist()) for row in drawn.y}) == 8


def test_generator_sources_receive_the_shape_and_generator() -> None:
    """Generated negatives have shape (m, ...) shared and (n, m, ...) independent, drawn from the rng passed in."""
    shared = Shared.from_generator(_gaussian, 6).draw(_batch(4), torch.Generator().manual_seed(2))
    independent = Independent.from_generator(_gaussian, 6).draw(_batch(4), torch.Generator().manual_seed(2))
    assert shared.kind == "samples" and shared.y.shape == (6, 2)
    assert independent.kind == "samples" and independent.y.shape == (4, 6, 2)
    assert torch.equal(shared.y, torch.randn(6, 2, generator=torch.Generator().manual_seed(2)))


def test_bad_arguments_name_the_argument() -> None:
    """Bad m, pool size or a missing source must raise ValueError naming the problem."""
    with pytest.raises(ValueError, match="n_negatives"):
        Shared.from_pool(10, 0)
    with pytest.raises(ValueError, match="pool_size"):
        Independent.from_pool(0, 3)
    with pytest.raises(ValueError, match="exactly one"):
        Independent(3)
    with pytest.raises(ValueError, match="in-batch"):
        Shared(pool_size=4)


@pytest.mark.parametrize("regime", ["shared", "independent"])
def test_embed_negatives_matches_a_lookup_loop(regime: str) -> None:
    """Embedding indices must put g(pool[idx[i, j]]) at [i, j]: compared with an explicit loop."""
    table_y = torch.randn(20, 4, dtype=torch.float64)
    table_x = torch.randn(20, 4, dtype=torch.float64)
    shape = (7,) if regime == "shared" else (3, 7)
    indices = torch.randint(20, shape, generator=torch.Generator().manual_seed(0))
    embedded = embed_negatives(Draw(regime, "indices", y=indices), table_y.__getitem__, table_x.__getitem__)
    assert embedded.kind == "embeddings" and embedded.y.shape == (*shape, 4)
    flat_indices, flat_y = indices.reshape(-1), embedded.y.reshape(-1, 4)
    for k in range(flat_indices.numel()):
        assert torch.equal(flat_y[k], table_y[flat_indices[k]])
    if regime == "shared":
        for k in range(flat_indices.numel()):
            assert torch.equal(embedded.x[k], table_x[flat_indices[k]])
    else:
        assert embedded.x is None


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(1, 9),
    batch_sizes=st.lists(st.integers(1, 12), min_size=1, max_size=8),
)
def test_queue_holds_the_most_recent_positives(size: int, batch_sizes: list[int]) -> None:
    """The queue must hold exactly the last `size` enqueued positives (a deque reference), anchors alongside."""
    queue = Queue(size, 2, two_sided=True)
    reference: deque[tuple[float, float]] = deque(maxlen=size)
    counter = 0
    for n in batch_sizes:
        rows = torch.arange(counter, counter + 2 * n, dtype=torch.float32).reshape(n, 2)
        counter += 2 * n
        queue.update(EmbeddedBatch(anchors=-rows, positives=rows))
        reference.extend(tuple(row.tolist()) for row in rows)
    drawn = queue.draw(_batch(2, d=2), torch.Generator())
    assert drawn.kind == "embeddings" and drawn.regime == "shared"
    assert sorted(tuple(row.tolist()) for row in drawn.y) == sorted(reference)
    assert torch.equal(drawn.x, -drawn.y)


def test_empty_queue_falls_back_to_in_batch() -> None:
    """Before anything is enqueued the queue has no negatives; it must say in-batch instead of m = 0."""
    assert Queue(4, 3).draw(_batch(2), torch.Generator()).kind == "in_batch"


def test_queue_state_round_trip_restores_the_memory() -> None:
    """A queue rebuilt from state_dict must draw and update exactly like the original (checkpoint resume)."""
    original = Queue(5, 3)
    for seed in range(3):
        original.update(_batch(2, seed=seed))
    restored = Queue(5, 3)
    restored.load_state_dict(original.state_dict())
    for queue in (original, restored):
        queue.update(_batch(4, seed=9))
    assert torch.equal(
        original.draw(_batch(1), torch.Generator()).y, restored.draw(_batch(1), torch.Generator()).y
    )
    with pytest.raises(ValueError, match="size, dim"):
        Queue(6, 3).load_state_dict(original.state_dict())


def test_queue_does_not_carry_gradients() -> None:
    """Stored embeddings must be detached, or the graph of old steps would be kept alive and backpropagated."""
    positives = torch.randn(3, 2, requires_grad=True)
    queue = Queue(4, 2)
    queue.update(EmbeddedBatch(positives * 2, positives * 2))
    assert not queue.draw(_batch(1, d=2), torch.Generator()).y.requires_grad


def test_gather_without_process_group_is_the_identity() -> None:
    """One process: gathering returns the tensor itself, and Gathered degrades to plain in-batch negatives."""
    z = torch.randn(3, 2)
    assert all_gather_with_grad(z) is z
    assert Gathered().draw(_batch(3), torch.Generator()).y is None
