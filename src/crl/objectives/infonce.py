"""InfoNCE, DCL and GCL: the contrastive forms of [A] and [B], one-sided or symmetric, shared or independent.

With Delta_ij = s(x_i, y'_ij) - s(x_i, y_i) and scores s(x, y) = <a, c> of the embeddings, the per-anchor values are

    infonce_i = log(1 + sum_j exp(Delta_ij / tau)) = -log softmax of the positive among {positive} + m negatives
    dcl_i     = log(sum_j exp(Delta_ij / tau))                     (decoupled: positive not in the denominator)
    gcl_i     = tau * log((1/m) sum_j exp(Delta_ij / tau))         ([A]'s empirical risk L_hat, note the factor tau)

[B]'s R_hat is the mean of ``infonce`` minus log k (k = m); its DCL variant is the mean of ``dcl`` minus log k.
Every form is a function of two numbers per anchor: the positive's logit s_ii / tau and the log-sum-exp of the
negatives' logits lse_i = log sum_j exp(s_ij / tau) (see :func:`contrastive_form`); this module is the only place
that turns those into a loss.
"""

import math

import torch
from torch import Tensor, nn

from crl._vocab import FORMS, REGIMES, Form, Regime, check_choice
from crl.objectives._checks import (
    REDUCTIONS,
    TILINGS,
    Reduction,
    Tiling,
    check_embeddings,
    check_inputs,
    check_scores,
    upcast,
)
from crl.objectives._chunking import chunk_rows, per_anchor_in_chunks
from crl.objectives.temperature import TauLike, Temperature, resolve_tau
from crl.objectives.tiled import GradientForecast, dense_logsumexp_both, tiled_logsumexp, tiled_logsumexp_both

TILED_ABOVE_ELEMENTS = 1 << 22
"""``tiling="auto"`` switches from the dense n x m matrix to the tiled kernel above this many scores."""

Negatives = Tensor | tuple[Tensor, Tensor] | None


def contrastive_form(
    positive_logits: Tensor, negative_lse: Tensor, *, n_negatives: int, tau: Tensor, form: Form
) -> Tensor:
    """Per-anchor loss from the positive's logit ``s_ii / tau`` and ``lse_i = log sum_j exp(s_ij / tau)``.

    ``infonce = logaddexp(s_ii/tau, lse_i) - s_ii/tau``; ``dcl = lse_i - s_ii/tau``;
    ``gcl = tau * (lse_i - s_ii/tau - log m)``.
    """
    if form == "infonce":
        return torch.logaddexp(positive_logits, negative_lse) - positive_logits
    if form == "dcl":
        return negative_lse - positive_logits
    return tau * (negative_lse - positive_logits - math.log(n_negatives))


def _reduce(per_anchor: Tensor, reduction: Reduction) -> Tensor:
    return per_anchor.mean() if reduction == "mean" else per_anchor


def contrastive_loss_from_scores(
    positive_scores: Tensor,
    negative_scores: Tensor,
    *,
    tau: TauLike,
    form: Form = "infonce",
    reduction: Reduction = "mean",
) -> Tensor:
    """A contrastive form from precomputed scores (any score function, e.g. a synthetic model's ideal s*).

    Args:
        positive_scores: (n,) scores s(x_i, y_i).
        negative_scores: (n, m) scores s(x_i, y'_ij); in the shared regime row i holds s(x_i, y'_j).
        tau: temperature (float, scalar tensor or :class:`Temperature`).
        form: "infonce", "dcl" or "gcl" (formulas in the module docstring).
        reduction: "mean" over anchors, or "none" for the (n,) per-anchor values.

    Raises:
        ValueError: on shape mismatch, m = 0, NaN/Inf scores, tau <= 0, or an unknown form/reduction.

    Examples:
        >>> pos, neg = torch.zeros(2), torch.zeros(2, 3)
        >>> float(contrastive_loss_from_scores(pos, neg, tau=0.5, form="dcl")) == math.log(3)
        True
    """
    check_choice("form", form, FORMS)
    check_choice("reduction", reduction, REDUCTIONS)
    pos, neg = check_scores(positive_scores, negative_scores)
    t = resolve_tau(tau).to(device=pos.device, dtype=pos.dtype)
    lse = torch.logsumexp(neg / t, dim=1)
    per_anchor = contrastive_form(pos / t, lse, n_negatives=neg.shape[1], tau=t, form=form)
    return _reduce(per_anchor, reduction)


def _check_pair(anchors: Tensor, positives: Tensor) -> tuple[Tensor, Tensor]:
    a = check_embeddings("anchors", anchors, 2)
    p = check_embeddings("positives", positives, 2)
    if a.shape != p.shape:
        raise ValueError(
            f"anchors {tuple(a.shape)} and positives {tuple(p.shape)} differ; pass one positive per anchor (n, d)."
        )
    return a, p


def _check_shared_negatives(name: str, negatives: Tensor, dim: int) -> Tensor:
    neg = check_embeddings(name, negatives, 2)
    if neg.shape[1] != dim:
        raise ValueError(
            f"{name} has dimension {neg.shape[1]} but the anchors have d = {dim}; embed both alike."
        )
    return neg


def _check_independent_negatives(negatives: Negatives, n: int, dim: int) -> Tensor:
    if not isinstance(negatives, Tensor):
        raise ValueError(
            "regime='independent' needs negatives of shape (n, m, d), one set of m per anchor; "
            f"got {type(negatives).__name__}. Use regime='shared' for in-batch or shared negatives."
        )
    neg = check_embeddings("negatives", negatives, 3)
    if neg.shape[0] != n or neg.shape[2] != dim:
        raise ValueError(
            f"negatives has shape {tuple(neg.shape)}; regime='independent' needs (n, m, d) = ({n}, m, {dim})."
        )
    if neg.shape[1] == 0:
        raise ValueError("negatives has m = 0 per anchor; contrastive losses need at least one negative.")
    return neg


def _use_tiled(tiling: Tiling, n: int, m: int) -> bool:
    return tiling == "tiled" or (tiling == "auto" and n * m > TILED_ABOVE_ELEMENTS)


def _shared_lse(
    q: Tensor,
    c: Tensor,
    *,
    exclude_offset: int | None,
    want_columns: bool,
    tiling: Tiling,
    block_size: int | None,
    forecast: GradientForecast | None = None,
) -> tuple[Tensor, Tensor | None]:
    if not _use_tiled(tiling, q.shape[0], c.shape[0]):
        return dense_logsumexp_both(q, c, exclude_offset=exclude_offset, want_columns=want_columns)
    if want_columns:
        return tiled_logsumexp_both(q, c, exclude_offset=exclude_offset, block_size=block_size)
    lse = tiled_logsumexp(q, c, exclude_offset=exclude_offset, block_size=block_size, forecast=forecast)
    return lse, None


def _mean_gradient_forecast(
    positive_logits: Tensor, n_negatives: int, tau: Tensor, form: Form
) -> GradientForecast:
    """d form_i / d lse_i for rows r0:r1: what a mean over anchors sends to the row log-sum-exps, up to a scalar."""
    pos, t = positive_logits.detach(), tau.detach()

    def forecast(lse: Tensor, r0: int, r1: int) -> Tensor:
        with torch.enable_grad():
            x = lse.detach().requires_grad_(True)
            value = contrastive_form(pos[r0:r1], x, n_negatives=n_negatives, tau=t, form=form).sum()
            (grad,) = torch.autograd.grad(value, x)
        return grad

    return forecast


def _independent_per_anchor(a: Tensor, p: Tensor, neg: Tensor, tau: Tensor, form: Form, rows: int) -> Tensor:
    """SCRL: per-anchor loss with scores s_ij = <a_i, neg_ij>, over checkpointed chunks of ``rows`` anchors."""

    def chunk(a_c: Tensor, p_c: Tensor, neg_c: Tensor, _start: int) -> Tensor:
        positive_logits = (a_c * p_c).sum(dim=1) / tau
        lse = torch.logsumexp(torch.einsum("nd,nmd->nm", a_c, neg_c) / tau, dim=1)
        return contrastive_form(positive_logits, lse, n_negatives=neg_c.shape[1], tau=tau, form=form)

    return per_anchor_in_chunks(chunk, (a, p, neg), rows)


def contrastive_loss(
    anchors: Tensor,
    positives: Tensor,
    negatives: Negatives = None,
    *,
    tau: TauLike,
    form: Form = "infonce",
    symmetric: bool = False,
    regime: Regime = "shared",
    tiling: Tiling = "auto",
    block_size: int | None = None,
    positive_offset: int | None = None,
    reduction: Reduction = "mean",
) -> Tensor:
    """InfoNCE / DCL / GCL of embeddings with scores s(x, y) = <anchor, candidate>, exactly, for any m.

    Regimes ([A]): ``"shared"`` (SSCRL, CLIP): one set of negatives for all anchors, either ``negatives`` of shape
    (m, d) or ``None`` meaning the other positives of the batch (m = n - 1). ``"independent"`` (SCRL): ``negatives``
    of shape (n, m, d), m per anchor. m is never tied to n.

    ``symmetric=True`` (shared regime) returns the mean of the x->y and y->x directions, as CLIP does. With
    ``negatives=None`` both directions use the batch (y->x ranks x_i among the anchors); explicit shared negatives
    for both directions are passed as a pair ``(negatives_y (m, d), negatives_x (m', d))``. When the shared negatives
    contain this batch's own positives (a batch gathered from several ranks: all positives, and for the y->x direction
    all anchors), ``positive_offset`` says where: row ``positive_offset + i`` is anchor i's positive and is left out
    of its negatives (m = M - 1), exactly as ``negatives=None`` leaves out the diagonal.

    The shared regime computes the n x m scores densely, or, above 2^22 scores or with ``tiling="tiled"``, block by
    block in O(block) extra memory with the same value and gradients (:mod:`crl.objectives.tiled`). The independent
    regime is computed in chunks of anchors. fp16/bf16 inputs are accumulated in float32.

    Args:
        anchors: (n, d) anchor embeddings f(x_i).
        positives: (n, d) positive embeddings g(y_i).
        negatives: see above.
        tau: temperature (float, scalar tensor, or a learnable :class:`Temperature`).
        form: "infonce", "dcl" or "gcl" (formulas in the module docstring).
        symmetric: average the two directions (shared regime only).
        regime: "shared" (SSCRL) or "independent" (SCRL).
        tiling: "auto", "dense" or "tiled" (shared regime).
        block_size: rows and columns per block of the tiled kernel, or anchors per chunk (independent regime).
        positive_offset: row of anchor 0's positive inside explicit shared negatives (gathered batches).
        reduction: "mean" over anchors or "none" for (n,) per-anchor values.

    Returns:
        The scalar loss, or the (n,) per-anchor losses.

    Raises:
        ValueError: on shape, dtype or device mismatch, NaN/Inf embeddings, m = 0, tau <= 0 or not finite, or an
            unknown form/regime/tiling/reduction; the message names the argument and the fix.

    Examples:
        >>> a = torch.nn.functional.normalize(torch.randn(8, 4), dim=1)
        >>> p = torch.nn.functional.normalize(a + 0.1 * torch.randn(8, 4), dim=1)
        >>> ref = torch.nn.functional.cross_entropy(a @ p.T / 0.1, torch.arange(8))
        >>> torch.allclose(contrastive_loss(a, p, tau=0.1), ref)
        True
    """
    check_choice("form", form, FORMS)
    check_choice("regime", regime, REGIMES)
    check_choice("tiling", tiling, TILINGS)
    check_choice("reduction", reduction, REDUCTIONS)
    if block_size is not None and block_size < 1:
        raise ValueError(f"block_size={block_size!r} must be a positive integer (or None for the default).")
    a, p = _check_pair(anchors, positives)
    tensors = {"anchors": a, "positives": p}
    if isinstance(negatives, Tensor):
        tensors["negatives"] = check_embeddings("negatives", negatives, 3 if regime == "independent" else 2)
    elif isinstance(negatives, tuple):
        if len(negatives) != 2:
            raise ValueError(
                f"negatives is a tuple of {len(negatives)}; symmetric=True takes a pair (negatives_y, negatives_x)."
            )
        tensors["negatives[0]"] = check_embeddings("negatives[0]", negatives[0], 2)
        tensors["negatives[1]"] = check_embeddings("negatives[1]", negatives[1], 2)
    elif negatives is not None:
        raise TypeError(
            f"negatives must be None, a tensor or a pair of tensors, got {type(negatives).__name__}."
        )
    check_inputs(tensors)
    t = resolve_tau(tau).to(device=a.device, dtype=upcast(a).dtype)
    a, p = upcast(a), upcast(p)
    if regime == "independent":
        if symmetric or positive_offset is not None:
            raise ValueError(
                "symmetric=True and positive_offset need regime='shared' (they describe one batch's negatives)."
            )
        neg = upcast(_check_independent_negatives(negatives, a.shape[0], a.shape[1]))
        rows = block_size or chunk_rows(a.shape[0], neg.shape[1] * neg.shape[2])
        return _reduce(_independent_per_anchor(a, p, neg, t, form, rows), reduction)
    if positive_offset is not None and negatives is None:
        _check_offset(positive_offset, a.shape[0], [])
    forecast = reduction == "mean" and torch.is_grad_enabled()
    options = (tiling, block_size, forecast)
    per_anchor = _shared_per_anchor(a, p, negatives, t, form, symmetric, positive_offset, options)
    return _reduce(per_anchor, reduction)


def _one_direction(
    queries: Tensor,
    candidates: Tensor,
    positive_logits: Tensor,
    offset: int | None,
    t: Tensor,
    form: Form,
    tiling: Tiling,
    block_size: int | None,
    forecast: bool,
) -> Tensor:
    """Per-query loss against shared candidates; with ``offset`` the candidate at row offset + i is query i's
    positive and is left out of its negatives (m = M - 1)."""
    m = candidates.shape[0] - (offset is not None)
    hint = _mean_gradient_forecast(positive_logits, m, t, form) if forecast else None
    lse, _ = _shared_lse(
        queries / t,
        candidates,
        exclude_offset=offset,
        want_columns=False,
        tiling=tiling,
        block_size=block_size,
        forecast=hint,
    )
    return contrastive_form(positive_logits, lse, n_negatives=m, tau=t, form=form)


def _check_offset(positive_offset: int | None, n: int, sizes: list[int]) -> None:
    if positive_offset is None:
        return
    if not sizes:
        raise ValueError(
            "positive_offset needs explicit negatives that contain the batch's positives; pass them."
        )
    if positive_offset < 0 or any(positive_offset + n > size for size in sizes) or min(sizes) < 2:
        raise ValueError(
            f"positive_offset={positive_offset!r} must satisfy 0 <= offset and offset + n <= M, with n = {n} "
            f"anchors and M = {sizes} negatives (rows offset..offset+n-1 are this batch's positives)."
        )


def _shared_per_anchor(
    a: Tensor,
    p: Tensor,
    negatives: Negatives,
    t: Tensor,
    form: Form,
    symmetric: bool,
    positive_offset: int | None,
    options: tuple[Tiling, int | None, bool],
) -> Tensor:
    """Per-anchor loss in the shared regime. ``options`` = (tiling, block_size, forecast), where ``forecast`` lets
    the tiled kernel precompute the gradients of a mean (one-sided directions)."""
    tiling, block_size, forecast = options
    n, dim = a.shape
    positive_logits = (a * p).sum(dim=1) / t
    if negatives is None:
        if n < 2:
            raise ValueError(
                "negatives=None uses the other positives of the batch, so it needs n >= 2 anchors."
            )
        if not symmetric:
            return _one_direction(a, p, positive_logits, 0, t, form, tiling, block_size, forecast)
        row, col = _shared_lse(
            a / t, p, exclude_offset=0, want_columns=True, tiling=tiling, block_size=block_size
        )
        assert col is not None
        forward = contrastive_form(positive_logits, row, n_negatives=n - 1, tau=t, form=form)
        backward = contrastive_form(positive_logits, col, n_negatives=n - 1, tau=t, form=form)
        return 0.5 * (forward + backward)
    if isinstance(negatives, tuple):
        if not symmetric:
            raise ValueError(
                "a pair of negatives (negatives_y, negatives_x) is for symmetric=True only; pass one (m, d) tensor."
            )
        neg_y = upcast(_check_shared_negatives("negatives[0]", negatives[0], dim))
        neg_x = upcast(_check_shared_negatives("negatives[1]", negatives[1], dim))
        _check_offset(positive_offset, n, [neg_y.shape[0], neg_x.shape[0]])
        forward = _one_direction(
            a, neg_y, positive_logits, positive_offset, t, form, tiling, block_size, forecast
        )
        backward = _one_direction(
            p, neg_x, positive_logits, positive_offset, t, form, tiling, block_size, forecast
        )
        return 0.5 * (forward + backward)
    if symmetric:
        raise ValueError(
            "symmetric=True with explicit shared negatives needs a pair (negatives_y (m, d), negatives_x (m', d)) "
            "so that the y->x direction has negatives of its own; or pass negatives=None for in-batch negatives."
        )
    neg = upcast(_check_shared_negatives("negatives", negatives, dim))
    _check_offset(positive_offset, n, [neg.shape[0]])
    return _one_direction(a, neg, positive_logits, positive_offset, t, form, tiling, block_size, forecast)


class ContrastiveLoss(nn.Module):
    """Module wrapper of :func:`contrastive_loss` that owns its temperature (fixed or a learnable Temperature).

    Examples:
        >>> loss_fn = ContrastiveLoss(tau=Temperature(0.07), form="infonce", symmetric=True)
        >>> a = torch.nn.functional.normalize(torch.randn(8, 4), dim=1)
        >>> bool(loss_fn(a, a).isfinite())
        True
    """

    def __init__(
        self,
        tau: float | Temperature = 0.07,
        *,
        form: Form = "infonce",
        symmetric: bool = False,
        regime: Regime = "shared",
        tiling: Tiling = "auto",
        block_size: int | None = None,
    ) -> None:
        super().__init__()
        check_choice("form", form, FORMS)
        check_choice("regime", regime, REGIMES)
        check_choice("tiling", tiling, TILINGS)
        resolve_tau(tau)
        self.tau = tau
        self.form: Form = form
        self.symmetric = symmetric
        self.regime: Regime = regime
        self.tiling: Tiling = tiling
        self.block_size = block_size

    def forward(self, anchors: Tensor, positives: Tensor, negatives: Negatives = None) -> Tensor:
        return contrastive_loss(
            anchors,
            positives,
            negatives,
            tau=self.tau,
            form=self.form,
            symmetric=self.symmetric,
            regime=self.regime,
            tiling=self.tiling,
            block_size=self.block_size,
        )
