"""Every synthetic model honours the GroundTruth contract and docs/theory.md section 2's facts about s* and L*."""

import math

import pytest
import torch

from crl.objectives import contrastive_loss_from_scores
from crl.synthetic import AsymmetricSphere, DiscreteLatent, GaussianTwoTower, GroundTruth, VMFUniform


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _models() -> list[GroundTruth]:
    return [
        VMFUniform(3, 4.0),
        AsymmetricSphere(3, 4.0, 2.0, negative_law="anchor"),
        AsymmetricSphere(
            4, 5.0, [2.0, 3.0], anchor_means=[[0, 1.0, 0, 0], [0, -1.0, 0, 0]], negative_law="marginal"
        ),
        GaussianTwoTower(2, 0.5),
        DiscreteLatent([3, 2, 4], class_weights=[0.5, 0.2, 0.3]),
    ]


FINITE_SCORE_MODELS = _models()[:4]
"""Models whose log-ratio is finite everywhere (DiscreteLatent's is -inf across classes)."""


@pytest.mark.parametrize("model", _models(), ids=repr)
def test_samplers_shapes_dtypes_and_determinism(model: GroundTruth) -> None:
    """Shapes (n, d) / shape + (d,), the model's dtype, and identical draws for identical seeds."""
    assert isinstance(model, GroundTruth)
    x, y = model.sample(7, _generator(0))
    negatives = model.sample_negatives((3, 5), _generator(1))
    assert x.shape == y.shape == (7, model.dim)
    assert negatives.shape == (3, 5, model.dim)
    assert x.dtype == y.dtype == negatives.dtype == model.dtype == torch.float64
    x2, y2 = model.sample(7, _generator(0))
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert model.sample(0, _generator(0))[0].shape == (0, model.dim)
    assert isinstance(model.base_measure, str) and isinstance(model.negative_law, str)


def test_dtype_argument_is_honoured() -> None:
    """A float32 model samples float32 tensors."""
    for model in (VMFUniform(3, 2.0, dtype=torch.float32), GaussianTwoTower(2, 0.3, dtype=torch.float32)):
        x, y = model.sample(4, _generator(0))
        assert x.dtype == y.dtype == model.sample_negatives((2,), _generator(1)).dtype == torch.float32


@pytest.mark.parametrize("model", _models(), ids=repr)
def test_log_ratio_broadcasts_to_the_pairwise_matrix(model: GroundTruth) -> None:
    """log_ratio and dM/dpi on (x[:, None], y[None]) equal the (i, j) loop; s* = tau log_ratio; L* = -tau KL."""
    x, _ = model.sample(4, _generator(2))
    y = model.sample_negatives((5,), _generator(3))
    matrix = model.log_ratio(x[:, None, :], y[None, :, :])
    loop = torch.stack([torch.stack([model.log_ratio(x[i], y[j]) for j in range(5)]) for i in range(4)])
    assert matrix.shape == (4, 5)
    assert torch.equal(torch.isinf(matrix), torch.isinf(loop))
    finite = torch.isfinite(loop)
    assert torch.allclose(matrix[finite], loop[finite], atol=1e-12)
    assert torch.allclose(model.ideal_score(x[:, None], y[None], tau=0.3)[finite], 0.3 * matrix[finite])
    assert model.optimal_risk(0.3) == pytest.approx(-0.3 * model.mean_kl(), rel=1e-15)
    ratio_matrix = model.anchor_density_ratio(x[:, None], y[None])
    ratio_loop = torch.stack(
        [torch.stack([model.anchor_density_ratio(x[i], y[j]) for j in range(5)]) for i in range(4)]
    )
    assert torch.allclose(ratio_matrix, ratio_loop, rtol=1e-12, atol=0.0)


def _population_risk_samples(
    model: GroundTruth, score: object, tau: float, n: int, m: int, seed: int
) -> torch.Tensor:
    """Per-anchor tau log (1/m) sum_j exp((s(x_i, y'_j) - s(x_i, y_i))/tau) with m shared negatives (gcl form)."""
    generator = _generator(seed)
    x, y = model.sample(n, generator)
    negatives = model.sample_negatives((m,), generator)
    positive_scores = score(x, y)  # type: ignore[operator]
    negative_scores = score(x[:, None, :], negatives[None, :, :])  # type: ignore[operator]
    return contrastive_loss_from_scores(
        positive_scores, negative_scores, tau=tau, form="gcl", reduction="none"
    )


@pytest.mark.parametrize("model", FINITE_SCORE_MODELS, ids=repr)
def test_ideal_score_attains_optimal_risk_and_beats_perturbations(model: GroundTruth) -> None:
    """L(s*) ≈ L* for m = 3000 negatives (m -> infinity risk of [A]); c s* (c = 0.5, 1.6) has a larger risk.

    The gap to L* is tau E KL(p+ || q_s) >= 0 (docs/theory.md section 2); the comparison uses common samples.
    """
    tau, n, m = 0.5, 1500, 3000
    ideal = _population_risk_samples(model, lambda a, b: model.ideal_score(a, b, tau), tau, n, m, seed=4)
    bias_bound = tau * (model.density_ratio_second_moment() - 1.0) / m
    standard_error = float(ideal.std()) / math.sqrt(n)
    assert abs(float(ideal.mean()) - model.optimal_risk(tau)) < 4.5 * standard_error + bias_bound
    for factor in (0.5, 1.6):
        scaled = _population_risk_samples(
            model, lambda a, b, c=factor: c * model.ideal_score(a, b, tau), tau, n, m, 4
        )
        difference = scaled - ideal
        assert float(difference.mean()) > 3.0 * float(difference.std()) / math.sqrt(n)


@pytest.mark.parametrize("model", FINITE_SCORE_MODELS, ids=repr)
def test_risk_is_invariant_to_adding_any_function_of_the_anchor(model: GroundTruth) -> None:
    """s* + g(x) has the same per-anchor risk as s* (docs/theory.md section 2: L* is attained by every s* + g)."""
    tau = 0.7

    def shifted(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return model.ideal_score(a, b, tau) + 3.0 * torch.sin(5.0 * a).sum(-1)

    base = _population_risk_samples(model, lambda a, b: model.ideal_score(a, b, tau), tau, 200, 300, seed=5)
    moved = _population_risk_samples(model, shifted, tau, 200, 300, seed=5)
    assert torch.allclose(base, moved, atol=1e-10)


def test_excess_risk_is_tau_times_kl_to_the_learned_kernel_by_enumeration() -> None:
    """Discrete model, any score matrix s: L(s) - L* = tau E_x KL(p+_x || q_{s,x}), q ∝ p- exp(s/tau) (exact sums).

    This is the use later code makes of log_positive_density and log_negative_density.
    """
    model = DiscreteLatent([2, 3, 2], class_weights=[0.3, 0.3, 0.4], include_anchor=False)
    tau = 0.4
    scores = torch.randn(model.n_items, model.n_items, generator=_generator(6), dtype=torch.float64)
    items = model.one_hot(torch.arange(model.n_items))
    log_positive = model.log_positive_density(items[:, None], items[None])
    log_negative = model.log_negative_density(items)
    anchor_probs = torch.exp(log_negative)
    positive = torch.exp(log_positive)
    log_normaliser = torch.logsumexp(log_negative[None, :] + scores / tau, dim=1)
    risk_per_pair = tau * (log_normaliser[:, None] - scores / tau)
    risk = float((anchor_probs[:, None] * positive * risk_per_pair).sum())
    log_q = log_negative[None, :] + scores / tau - log_normaliser[:, None]
    kl = torch.where(positive > 0, positive * (log_positive - log_q), torch.zeros_like(positive)).sum(1)
    assert risk - model.optimal_risk(tau) == pytest.approx(tau * float(anchor_probs @ kl), abs=1e-12)
