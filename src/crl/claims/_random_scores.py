"""The models and scores of C1 and C2: models with exact answers, random, structured and adversarial scores.

Models: ``VMFUniform(3, kappa=4)``, ``GaussianTwoTower(4, rho=0.6)`` and ``DiscreteLatent([3, 4, 5])`` (C1 and
C2), and C2's K = 4 ring (:func:`ring_law`). Scores: random :class:`~crl.risk.FeatureScore` objects for
the continuous models (closed-form log Z_s and score laws) and random score tables for the discrete one
(everything exact by enumeration); C2's structured scores (rotations, rank swaps, trained two-towers); and C2's
adversarial tables, one-anchor finite laws and scores searched to maximise the ratio
``(E* - E)/sqrt((2/tau)(L - L*))`` of [A] Thm 3.4 (:func:`adversarial_table`).
"""

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import optimize

from crl.claims._gradient_fit import descend
from crl.objectives import contrastive_loss
from crl.risk import (
    FeatureScore,
    FiniteLaw,
    auc_gap,
    excess_risk_terms,
    feature_log_partition,
    finite_auc,
    finite_optimal_auc,
    finite_optimal_risk,
    finite_population_risk,
    ideal_feature_score,
    negative_law_of,
)
from crl.risk.finite import TIE_ATOL, TIE_RTOL
from crl.synthetic import DiscreteLatent, GaussianTwoTower, VMFUniform
from crl.synthetic.base import GroundTruth

TAU = 0.5
"""Default temperature of the random scores (C1's tau)."""
RHO = 0.6
"""Correlation rho of the Gaussian two-tower model."""
GAUSS_DIM = 4
"""Dimension of the Gaussian two-tower model."""
KAPPA = 4.0
"""Concentration kappa of the VMFUniform(3, kappa) model."""
RING_ITEMS = 4
"""K, the number of items of C2's ring model."""
TRAIN_STEPS = (0, 3, 10, 30, 100)
"""The Adam steps after which C2's trained scores are taken."""


def make_model(name: str) -> GroundTruth:
    """The three models of part (a) (module docstring)."""
    if name == "vmf":
        return VMFUniform(3, kappa=KAPPA)
    if name == "gaussian":
        return GaussianTwoTower(GAUSS_DIM, rho=RHO)
    return DiscreteLatent([3, 4, 5], class_weights=[0.5, 0.3, 0.2])


def feature_point(
    truth: GroundTruth, score: FeatureScore, tau: float, n: int, generator: torch.Generator
) -> dict[str, float]:
    """``x = L(s) - L*`` by :func:`crl.risk.excess_risk_terms` and ``y = E* - E(s)`` by
    :func:`crl.risk.auc_gap`, with standard errors: exact inner expectations, each paired with s*,
    on independent draws of n anchors."""
    law = negative_law_of(truth)
    assert law is not None
    x, y = truth.sample(n, generator)
    terms = excess_risk_terms(score, truth, x, y, feature_log_partition(score, law, x, tau), tau=tau)
    gap = auc_gap(score, truth, generator=generator, n_anchors=n)
    return {
        "excess": float(terms.mean()),
        "excess_se": float(terms.std() / math.sqrt(n)),
        "gap": gap.mean,
        "gap_se": gap.se,
    }


def finite_point(law: FiniteLaw, table: torch.Tensor, tau: float) -> dict[str, float]:
    """Exact ``x = L(s) - L*`` and ``y = E* - E(s)`` of a score table by enumeration (se = 0)."""
    excess = finite_population_risk(law, table, tau) - finite_optimal_risk(law, tau)
    gap = finite_optimal_auc(law) - finite_auc(law, table)
    return {"excess": excess, "excess_se": 0.0, "gap": gap, "gap_se": 0.0}


def random_feature_score(
    truth: GroundTruth, index: int, generator: torch.Generator, tau: float = TAU
) -> FeatureScore:
    """A random score for a continuous model: cycles through four kinds by ``index``.

    0: a random linear map ``x -> a G x`` (G standard normal, a log-uniform in [0.1, 10] times tau);
    1: random MLP features ``x -> A tanh(B x)`` (16 hidden units); 2: s* perturbed,
    ``x -> (f*(x) + eps a G x)`` with eps log-uniform in [1e-3, 1]; 3: a random direction with the curvature of
    s* rescaled (Gaussian model) or a rotation of s* (sphere).
    """
    d = truth.dim
    ideal = ideal_feature_score(truth, tau)
    assert ideal is not None
    kind = index % 4
    scale = tau * float(10.0 ** (2.0 * torch.rand((), generator=generator, dtype=torch.float64) - 1.0))
    g = torch.randn(d, d, generator=generator, dtype=torch.float64)
    curvature = ideal.curvature * float(2.0 * torch.rand((), generator=generator, dtype=torch.float64))
    if kind == 0:
        return FeatureScore(lambda x: x @ (scale * g).T, curvature=curvature)
    if kind == 1:
        inner = torch.randn(16, d, generator=generator, dtype=torch.float64)
        outer = scale * torch.randn(d, 16, generator=generator, dtype=torch.float64) / 4.0
        return FeatureScore(lambda x: torch.tanh(x @ inner.T) @ outer.T, curvature=curvature)
    if kind == 2:
        eps = float(10.0 ** (-3.0 * torch.rand((), generator=generator, dtype=torch.float64)))
        base = ideal.features
        return FeatureScore(
            lambda x: base(x) + eps * tau * (x @ g.T), curvature=ideal.curvature * (1.0 + eps)
        )
    rotation, _ = torch.linalg.qr(g)
    base = ideal.features
    return FeatureScore(lambda x: base(x @ rotation.T), curvature=curvature)


def random_table(law: FiniteLaw, index: int, generator: torch.Generator, tau: float = TAU) -> torch.Tensor:
    """A random score table: pure noise (even index) or ``tau log(r + delta)`` plus noise (odd index)."""
    shape = law.positive_probs.shape
    noise = torch.randn(shape, generator=generator, dtype=torch.float64)
    scale = float(10.0 ** (2.0 * torch.rand((), generator=generator, dtype=torch.float64) - 1.0))
    if index % 2 == 0:
        return tau * scale * noise
    delta = float(10.0 ** (-3.0 * torch.rand((), generator=generator, dtype=torch.float64)))
    eps = float(10.0 ** (-3.0 * torch.rand((), generator=generator, dtype=torch.float64)))
    return tau * torch.log(torch.exp(law.log_ratio()) + delta) + tau * eps * noise


def rotation_score(theta: float, tau: float) -> FeatureScore:
    """``s = tau kappa <R_theta x, y>``, R_theta the rotation by theta about e_3."""
    c, s = math.cos(theta), math.sin(theta)
    rotation = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    return FeatureScore(lambda x: tau * KAPPA * (x @ rotation.T))


def linear_score(weights: torch.Tensor) -> FeatureScore:
    """The two-tower score ``s(x, y) = <W x, y>``."""
    return FeatureScore(lambda x: x @ weights.T)


def ring_law(kappa: float) -> FiniteLaw:
    """The ring model: K items, uniform anchors and negatives, ``p+_x(y) ∝ exp(kappa cos(2 pi (x-y)/K))``."""
    items = torch.arange(RING_ITEMS)
    offset = (items[:, None] - items[None, :]) % RING_ITEMS
    plus = torch.softmax(kappa * torch.cos(2.0 * math.pi * offset.to(torch.float64) / RING_ITEMS), dim=1)
    uniform = torch.full((RING_ITEMS,), 1.0 / RING_ITEMS, dtype=torch.float64)
    return FiniteLaw(uniform, plus, uniform)


def swapped_ideal_table(law: FiniteLaw, tau: float) -> torch.Tensor:
    """s* with the scores of each anchor's two best candidates (itself and its right neighbour) swapped."""
    ideal = tau * law.log_ratio()
    table = ideal.clone()
    items = torch.arange(RING_ITEMS)
    neighbour = (items + 1) % RING_ITEMS
    table[items, items] = ideal[items, neighbour]
    table[items, neighbour] = ideal[items, items]
    return table


def trained_weights(tau: float, generator: torch.Generator) -> list[torch.Tensor]:
    """C2's trained scores: W after each of TRAIN_STEPS Adam steps on GCL (256 pairs, 64 shared negatives per
    step), from W0 = 0.1 G."""
    truth = VMFUniform(3, KAPPA)
    weights = torch.nn.Parameter(0.1 * torch.randn(3, 3, generator=generator, dtype=torch.float64))
    optimiser = torch.optim.Adam([weights], lr=0.05)

    def minibatch_loss() -> torch.Tensor:
        x, y = truth.sample(256, generator)
        negatives = truth.sample_negatives((64,), generator)
        return contrastive_loss(x @ weights.T, y, negatives, tau=tau, form="gcl", regime="shared")

    saved = [weights.detach().clone()]
    for done, until in itertools.pairwise(TRAIN_STEPS):
        descend(optimiser, minibatch_loss, until - done)
        saved.append(weights.detach().clone())
    return saved


ADVERSARIAL_KL_MIN = 1e-6
"""The search keeps KL(p+ || q_t) >= this, so that L - L* = tau KL (a difference of O(1) sums) is exact to ~1e-10."""
ADVERSARIAL_EVALS_PER_PARAMETER = 400
"""Nelder-Mead evaluations per parameter in each of the search's two rounds."""
ADVERSARIAL_TIE = 1e-6
"""In the search, scores t = s/tau closer than this tie (and are made equal at the end): E is discontinuous where
two scores cross, and without a margin the search would end on an inversion by a rounding error, which
:func:`crl.risk.finite_auc` rightly counts as a tie."""


@dataclass(frozen=True)
class AdversarialTable:
    """A one-anchor finite law and score table that the search found, and the search's own ratio.

    Attributes:
        law: one anchor, n items, ``p+ = softmax(a)``, ``p- = softmax(b)``.
        table: (1, n) score table ``s = tau t``.
        search_ratio: ``(E* - E)/sqrt(2 KL(p+ || q_t))`` by :func:`calibration_ratio` (float64 numpy, independent
            of crl's finite estimators, which C2 then applies to ``law`` and ``table``).
    """

    law: FiniteLaw
    table: torch.Tensor
    search_ratio: float


def calibration_ratio(params: np.ndarray, n_items: int) -> float:
    """[A] Thm 3.4's ratio ``(E* - E(s))/sqrt((2/tau)(L(s) - L*))`` for one anchor, in float64 numpy.

    ``params = (a, b, t)``, each of length n: ``p+ = softmax(a)``, ``p- = softmax(b)``, ``s/tau = t``. With one
    anchor ``(L - L*)/tau = KL(p+ || q_t)``, ``q_t = p- e^t / sum(p- e^t)``, and
    ``E(s) = sum_{j,j'} p+_j p-_j' w(t_j, t_j')`` with ties (``|t_j - t_j'| <= ADVERSARIAL_TIE``) counting 1/2;
    E* is E of ``log p+/p-`` (ties within :func:`crl.risk.finite_auc`'s tolerance; E* is continuous in
    p+ and p-, so its ties do not matter). The ratio depends on s and tau only through t. Returns 0 where
    ``KL < ADVERSARIAL_KL_MIN`` (the search stays where L - L* is exact).
    """
    log_plus = _log_softmax(params[:n_items])
    log_minus = _log_softmax(params[n_items : 2 * n_items])
    t = params[2 * n_items :]
    plus, minus = np.exp(log_plus), np.exp(log_minus)
    log_q = _log_softmax(log_minus + t)
    kl = float(plus @ (log_plus - log_q))
    if kl < ADVERSARIAL_KL_MIN:
        return 0.0
    ratio = log_plus - log_minus
    ideal = _auc(plus, minus, ratio, TIE_ATOL + TIE_RTOL * np.abs(ratio))
    gap = ideal - _auc(plus, minus, t, np.full_like(t, ADVERSARIAL_TIE))
    return gap / math.sqrt(2.0 * kl)


def adversarial_table(n_items: int, seed: int, tau: float = TAU) -> AdversarialTable:
    """Maximise :func:`calibration_ratio` by Nelder-Mead, in two rounds
    (the second restarts from the first's optimum), ``ADVERSARIAL_EVALS_PER_PARAMETER * 3n`` evaluations each;
    then scores within ``ADVERSARIAL_TIE`` of each other are made equal (exact ties), so that crl's estimators
    see the ranking the search scored. The start (seeded): standard normal logits a, b, and t the log-ratio
    ``log p+/p-`` shifted by one place (``np.roll``), a ranking with at least one inversion (E < E*).

    One anchor suffices: mixing anchors cannot raise the ratio, since with ``y_i <= c sqrt(x_i)``,
    ``sum pi_i y_i <= c sum pi_i sqrt(x_i) <= c sqrt(sum pi_i x_i)`` (sqrt is concave).
    """
    logits = np.random.default_rng(seed).standard_normal(2 * n_items)
    log_ratio = _log_softmax(logits[:n_items]) - _log_softmax(logits[n_items:])
    start = np.concatenate([logits, np.roll(log_ratio, 1)])
    budget = ADVERSARIAL_EVALS_PER_PARAMETER * 3 * n_items
    options = {"maxfev": budget, "maxiter": budget, "xatol": 1e-10, "fatol": 1e-12}
    best = start
    for _ in range(2):
        best = optimize.minimize(
            lambda u: -calibration_ratio(u, n_items), best, method="Nelder-Mead", options=options
        ).x
    best = np.concatenate([best[: 2 * n_items], _merge_ties(best[2 * n_items :])])
    plus = torch.softmax(torch.from_numpy(best[:n_items]), dim=0)
    minus = torch.softmax(torch.from_numpy(best[n_items : 2 * n_items]), dim=0)
    law = FiniteLaw(torch.ones(1, dtype=torch.float64), plus[None, :], minus)
    table = tau * torch.from_numpy(best[2 * n_items :])[None, :]
    return AdversarialTable(law, table, calibration_ratio(best, n_items))


def _log_softmax(values: np.ndarray) -> np.ndarray:
    """``values - log sum exp(values)``."""
    shifted = values - values.max()
    return shifted - math.log(float(np.exp(shifted).sum()))


def _auc(plus: np.ndarray, minus: np.ndarray, scores: np.ndarray, tolerance: np.ndarray) -> float:
    """``sum_{j,j'} p+_j p-_j' w(s_j, s_j')``, w = 1/2 where ``|s_j - s_j'| <= max(tolerance_j, tolerance_j')``."""
    diff = scores[:, None] - scores[None, :]
    tie = np.abs(diff) <= np.maximum(tolerance[:, None], tolerance[None, :])
    wins = np.where(tie, 0.5, (diff > 0).astype(np.float64))
    return float(plus @ wins @ minus)


def _merge_ties(scores: np.ndarray) -> np.ndarray:
    """``scores`` with each run of sorted values less than ``ADVERSARIAL_TIE`` apart replaced by the run's mean."""
    order = np.argsort(scores)
    merged = scores.copy()
    start = 0
    for end in range(1, len(order) + 1):
        if end == len(order) or scores[order[end]] - scores[order[end - 1]] > ADVERSARIAL_TIE:
            merged[order[start:end]] = scores[order[start:end]].mean()
            start = end
    return merged
