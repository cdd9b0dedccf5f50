"""The loss of one training step: a batch of embedded pairs, its negatives, and one contrastive form.

Every value comes from :func:`crl.objectives.contrastive_loss` (the single definition of InfoNCE/DCL/GCL), or for
fixed negative sets drawn as a membership mask from :func:`crl.objectives.masked_contrastive_loss` (the same
forms over each anchor's set S_i, exclusions already in the mask; an anchor whose S_i is empty has no term and is
left out of the mean); this module only routes a
:class:`crl.negatives.Draw` to the right call. In-batch negatives over a batch gathered
from K ranks score this rank's anchors against all K*n candidates, leaving out each anchor's own positive at
``batch_offset + i`` (``positive_offset``), so the mean over ranks is the in-batch loss of the global batch.
"""

from __future__ import annotations

import torch
from torch import Tensor

from crl._vocab import Form
from crl.negatives import Draw, EmbeddedBatch
from crl.objectives import contrastive_loss, masked_contrastive_loss
from crl.train.false_negatives import FalseNegativeIds

__all__ = ["batch_loss"]


def batch_loss(
    batch: EmbeddedBatch,
    negatives: Draw,
    *,
    tau: Tensor,
    form: Form,
    symmetric: bool,
    ids: FalseNegativeIds | None = None,
) -> Tensor:
    """The mean loss of ``batch`` against ``negatives`` (already embedded: kind "in_batch" or "embeddings").

    ``ids`` (optional) leave false negatives out (:mod:`crl.train.false_negatives`); a gathered batch takes none.

    Raises:
        ValueError: for negatives that still hold indices or samples (embed them first with
            :func:`crl.negatives.embed_negatives`), or a symmetric loss without anchor-side negatives.
    """
    a, p = batch.anchors, batch.positives
    ids = ids if ids is not None else FalseNegativeIds()
    pos_ids, neg_ids = ids.positive_ids, ids.negative_ids
    if negatives.kind == "in_batch":
        if negatives.y is None or negatives.x is None:
            return contrastive_loss(
                a,
                p,
                None,
                tau=tau,
                form=form,
                symmetric=symmetric,
                positive_ids=pos_ids,
                negative_ids=neg_ids,
            )
        gathered = (negatives.y, negatives.x) if symmetric else negatives.y
        return contrastive_loss(
            a, p, gathered, tau=tau, form=form, symmetric=symmetric, positive_offset=negatives.batch_offset
        )
    if negatives.kind != "embeddings" or negatives.y is None:
        raise ValueError(
            f"negatives of kind {negatives.kind!r} are not embeddings yet; call crl.negatives.embed_negatives first"
        )
    if negatives.mask is not None:
        if symmetric:
            raise ValueError("fixed negative sets are one-sided; set symmetric = false")
        return _fixed_sets_loss(a, p, negatives.y, negatives.mask, tau=tau, form=form)
    if negatives.regime == "independent":
        return contrastive_loss(
            a,
            p,
            negatives.y,
            tau=tau,
            form=form,
            regime="independent",
            positive_ids=pos_ids,
            negative_ids=neg_ids,
        )
    if symmetric:
        if negatives.x is None:
            raise ValueError(
                "symmetric = true needs anchor-side negatives x'; this sampler gives only y' (use symmetric = false)"
            )
        return contrastive_loss(
            a,
            p,
            (negatives.y, negatives.x),
            tau=tau,
            form=form,
            symmetric=True,
            positive_ids=pos_ids,
            negative_ids=neg_ids,
        )
    return contrastive_loss(a, p, negatives.y, tau=tau, form=form, positive_ids=pos_ids, negative_ids=neg_ids)


def _fixed_sets_loss(a: Tensor, p: Tensor, y: Tensor, mask: Tensor, *, tau: Tensor, form: Form) -> Tensor:
    """The mean of the per-anchor L_hat terms over the anchors whose fixed set S_i is not empty.

    An anchor left with no negative (SSCRL's pool of m = 1 holding the anchor's own item, or only items of its key)
    has no term in [A]'s L_hat; it is left out of the mean (a batch where every set is empty gives 0 with zero
    gradient). Its row borrows a placeholder member so the masked loss stays finite, then weighs 0: no host
    synchronisation, so CUDA steps do not wait. On the CPU a batch whose sets are all non-empty takes the plain
    mean (:func:`masked_contrastive_loss` itself), bit for bit.
    """
    has_set = mask.any(dim=1)
    if mask.device.type == "cpu" and bool(has_set.all()):
        return masked_contrastive_loss(a, p, y, mask, tau=tau, form=form)
    placeholder = torch.zeros_like(mask)
    placeholder[:, 0] = True
    filled = torch.where(has_set[:, None], mask, placeholder)
    terms = masked_contrastive_loss(a, p, y, filled, tau=tau, form=form, reduction="none")
    weights = has_set.to(terms.dtype)
    return (terms * weights).sum() / weights.sum().clamp(min=1.0)
