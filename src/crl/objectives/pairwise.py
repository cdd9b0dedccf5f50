"""Pairwise surrogates and the sigmoid (SigLIP) loss: the comparison family outside [A]/[B]'s theorems.

With Delta_ij = s(x_i, y'_ij) - s(x_i, y_i) and t = Delta_ij / tau, the pairwise loss of anchor i is
``mean_j psi(t)`` for

- ``hinge``:         psi(t) = max(0, margin + t)
- ``squared_hinge``: psi(t) = max(0, margin + t)^2
- ``logistic``:      psi(t) = log(1 + e^t)
- ``exponential``:   psi(t) = e^t

The sigmoid loss (Zhai et al., 2023, SigLIP) treats every (anchor, candidate) pair as a binary problem with logit
z = s / tau + b: ``sigmoid_i = softplus(-(s_ii/tau + b)) + sum_j softplus(s_ij/tau + b)`` (sum, not mean, over the
negatives, as SigLIP normalises by the batch size only). With in-batch negatives it is SigLIP's loss over all n^2
pairs. SigLIP initialises 1/tau = 10 and b = -10.
"""

import typing
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from crl._validate import check_choice, check_real
from crl._vocab import Regime
from crl.objectives._checks import Reduction
from crl.objectives._score_kernel import PairwiseKernel, chunked_kernel_values
from crl.objectives._scores import loss_from_scores
from crl.objectives._sigmoid_kernel import sigmoid_chunk_values
from crl.objectives.temperature import TauLike, resolve_tau

Psi = Literal["hinge", "squared_hinge", "logistic", "exponential"]
PSIS: tuple[str, ...] = typing.get_args(Psi)


def pairwise_psi(t: Tensor, psi: Psi, margin: float) -> Tensor:
    """Apply the surrogate psi elementwise to t = Delta / tau (formulas in the module docstring)."""
    if psi == "hinge":
        return torch.relu(margin + t)
    if psi == "squared_hinge":
        return torch.relu(margin + t).square()
    if psi == "logistic":
        return F.softplus(t)
    return torch.exp(t)


def pairwise_loss(
    anchors: Tensor,
    positives: Tensor,
    negatives: Tensor | None = None,
    *,
    tau: TauLike,
    psi: Psi = "logistic",
    margin: float = 1.0,
    regime: Regime = "shared",
    chunk: int | None = None,
    reduction: Reduction = "mean",
) -> Tensor:
    """Pairwise surrogate loss ``mean_i mean_j psi(Delta_ij / tau)`` of embeddings (score = dot product).

    Args:
        anchors: (n, d).
        positives: (n, d).
        negatives: shared (m, d), in-batch ``None`` (m = n - 1), or independent (n, m, d).
        tau: temperature.
        psi: "hinge", "squared_hinge", "logistic" or "exponential".
        margin: margin of the (squared) hinge, in units of tau: a finite real number.
        regime: "shared" or "independent".
        chunk: anchors per chunk (None: automatic, O(2^22) scores per chunk).
        reduction: "mean" or "none".

    Raises:
        ValueError: on bad shapes, NaN/Inf (margin included), tau <= 0, scores or logits s/tau that overflow the
            dtype, or an unknown psi/regime/reduction.
        TypeError: a margin that is not a real number.

    Examples:
        >>> a = torch.eye(3)
        >>> float(pairwise_loss(a, a, tau=1.0, psi="hinge", margin=0.5))
        0.0
    """
    check_choice("psi", psi, PSIS)
    margin = check_real("margin", margin)
    t = resolve_tau(tau)

    kernel = PairwiseKernel(psi, margin)

    def per_anchor(pos: Tensor, neg: Tensor) -> Tensor:
        return pairwise_psi((neg - pos[:, None]) / t.to(pos), psi, margin).mean(dim=1)

    def shared(a: Tensor, p: Tensor, candidates: Tensor, offset: int | None, rows: int) -> Tensor:
        return chunked_kernel_values(kernel, a, p, candidates, t, None, offset=offset, rows=rows)

    return loss_from_scores(
        anchors,
        positives,
        negatives,
        per_anchor,
        regime=regime,
        chunk=chunk,
        reduction=reduction,
        shared=shared,
        tau=t,
    )


def sigmoid_loss(
    anchors: Tensor,
    positives: Tensor,
    negatives: Tensor | None = None,
    *,
    tau: TauLike,
    bias: float | Tensor = -10.0,
    regime: Regime = "shared",
    chunk: int | None = None,
    reduction: Reduction = "mean",
) -> Tensor:
    """SigLIP's sigmoid loss: softplus(-(s_ii/tau + b)) + sum_j softplus(s_ij/tau + b), averaged over anchors.

    Args:
        anchors: (n, d).
        positives: (n, d).
        negatives: in-batch ``None`` (all n^2 pairs, SigLIP), shared (m, d) or independent (n, m, d).
        tau: temperature (SigLIP learns 1/tau, initialised at 10).
        bias: the logit bias b (a float or a learnable scalar tensor; SigLIP initialises -10).
        regime: "shared" or "independent".
        chunk: anchors per chunk (None: automatic).
        reduction: "mean" or "none".

    Raises:
        ValueError: on bad shapes, NaN/Inf, tau <= 0, scores or logits s/tau that overflow the dtype, a
            non-finite or non-scalar bias, or an unknown option.
        TypeError: a bias that is neither a real number nor a tensor.
    """
    t = resolve_tau(tau)
    if isinstance(bias, bool) or not isinstance(bias, int | float | Tensor):
        raise TypeError(f"bias={bias!r} must be a real number or a scalar tensor, got {type(bias).__name__}.")
    b = torch.as_tensor(bias)
    if b.numel() != 1 or (b.device.type == "cpu" and not bool(torch.isfinite(b).all())):
        raise ValueError(f"bias={bias!r} must be one finite number (SigLIP starts at -10).")

    def per_anchor(pos: Tensor, neg: Tensor) -> Tensor:
        tt, bb = t.to(pos), b.to(pos)
        return F.softplus(-(pos / tt + bb)) + F.softplus(neg / tt + bb).sum(dim=1)

    def shared(a: Tensor, p: Tensor, candidates: Tensor, offset: int | None, rows: int) -> Tensor:
        return sigmoid_chunk_values(a, p, candidates, t, b, offset=offset, rows=rows)

    return loss_from_scores(
        anchors,
        positives,
        negatives,
        per_anchor,
        regime=regime,
        chunk=chunk,
        reduction=reduction,
        shared=shared,
        tau=t,
    )
