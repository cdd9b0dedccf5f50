"""Independent float64 references: explicit Python loops over anchors and negatives, with math, not torch.

Nothing here calls crl; the formulas are written from docs/theory.md section 2 directly.
"""

import math

import torch
from torch import Tensor


def _dot(u: list[float], v: list[float]) -> float:
    return sum(a * b for a, b in zip(u, v, strict=True))


def _log_sum_exp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def one_direction(
    anchors: list[list[float]],
    positives: list[list[float]],
    negatives: list[list[list[float]]],
    tau: float,
    form: str,
) -> list[float]:
    """Per-anchor loss with negatives[i] the list of anchor i's negatives (shared or independent alike)."""
    out = []
    for a, p, negs in zip(anchors, positives, negatives, strict=True):
        deltas = [(_dot(a, y) - _dot(a, p)) / tau for y in negs]
        if form == "infonce":
            out.append(_log_sum_exp([0.0, *deltas]))
        elif form == "dcl":
            out.append(_log_sum_exp(deltas))
        elif form == "gcl":
            out.append(tau * (_log_sum_exp(deltas) - math.log(len(deltas))))
        else:
            raise AssertionError(form)
    return out


def negatives_per_anchor(
    positives: list[list[float]], negatives: Tensor | None, regime: str
) -> list[list[list[float]]]:
    """Expand any regime into an explicit list of negatives per anchor."""
    n = len(positives)
    if negatives is None:
        return [[positives[j] for j in range(n) if j != i] for i in range(n)]
    if regime == "shared":
        shared = negatives.tolist()
        return [shared for _ in range(n)]
    return negatives.tolist()


def reference_loss(
    anchors: Tensor,
    positives: Tensor,
    negatives: Tensor | tuple[Tensor, Tensor] | None,
    *,
    tau: float,
    form: str,
    regime: str,
    symmetric: bool,
) -> list[float]:
    """Per-anchor contrastive loss by explicit loops (symmetric: mean of the x->y and y->x directions)."""
    a, p = anchors.double().tolist(), positives.double().tolist()
    if not symmetric:
        assert not isinstance(negatives, tuple)
        neg = None if negatives is None else negatives.double()
        return one_direction(a, p, negatives_per_anchor(p, neg, regime), tau, form)
    if negatives is None:
        forward = one_direction(a, p, negatives_per_anchor(p, None, regime), tau, form)
        backward = one_direction(p, a, negatives_per_anchor(a, None, regime), tau, form)
    else:
        assert isinstance(negatives, tuple)
        forward = one_direction(a, p, negatives_per_anchor(p, negatives[0].double(), "shared"), tau, form)
        backward = one_direction(p, a, negatives_per_anchor(a, negatives[1].double(), "shared"), tau, form)
    return [0.5 * (f + b) for f, b in zip(forward, backward, strict=True)]


def reference_pairwise(deltas: list[list[float]], tau: float, psi: str, margin: float) -> list[float]:
    """mean_j psi(Delta_ij / tau) by loops."""
    funcs = {
        "hinge": lambda t: max(0.0, margin + t),
        "squared_hinge": lambda t: max(0.0, margin + t) ** 2,
        "logistic": lambda t: math.log1p(math.exp(t)) if t < 30 else t + math.log1p(math.exp(-t)),
        "exponential": math.exp,
    }
    return [sum(funcs[psi](d / tau) for d in row) / len(row) for row in deltas]


def reference_cvar(deltas: list[float], alpha: float) -> float:
    """min over mu of mu + mean_j [Delta_j - mu]_+ / alpha; convex, piecewise linear: a Delta_j minimises it."""
    m = len(deltas)
    return min(mu + sum(max(0.0, d - mu) for d in deltas) / (alpha * m) for mu in deltas)


def unit(n: int, d: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Tensor:
    x = torch.randn(n, d, generator=generator, dtype=dtype)
    return x / x.norm(dim=-1, keepdim=True)
