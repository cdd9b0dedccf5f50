"""The step loss: routing of every negatives kind to the objectives, and the gathered in-batch loss.

References: the float64 loops of tests/objectives/reference.py (written from docs/theory.md, not from crl).
"""

import pytest
import torch

from crl.negatives import Draw, EmbeddedBatch
from crl.train.loss import batch_loss
from tests.objectives.reference import reference_loss


def _unit(rows: int, d: int, g: torch.Generator) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.randn(rows, d, generator=g, dtype=torch.float64), dim=1)


@pytest.mark.parametrize("form", ["infonce", "dcl", "gcl"])
@pytest.mark.parametrize("symmetric", [False, True])
def test_gathered_loss_averaged_over_ranks_is_the_global_in_batch_loss(form: str, symmetric: bool) -> None:
    """Slices of a K=3 global batch, scored against all 3n candidates, must average to the global loss.

    If this failed, a rank would see a wrong candidate set (own positive as a negative, or a missing rank).
    """
    g = torch.Generator().manual_seed(0)
    n, world, tau = 4, 3, 0.3
    a, p = _unit(n * world, 5, g), _unit(n * world, 5, g)
    per_rank = [
        batch_loss(
            EmbeddedBatch(a[r * n : (r + 1) * n], p[r * n : (r + 1) * n]),
            Draw("shared", "in_batch", y=p, x=a, batch_offset=r * n),
            tau=torch.tensor(tau, dtype=torch.float64),
            form=form,
            symmetric=symmetric,
        )
        for r in range(world)
    ]
    expected = sum(reference_loss(a, p, None, tau=tau, form=form, regime="shared", symmetric=symmetric))
    assert abs(float(sum(per_rank)) / world - expected / (n * world)) < 1e-12


def test_batch_loss_routes_each_kind_to_its_regime() -> None:
    """In-batch, shared (one- and two-sided) and independent negatives must each give their loop reference."""
    g = torch.Generator().manual_seed(1)
    n, m, tau = 4, 3, 0.5
    a, p = _unit(n, 3, g), _unit(n, 3, g)
    neg_y, neg_x, independent = _unit(m, 3, g), _unit(m, 3, g), _unit(n * m, 3, g).view(n, m, 3)
    batch = EmbeddedBatch(a, p)
    t = torch.tensor(tau, dtype=torch.float64)
    cases = [
        (Draw("shared", "in_batch"), None, "shared", False),
        (Draw("shared", "embeddings", y=neg_y), neg_y, "shared", False),
        (Draw("shared", "embeddings", y=neg_y, x=neg_x), (neg_y, neg_x), "shared", True),
        (Draw("independent", "embeddings", y=independent), independent, "independent", False),
    ]
    for negatives, reference_negatives, regime, symmetric in cases:
        value = batch_loss(batch, negatives, tau=t, form="infonce", symmetric=symmetric)
        expected = reference_loss(
            a, p, reference_negatives, tau=tau, form="infonce", regime=regime, symmetric=symmetric
        )
        assert abs(float(value) - sum(expected) / n) < 1e-12


def test_batch_loss_refuses_unembedded_or_one_sided_negatives() -> None:
    """Indices are not embeddings, and a symmetric loss without x' negatives is undefined: both must raise."""
    batch = EmbeddedBatch(torch.randn(3, 2), torch.randn(3, 2))
    with pytest.raises(ValueError, match="embed_negatives"):
        batch_loss(
            batch,
            Draw("shared", "indices", y=torch.arange(3)),
            tau=torch.tensor(0.1),
            form="dcl",
            symmetric=False,
        )
    with pytest.raises(ValueError, match="anchor-side"):
        batch_loss(
            batch,
            Draw("shared", "embeddings", y=torch.randn(4, 2)),
            tau=torch.tensor(0.1),
            form="dcl",
            symmetric=True,
        )


@pytest.mark.parametrize("form", ["infonce", "gcl"])
def test_an_anchor_with_an_empty_fixed_set_is_left_out_of_the_mean(form: str) -> None:
    """SSCRL's pool of m = 1 holding anchor 1's own item leaves S_1 empty: L_hat is the mean of the other anchors'
    terms (float64 loop reference per anchor), finite, and anchor 1 gets no gradient; all sets empty gives 0."""
    g = torch.Generator().manual_seed(2)
    a, p, y = _unit(3, 4, g).requires_grad_(), _unit(3, 4, g), _unit(2, 4, g)
    mask = torch.tensor([[True, False], [False, False], [True, True]])
    t = torch.tensor(0.5, dtype=torch.float64)
    value = batch_loss(
        EmbeddedBatch(a, p), Draw("shared", "embeddings", y=y, mask=mask), tau=t, form=form, symmetric=False
    )
    terms = [
        reference_loss(
            a[i : i + 1].detach(),
            p[i : i + 1],
            y[mask[i]],
            tau=0.5,
            form=form,
            regime="shared",
            symmetric=False,
        )[0]
        for i in (0, 2)
    ]
    assert abs(float(value.detach()) - sum(terms) / 2) < 1e-12
    value.backward()
    assert a.grad is not None and torch.isfinite(a.grad).all() and a.grad[1].abs().max() == 0
    none = torch.zeros_like(mask)
    empty = batch_loss(
        EmbeddedBatch(a, p), Draw("shared", "embeddings", y=y, mask=none), tau=t, form=form, symmetric=False
    )
    assert float(empty.detach()) == 0.0
