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

from crl._validate import check_choice, check_count
from crl._vocab import FORMS, REGIMES, Form, Regime
from crl.negatives import Negatives
from crl.objectives._checks import (
    REDUCTIONS,
    TILINGS,
    Reduction,
    Tiling,
    check_inputs,
    check_logit_range,
    check_pair,
    check_resolution,
    check_scores,
    highest_score,
    score_bound,
    upcast,
)
from crl.objectives._chunking import chunk_rows, per_anchor_in_chunks
from crl.objectives._lse import (
    Kernel,
    check_kept,
    negatives_kept,
    row_and_column_lse,
    row_lse,
)
from crl.objectives._mask import ItemIds, LeaveOut, resolve_ids
from crl.objectives._negatives import NegativeSet, resolve_negatives
from crl.objectives.temperature import TauLike, Temperature, resolve_tau
from crl.objectives.tiled import GradientForecast


def contrastive_form(
    positive_logits: Tensor, negative_lse: Tensor, *, n_negatives: int | Tensor, tau: Tensor, form: Form
) -> Tensor:
    """Per-anchor loss from the positive's logit ``s_ii / tau`` and ``lse_i = log sum_j exp(s_ij / tau)``.

    ``infonce = logaddexp(s_ii/tau, lse_i) - s_ii/tau``; ``dcl = lse_i - s_ii/tau``;
    ``gcl = tau * (lse_i - s_ii/tau - log m)``, with m an int or (false negatives left out) an (n,) count m_i.

    Raises:
        ValueError: when the logits are so large that lse_i - s_ii/tau is rounded away (:func:`check_resolution`).
    """
    check_resolution(positive_logits, negative_lse, negative_lse - positive_logits)
    if form == "infonce":
        return torch.logaddexp(positive_logits, negative_lse) - positive_logits
    if form == "dcl":
        return negative_lse - positive_logits
    log_m = n_negatives.to(negative_lse).log() if isinstance(n_negatives, Tensor) else math.log(n_negatives)
    return tau * (negative_lse - positive_logits - log_m)


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
        ValueError: on shape mismatch, m = 0, NaN/Inf scores, tau <= 0, logits s/tau that overflow the dtype, or
            an unknown form/reduction.

    Examples:
        >>> pos, neg = torch.zeros(2, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64)
        >>> float(contrastive_loss_from_scores(pos, neg, tau=0.5, form="dcl")) == math.log(3)
        True
    """
    check_choice("form", form, FORMS)
    check_choice("reduction", reduction, REDUCTIONS)
    pos, neg = check_scores(positive_scores, negative_scores)
    tau_value = resolve_tau(tau)
    check_logit_range(tau_value, pos.dtype, highest_score(pos, neg), count=neg.numel(), form=form)
    t = tau_value.to(device=pos.device, dtype=pos.dtype)
    lse = torch.logsumexp(neg / t, dim=1)
    per_anchor = contrastive_form(pos / t, lse, n_negatives=neg.shape[1], tau=t, form=form)
    return _reduce(per_anchor, reduction)


def _mean_gradient_forecast(
    positive_logits: Tensor, n_negatives: int | Tensor, tau: Tensor, form: Form
) -> GradientForecast:
    """d form_i / d lse_i for rows r0:r1: what a mean over anchors sends to the row log-sum-exps, up to a scalar."""
    pos, t = positive_logits.detach(), tau.detach()

    def forecast(lse: Tensor, r0: int, r1: int) -> Tensor:
        m = n_negatives[r0:r1] if isinstance(n_negatives, Tensor) else n_negatives
        with torch.enable_grad():
            x = lse.detach().requires_grad_(True)
            value = contrastive_form(pos[r0:r1], x, n_negatives=m, tau=t, form=form).sum()
            (grad,) = torch.autograd.grad(value, x)
        return grad

    return forecast


def _independent_per_anchor(
    a: Tensor, p: Tensor, neg: Tensor, tau: Tensor, form: Form, rows: int, ids: ItemIds | None
) -> Tensor:
    """SCRL: per-anchor loss with scores s_ij = <a_i, neg_ij>, over checkpointed chunks of ``rows`` anchors;
    with ids, negative j of anchor i is left out when ``ids.y[i, j] == ids.positive[i]``."""
    m = neg.shape[1]
    if ids is None:

        def chunk(a_c: Tensor, p_c: Tensor, neg_c: Tensor, _start: int) -> Tensor:
            positive_logits = (a_c * p_c).sum(dim=1) / tau
            lse = torch.logsumexp(torch.einsum("nd,nmd->nm", a_c, neg_c) / tau, dim=1)
            return contrastive_form(positive_logits, lse, n_negatives=m, tau=tau, form=form)

        return per_anchor_in_chunks(chunk, (a, p, neg), rows)
    same = ids.y == ids.positive[:, None]
    kept = check_kept(m - same.sum(dim=1), form)

    def masked_chunk(
        a_c: Tensor, p_c: Tensor, neg_c: Tensor, same_c: Tensor, kept_c: Tensor, _start: int
    ) -> Tensor:
        positive_logits = (a_c * p_c).sum(dim=1) / tau
        logits = (torch.einsum("nd,nmd->nm", a_c, neg_c) / tau).masked_fill(same_c, -math.inf)
        lse = torch.logsumexp(logits, dim=1)
        return contrastive_form(positive_logits, lse, n_negatives=kept_c, tau=tau, form=form)

    return per_anchor_in_chunks(masked_chunk, (a, p, neg, same, kept), rows)


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
    positive_ids: Tensor | None = None,
    negative_ids: Tensor | tuple[Tensor, Tensor] | None = None,
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

    False negatives: with ``positive_ids`` (n,) integer ids naming each anchor's positive item (a text, a
    product), a candidate with the same id as anchor i's positive is left out of anchor i's negatives (duplicate
    texts in a batch, the same item twice); the positive itself stays in InfoNCE's numerator. In batch the
    positives' ids name the candidates of both directions. Explicit negatives need ``negative_ids`` naming each
    negative's positive item: (M,), a pair ((M,), (M',)) for a symmetric pair, or (n, m) independent. GCL then
    averages over the m_i negatives each anchor keeps; DCL and GCL refuse an anchor left with none.

    The shared regime computes the n x m scores densely, or, above 2^17 scores on the CPU (2^22 on CUDA) or with
    ``tiling="tiled"``, block by block in O(block) extra memory with the same value and gradients
    (:mod:`crl.objectives.tiled`). The independent
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
        positive_ids: (n,) integer item ids of the positives (false-negative mask, see above), or None.
        negative_ids: integer item ids of explicit negatives (see above); None in batch.
        reduction: "mean" over anchors or "none" for (n,) per-anchor values.

    Returns:
        The scalar loss, or the (n,) per-anchor losses.

    Raises:
        ValueError: on shape, dtype or device mismatch, NaN/Inf embeddings, m = 0, tau <= 0 or not finite, or an
            unknown form/regime/tiling/reduction; on the CPU also for scores or logits s/tau that overflow the
            dtype, and for GCL with a tau beyond its precision (:func:`crl.objectives._checks.check_logit_range`).
            The message names the argument and the fix.

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
    if block_size is not None:
        check_count("block_size", block_size, 1)
    a, p = check_pair(anchors, positives)
    negs = resolve_negatives(
        negatives,
        n=a.shape[0],
        dim=a.shape[1],
        regime=regime,
        symmetric=symmetric,
        positive_offset=positive_offset,
    )
    ids = resolve_ids(
        positive_ids, negative_ids, kind=negs.kind, n=a.shape[0], sizes=negs.sizes(), device=a.device
    )
    check_inputs({"anchors": a, "positives": p, **negs.named()})
    a, p, negs = upcast(a), upcast(p), negs.upcast()
    tau_value = resolve_tau(tau)
    count = a.shape[0] * (negs.m + (negs.m_x or 0))
    check_logit_range(tau_value, a.dtype, score_bound(negs.scored_pairs(a, p)), count=count, form=form)
    t = tau_value.to(device=a.device, dtype=a.dtype)
    if negs.kind == "independent":
        neg = negs.candidates(p)
        rows = block_size or chunk_rows(a.shape[0], negs.m * a.shape[1])
        return _reduce(_independent_per_anchor(a, p, neg, t, form, rows, ids), reduction)
    kernel = Kernel(tiling, block_size, forecast=reduction == "mean" and torch.is_grad_enabled())
    return _reduce(_shared_per_anchor(a, p, negs, t, form, kernel, ids), reduction)


def _one_direction(
    queries: Tensor,
    candidates: Tensor,
    positive_logits: Tensor,
    *,
    m: int,
    leave: LeaveOut,
    t: Tensor,
    form: Form,
    kernel: Kernel,
) -> Tensor:
    """Per-query loss against shared candidates, those ``leave`` names (own positive, false negatives) left out."""
    kept = negatives_kept(leave, candidates.shape[0], m, form)
    hint = _mean_gradient_forecast(positive_logits, kept, t, form) if kernel.forecast else None
    lse = row_lse(queries, candidates, tau=t, leave=leave, kernel=kernel, forecast=hint)
    return contrastive_form(positive_logits, lse, n_negatives=kept, tau=t, form=form)


def _shared_per_anchor(
    a: Tensor, p: Tensor, negs: NegativeSet, t: Tensor, form: Form, kernel: Kernel, ids: ItemIds | None
) -> Tensor:
    """Per-anchor loss in the shared regime: the x->y direction, averaged with the y->x one when ``negs.m_x`` is set.

    In batch, both directions come from one n x n logit matrix <a_i, p_j> / tau: its rows rank p_i among the
    positives, its columns a_i among the anchors.
    """
    positive_logits = (a * p).sum(dim=1) / t
    row_ids = None if ids is None else ids.positive
    leave_y = LeaveOut(negs.offset, row_ids, None if ids is None else ids.y)
    if negs.kind == "in_batch" and negs.m_x is not None:
        row, col = row_and_column_lse(a, p, tau=t, leave=leave_y, kernel=kernel)
        kept = negatives_kept(leave_y, p.shape[0], negs.m, form)
        forward = contrastive_form(positive_logits, row, n_negatives=kept, tau=t, form=form)
        backward = contrastive_form(positive_logits, col, n_negatives=kept, tau=t, form=form)
        return 0.5 * (forward + backward)
    candidates = negs.candidates(p)
    forward = _one_direction(
        a, candidates, positive_logits, m=negs.m, leave=leave_y, t=t, form=form, kernel=kernel
    )
    if negs.m_x is None:
        return forward
    leave_x = LeaveOut(negs.offset, row_ids, None if ids is None else ids.x)
    backward = _one_direction(
        p,
        negs.reverse_candidates(a),
        positive_logits,
        m=negs.m_x,
        leave=leave_x,
        t=t,
        form=form,
        kernel=kernel,
    )
    return 0.5 * (forward + backward)


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
        if block_size is not None:
            check_count("block_size", block_size, 1)
        resolve_tau(tau)
        self.tau = tau
        self.form: Form = form
        self.symmetric = symmetric
        self.regime: Regime = regime
        self.tiling: Tiling = tiling
        self.block_size = block_size

    def forward(
        self,
        anchors: Tensor,
        positives: Tensor,
        negatives: Negatives = None,
        positive_ids: Tensor | None = None,
        negative_ids: Tensor | tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        return contrastive_loss(
            anchors,
            positives,
            negatives,
            positive_ids=positive_ids,
            negative_ids=negative_ids,
            tau=self.tau,
            form=self.form,
            symmetric=self.symmetric,
            regime=self.regime,
            tiling=self.tiling,
            block_size=self.block_size,
        )
