"""Exact risks and AUCs on finite supports (docs/theory.md section 6.4): every expectation is a finite sum.

A :class:`FiniteLaw` is three tables: the anchor law ``pi_i`` over n_x anchors, the positive kernel
``p+_ij = p+_{x_i}(y_j)`` over n_y candidates and the negative law ``p-_j`` (independent of the anchor). A score
is a table ``s_ij = s(x_i, y_j)`` (:func:`score_table`). Then, exactly,

- ``L(s) = sum_i pi_i sum_j p+_ij [tau log sum_j' p-_j' exp(s_ij'/tau) - s_ij]`` (the per-pair value through
  :func:`crl.objectives.contrastive_form`, as in :mod:`crl.risk.contrastive`);
- ``L* = -tau sum_i pi_i KL(p+_i || p-)``; ``KL(p+_i || q_i)`` with ``q_ij = p-_j exp(s_ij/tau) / Z_i``;
- ``E(s) = sum_i pi_i sum_{j, j'} p+_ij p-_j' [1(s_ij > s_ij') + 1/2 1(s_ij = s_ij')]``, and E* the same with
  the log-ratio table (``-inf`` off the support of p+_i is allowed there). "Equal" means equal up to rounding:
  ``|s_ij - s_ij'| <= TIE_ATOL + TIE_RTOL max(|s_ij|, |s_ij'|)`` (:func:`finite_auc`), so that two scores a
  table means to tie (the two neighbours of a ring item, ``cos(pi/2)`` against ``cos(3 pi/2)``) count 1/2 however
  the arithmetic that built them rounded.

:func:`finite_law_of` turns a ``DiscreteLatent`` model into its tables; any other finite model can be built
directly from its tables.
"""

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import check_choice, check_tau
from crl._vocab import FORMS, Form
from crl.objectives import contrastive_form
from crl.risk.estimate import ScoreFn, evaluate_scores, limit_form
from crl.synthetic.discrete import DiscreteLatent

_PROB_TOL = 1e-9
TIE_RTOL = 1e-12
"""Relative tolerance under which two finite scores are a tie in :func:`finite_auc` (~4500 ulps at |s| = 1)."""
TIE_ATOL = 1e-12
"""Absolute tolerance under which two finite scores are a tie in :func:`finite_auc` (scores near 0)."""


def _check_probabilities(name: str, table: Tensor, ndim: int) -> Tensor:
    """A float64 table of probabilities >= 0 whose last axis sums to 1."""
    if not isinstance(table, Tensor) or table.ndim != ndim or not table.is_floating_point():
        raise ValueError(f"{name} must be a floating tensor with {ndim} dims, got {table!r:.80}.")
    values = table.detach().to(torch.float64)
    if not bool(torch.isfinite(values).all()) or bool((values < 0).any()):
        raise ValueError(f"{name} must hold finite probabilities >= 0.")
    sums = values.sum(dim=-1)
    if bool(((sums - 1.0).abs() > _PROB_TOL).any()):
        raise ValueError(
            f"{name} must sum to 1 along its last axis (got sums {sums.flatten()[:3].tolist()}...)."
        )
    return values


@dataclass(frozen=True)
class FiniteLaw:
    """A paired-data law on finite supports: anchors i = 1..n_x, candidates j = 1..n_y.

    Attributes:
        anchor_probs: (n_x,) pi_i.
        positive_probs: (n_x, n_y) p+_ij, each row a probability vector.
        negative_probs: (n_y,) p-_j.
    """

    anchor_probs: Tensor
    positive_probs: Tensor
    negative_probs: Tensor

    def __post_init__(self) -> None:
        pi = _check_probabilities("anchor_probs", self.anchor_probs, 1)
        plus = _check_probabilities("positive_probs", self.positive_probs, 2)
        minus = _check_probabilities("negative_probs", self.negative_probs, 1)
        if plus.shape != (pi.shape[0], minus.shape[0]):
            raise ValueError(
                f"positive_probs has shape {tuple(plus.shape)}; "
                f"expected (n_x, n_y) = ({pi.shape[0]}, {minus.shape[0]})."
            )
        if bool(((plus > 0) & (minus[None, :] == 0)).any()):
            raise ValueError("p+ puts mass where p- has none: the likelihood ratio p+/p- is infinite there.")
        object.__setattr__(self, "anchor_probs", pi)
        object.__setattr__(self, "positive_probs", plus)
        object.__setattr__(self, "negative_probs", minus)

    def log_ratio(self) -> Tensor:
        """(n_x, n_y) ``log p+_ij / p-_j`` (-inf where p+_ij = 0, also where p-_j = 0 too: such an item has no mass
        under either law)."""
        ratio = torch.log(self.positive_probs) - torch.log(self.negative_probs)[None, :]
        return torch.where(self.positive_probs > 0, ratio, torch.full_like(ratio, -math.inf))


def finite_law_of(truth: DiscreteLatent) -> FiniteLaw:
    """The tables of a ``DiscreteLatent`` model (items as one-hot vectors), from its own densities."""
    if not isinstance(truth, DiscreteLatent):
        raise TypeError(f"finite_law_of needs a DiscreteLatent model, got {type(truth).__name__}.")
    items = truth.one_hot(torch.arange(truth.n_items)).to(torch.float64)
    plus = torch.exp(truth.log_positive_density(items[:, None, :], items[None, :, :]).to(torch.float64))
    minus = torch.exp(truth.log_negative_density(items).to(torch.float64))
    return FiniteLaw(truth.anchor_probs.to(torch.float64), plus, minus)


def score_table(score_fn: ScoreFn, anchors: Tensor, candidates: Tensor) -> Tensor:
    """(n_x, n_y) ``s(x_i, y_j)`` of the support points (e.g. one-hot items), float64 and finite."""
    return evaluate_scores(score_fn, anchors[:, None, :], candidates[None, :, :])


def _check_scores(law: FiniteLaw, scores: Tensor) -> Tensor:
    """A float64 (n_x, n_y) score table with no NaN or +inf (-inf: a zero likelihood ratio, as in log p+/p-)."""
    if not isinstance(scores, Tensor) or tuple(scores.shape) != tuple(law.positive_probs.shape):
        shape = tuple(scores.shape) if isinstance(scores, Tensor) else type(scores).__name__
        raise ValueError(
            f"scores has shape {shape}; expected the (n_x, n_y) = {tuple(law.positive_probs.shape)} table."
        )
    values = scores.detach().to(torch.float64)
    if bool((torch.isnan(values) | torch.isposinf(values)).any()):
        raise ValueError(
            "scores contains NaN or +inf entries; pass finite scores (or -inf for a zero ratio)."
        )
    return values


def _check_positive_scores(law: FiniteLaw, scores: Tensor) -> Tensor:
    """A score table that may be -inf only where p+ has no mass (a positive's score must be finite)."""
    s = _check_scores(law, scores)
    if bool((torch.isneginf(s) & (law.positive_probs > 0)).any()):
        raise ValueError("scores is -inf where p+ has mass; a positive's score must be finite.")
    return s


def finite_log_partition(law: FiniteLaw, scores: Tensor, tau: float) -> Tensor:
    """(n_x,) ``log Z_i = log sum_j p-_j exp(s_ij/tau)``."""
    s = _check_scores(law, scores)
    return torch.logsumexp(s / check_tau(tau) + torch.log(law.negative_probs)[None, :], dim=1)


def finite_population_risk(law: FiniteLaw, scores: Tensor, tau: float, form: Form = "gcl") -> float:
    """[A]'s ``L(s)`` (``form="gcl"``) or [B]'s centred limit ``L(s)/tau`` ("dcl"/"infonce"), exactly.

    Per pair the m -> infinity value ``contrastive_form(s_ij/tau, log Z_i, n_negatives=1)``, averaged with weights
    ``pi_i p+_ij`` (pairs with ``p+_ij = 0`` carry no weight, and may score -inf, as s* does off the support).
    """
    t = check_tau(tau)
    check_choice("form", form, FORMS)
    s = _check_positive_scores(law, scores)
    log_z = finite_log_partition(law, s, t)
    per_pair = contrastive_form(
        s / t,
        log_z[:, None].expand_as(s),
        n_negatives=1,
        tau=torch.tensor(t, dtype=torch.float64),
        form=limit_form(form),
    )
    weights = law.anchor_probs[:, None] * law.positive_probs
    return float(torch.where(weights > 0, weights * per_pair, torch.zeros_like(per_pair)).sum())


def finite_kl_to_ideal(law: FiniteLaw, scores: Tensor, tau: float) -> Tensor:
    """(n_x,) ``KL(p+_i || q_i)``, ``q_ij = p-_j exp(s_ij/tau)/Z_i``, computed from the tables directly.

    ``sum_j p+_ij [log p+_ij - log q_ij]``; ``sum_i pi_i KL_i = (L(s) - L*)/tau``.
    """
    t = check_tau(tau)
    s = _check_positive_scores(law, scores)
    log_q = torch.log(law.negative_probs)[None, :] + s / t - finite_log_partition(law, s, t)[:, None]
    plus = law.positive_probs
    terms = torch.where(plus > 0, plus * (torch.log(plus) - log_q), torch.zeros_like(plus))
    return terms.sum(dim=1)


def finite_optimal_risk(law: FiniteLaw, tau: float) -> float:
    """``L* = -tau sum_i pi_i KL(p+_i || p-)``."""
    plus = law.positive_probs
    kl = torch.where(plus > 0, plus * law.log_ratio(), torch.zeros_like(plus)).sum(dim=1)
    return -check_tau(tau) * float((law.anchor_probs * kl).sum())


def finite_auc(law: FiniteLaw, scores: Tensor, *, rtol: float = TIE_RTOL, atol: float = TIE_ATOL) -> float:
    """``E(s) = sum_i pi_i sum_{j,j'} p+_ij p-_j' w(s_ij, s_ij')`` exactly, ties counting 1/2.

    ``w(a, b) = 1/2`` when ``|a - b| <= atol + rtol max(|a|, |b|)`` (a tie up to rounding), else ``1(a > b)``.
    Without a tolerance, a tie that rounding breaks moves E by ``pi_i p+_ij p-_j' / 2``, a jump of the size of the
    quantities C1 and C2 measure; the defaults are far below any difference a score table means.
    ``scores`` may contain -inf (a log-ratio table; never tied with a finite score); a pair with ``p+_ij = 0``
    carries no weight.

    Raises:
        ValueError: on a bad table (see :class:`FiniteLaw`) or ``rtol``/``atol`` not finite and >= 0.
    """
    _check_tolerance("rtol", rtol)
    _check_tolerance("atol", atol)
    s = _check_positive_scores(law, scores)
    total = 0.0
    for i in range(s.shape[0]):
        plus = law.positive_probs[i]
        support = plus > 0
        wins = _pairwise_wins(s[i, support], s[i], rtol, atol)
        total += float(law.anchor_probs[i]) * float(
            (plus[support][:, None] * law.negative_probs[None, :] * wins).sum()
        )
    return total


def _pairwise_wins(left: Tensor, right: Tensor, rtol: float, atol: float) -> Tensor:
    """(len(left), len(right)) ``w(a, b)``: 1 if a > b, 0 if a < b, 1/2 if ``|a - b| <= atol + rtol max(|a|, |b|)``."""
    diff = left[:, None] - right[None, :]
    scale = torch.maximum(left.abs()[:, None], right.abs()[None, :])
    tie = torch.isfinite(diff) & (diff.abs() <= atol + rtol * scale)
    return torch.where(tie, torch.full_like(diff, 0.5), (diff > 0).to(diff.dtype))


def _check_tolerance(name: str, value: float) -> None:
    """A tie tolerance must be a finite float >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value < float("inf"):
        raise ValueError(f"{name}={value!r} must be a finite number >= 0.")


def finite_optimal_auc(law: FiniteLaw) -> float:
    """``E* = E(log p+/p-)``: :func:`finite_auc` of the log-ratio table."""
    return finite_auc(law, law.log_ratio())
