"""The loss of one training step: a batch of embedded pairs, its negatives, and one contrastive form.

Every value comes from :mod:`crl.objectives` (``contrastive_loss`` and ``contrastive_form``, the single
definition of InfoNCE/DCL/GCL); this module only routes a :class:`crl.negatives.Negatives` to the right call.
The one case ``contrastive_loss`` does not take directly is in-batch negatives over a batch gathered from K
ranks, where this rank's anchors are scored against all K*n candidates (see :func:`gathered_in_batch_loss`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from crl.negatives import EmbeddedBatch, Negatives
from crl.objectives import contrastive_form, contrastive_loss
from crl.objectives._checks import Form

__all__ = ["batch_loss", "gathered_in_batch_loss"]


def gathered_in_batch_loss(
    anchors: Tensor,
    positives: Tensor,
    gathered_anchors: Tensor,
    gathered_positives: Tensor,
    batch_offset: int,
    *,
    tau: Tensor,
    form: Form,
    symmetric: bool,
) -> Tensor:
    """In-batch loss of this rank's n anchors against the global batch of N = K*n pairs.

    Local anchor i is global pair g = batch_offset + i. With logits l_ij = <a_i, P_j>/tau over the gathered
    positives P, the negatives of a_i are P_j, j != g (m = N - 1), and
    ``forward_i = contrastive_form(l_ig, logsumexp_{j != g} l_ij)``; when ``symmetric`` the y -> x direction
    ranks x_g among the gathered anchors A the same way, and the per-anchor value is the mean of the two. The
    result is the mean over the n local anchors, so the mean over ranks equals ``contrastive_loss`` of the
    concatenated batch; with :func:`crl.negatives.all_gather_with_grad` and DDP's gradient averaging the
    gradient equals it too.

    Args:
        anchors: (n, d) f(x_i) of this rank (the rows of ``gathered_anchors`` at the offset, with their own graph).
        positives: (n, d) g(y_i) of this rank.
        gathered_anchors: (N, d) anchors of all ranks.
        gathered_positives: (N, d) positives of all ranks.
        batch_offset: row of this rank's first pair in the gathered tensors.
        tau: temperature, 0-dim tensor.
        form: "infonce", "dcl" or "gcl".
        symmetric: average the x->y and y->x directions.
    """
    n, total = anchors.shape[0], gathered_positives.shape[0]
    tau = tau.to(device=anchors.device, dtype=anchors.dtype)
    if total < 2:
        raise ValueError("in-batch negatives need a global batch of at least 2 pairs")
    own = torch.zeros(n, total, dtype=torch.bool, device=anchors.device)
    own[torch.arange(n, device=anchors.device), batch_offset + torch.arange(n, device=anchors.device)] = True
    positive_logits = (anchors * positives).sum(dim=1) / tau
    row = (anchors @ gathered_positives.T / tau).masked_fill(own, float("-inf")).logsumexp(dim=1)
    per_anchor = contrastive_form(positive_logits, row, n_negatives=total - 1, tau=tau, form=form)
    if symmetric:
        column = (positives @ gathered_anchors.T / tau).masked_fill(own, float("-inf")).logsumexp(dim=1)
        backward = contrastive_form(positive_logits, column, n_negatives=total - 1, tau=tau, form=form)
        per_anchor = 0.5 * (per_anchor + backward)
    return per_anchor.mean()


def batch_loss(
    batch: EmbeddedBatch, negatives: Negatives, *, tau: Tensor, form: Form, symmetric: bool
) -> Tensor:
    """The mean loss of ``batch`` against ``negatives`` (already embedded: kind "in_batch" or "embeddings").

    Raises:
        ValueError: for negatives that still hold indices or samples (embed them first with
            :func:`crl.negatives.embed_negatives`), or a symmetric loss without anchor-side negatives.
    """
    a, p = batch.anchors, batch.positives
    if negatives.kind == "in_batch":
        if negatives.y is None or negatives.x is None:
            return contrastive_loss(a, p, None, tau=tau, form=form, symmetric=symmetric)
        return gathered_in_batch_loss(
            a, p, negatives.x, negatives.y, negatives.batch_offset, tau=tau, form=form, symmetric=symmetric
        )
    if negatives.kind != "embeddings" or negatives.y is None:
        raise ValueError(
            f"negatives of kind {negatives.kind!r} are not embeddings yet; call crl.negatives.embed_negatives first"
        )
    if negatives.regime == "independent":
        return contrastive_loss(a, p, negatives.y, tau=tau, form=form, regime="independent")
    if symmetric:
        if negatives.x is None:
            raise ValueError(
                "symmetric = true needs anchor-side negatives x'; this sampler gives only y' (use symmetric = false)"
            )
        return contrastive_loss(a, p, (negatives.y, negatives.x), tau=tau, form=form, symmetric=True)
    return contrastive_loss(a, p, negatives.y, tau=tau, form=form)
