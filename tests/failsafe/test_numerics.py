"""Extreme finite inputs of the losses, and the sampler/slope arguments that failed deep inside numpy or torch.

Each loss gives the value an independent float64 computation gives, or a ValueError naming the argument and the
range: a NaN or a rounded-away value is never returned.
"""

import math
import re
from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import Tensor

from crl.objectives import CVaR, contrastive_loss, contrastive_loss_from_scores, oce_loss, sigmoid_loss
from crl.stats import loglog_slope
from crl.synthetic.vmf import sample_vmf
from tests.objectives.reference import reference_loss, unit


def _pair(dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(0)
    return unit(6, 4, generator, dtype), unit(6, 4, generator, dtype)


def test_a_tau_whose_logits_overflow_float32_is_refused() -> None:
    """tau = 1e-50 on float32 unit vectors was NaN (the float64 value is about 1e50, which float32 cannot hold)."""
    anchors, positives = _pair(torch.float32)
    with pytest.raises(ValueError, match=r"tau=1e-50 is outside \[.*\], the range in which .* fit float32"):
        contrastive_loss(anchors, positives, tau=1e-50)


def test_a_tiny_tau_in_float64_gives_the_reference_value() -> None:
    """float64 holds logits of 1e50: the loss equals the float64 loops (about 1e50), not NaN."""
    anchors, positives = _pair(torch.float64)
    expected = (
        sum(
            reference_loss(
                anchors, positives, None, tau=1e-50, form="infonce", regime="shared", symmetric=False
            )
        )
        / 6
    )
    assert float(contrastive_loss(anchors, positives, tau=1e-50)) == pytest.approx(expected, rel=1e-12)
    assert 1e48 < expected < 1e51


def test_gcl_with_a_huge_tau_is_refused_and_the_entropic_oce_computes_it() -> None:
    """GCL at tau = 1e300 was NaN in float32 and 0.0 in float64 (lse - log m rounds to 0); its value is the mean
    gap mean_j Delta_ij, which the entropic OCE, the same risk evaluated with expm1, returns."""
    anchors, positives = _pair(torch.float64)
    with pytest.raises(ValueError, match=r"tau=1e\+300 with form='gcl': beyond tau = .*oce_loss"):
        contrastive_loss(anchors, positives, tau=1e300, form="gcl")
    with pytest.raises(ValueError, match=r"tau=1e\+300 is outside .* fit float32"):
        contrastive_loss(anchors.float(), positives.float(), tau=1e300, form="gcl")
    scores = (anchors @ positives.T).tolist()
    gaps = [[row[j] - row[i] for j in range(6) if j != i] for i, row in enumerate(scores)]
    per_anchor = [1e300 * math.log1p(math.fsum(math.expm1(g / 1e300) for g in row) / 5) for row in gaps]
    expected = math.fsum(per_anchor) / 6
    assert float(oce_loss(anchors, positives, tau=1e300)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "loss",
    [
        lambda a, p: contrastive_loss(a, p, tau=0.1),
        lambda a, p: contrastive_loss(a, p, tau=0.1, form="gcl", symmetric=True, tiling="tiled"),
        lambda a, p: sigmoid_loss(a, p, tau=0.1),
        lambda a, p: oce_loss(a, p, tau=0.1),
        lambda a, p: oce_loss(a, p, tau=0.1, disutility=CVaR(0.5)),
    ],
    ids=["infonce", "gcl-tiled", "sigmoid", "oce-entropic", "oce-cvar"],
)
def test_scores_that_overflow_float32_are_refused(loss: Callable[[Tensor, Tensor], Tensor]) -> None:
    """float32 embeddings of norm 1e20 (scores 1e40) gave NaN losses."""
    anchors, positives = _pair(torch.float32)
    message = (
        re.escape("anchors/positives: scores overflow float32 (|s| up to ") + r".*normalise the embeddings"
    )
    with pytest.raises(ValueError, match=message):
        loss(anchors * 1e20, positives * 1e20)


def test_scores_given_directly_with_a_tau_that_overflows_float32_are_refused() -> None:
    with pytest.raises(ValueError, match=r"tau=1e-50 is outside"):
        contrastive_loss_from_scores(torch.zeros(3), torch.ones(3, 2), tau=1e-50)


def test_loglog_slope_without_a_generator_names_rng() -> None:
    """rng=None failed with AttributeError: 'NoneType' object has no attribute 'integers'."""
    with pytest.raises(
        TypeError, match=r"rng=None is not a numpy Generator; pass rng=np.random.default_rng\(seed\)"
    ):
        loglog_slope([1, 2, 3, 4], [1.0, 0.5, 0.33, 0.25], rng=None)  # type: ignore[arg-type]
    assert loglog_slope([1, 2, 3, 4], [1.0, 0.5, 0.33, 0.25], rng=np.random.default_rng(0)).slope < 0


def test_sample_vmf_names_a_kappa_of_the_wrong_shape_and_converts_integers() -> None:
    """kappa of shape (3,) for 4 rows failed inside torch's expand; integer kappa is the same as float kappa."""
    mean = torch.nn.functional.normalize(
        torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64), dim=1
    )
    with pytest.raises(
        ValueError,
        match=r"kappa has shape \(3,\); pass a number or one concentration per row of mean, shape \(4,\)",
    ):
        sample_vmf(mean, torch.ones(3), torch.Generator().manual_seed(1))
    with pytest.raises(TypeError, match=r"kappa must be real concentrations .*, got bool"):
        sample_vmf(mean, True, torch.Generator().manual_seed(1))
    from_ints = sample_vmf(mean, torch.tensor([1, 2, 3, 4]), torch.Generator().manual_seed(1))
    from_floats = sample_vmf(mean, torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.Generator().manual_seed(1))
    torch.testing.assert_close(from_ints, from_floats, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("tiling", ["dense", "tiled"])
@pytest.mark.parametrize("form", ["infonce", "dcl", "gcl"])
def test_collapsed_huge_embeddings_are_refused_not_rounded_away(
    form: str, tiling: str, dtype: torch.dtype
) -> None:
    """full(1e5) against full(-1e5) at tau = 0.01 gave dcl -524288, gcl -5242.9 and infonce 0.0 in float32, and
    1.0986328125 for log 3 in float64: the loss, a difference of logits near 4e12, was rounded away. Every score
    is equal, so the float64 reference (Delta = 0) is log 3, 0 and log 4."""
    anchors, positives = torch.full((4, 4), 1e5, dtype=dtype), torch.full((4, 4), -1e5, dtype=dtype)
    reference = reference_loss(
        anchors, positives, None, tau=0.01, form=form, regime="shared", symmetric=False
    )
    assert reference == pytest.approx([{"infonce": math.log(4), "dcl": math.log(3), "gcl": 0.0}[form]] * 4)
    with pytest.raises(ValueError, match=r"the logits s/tau reach 4e\+12, where .* resolves a loss only to"):
        contrastive_loss(anchors, positives, tau=0.01, form=form, tiling=tiling)


@pytest.mark.parametrize("tiling", ["dense", "tiled"])
@pytest.mark.parametrize("form", ["infonce", "dcl", "gcl"])
def test_large_embeddings_the_dtype_resolves_give_the_float64_reference(form: str, tiling: str) -> None:
    """The refusal above is no blanket one: float32 embeddings of norm 30 at tau = 0.1 (logits up to 9e3, a loss
    of thousands of nats) keep their value."""
    generator = torch.Generator().manual_seed(1)
    anchors, positives = 30 * unit(6, 4, generator, torch.float32), 30 * unit(6, 4, generator, torch.float32)
    expected = reference_loss(anchors, positives, None, tau=0.1, form=form, regime="shared", symmetric=False)
    found = contrastive_loss(anchors, positives, tau=0.1, form=form, tiling=tiling, reduction="none")
    assert found.tolist() == pytest.approx(expected, rel=1e-4, abs=1e-3)
