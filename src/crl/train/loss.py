"""The loss of one training step: a batch of embedded pairs, its negatives, and one contrastive form.

Every value comes from :func:`crl.objectives.contrastive_loss` (the single definition of InfoNCE/DCL/GCL), or for
fixed negative sets drawn as a membership mask from :func:`crl.objectives.masked_contrastive_loss` (the same
forms over each anchor's set S_i, exclusions already in the mask); this module only routes a
:class:`crl.negatives.Draw` to the right call. In-batch negatives over a batch gathered
from K ranks score this rank's anchors against all K*n candidates, leaving out each anchor's own positive at
``batch_offset + i`` (``positive_offset``), so the mean over ranks is the in-batch loss of the global batch.
"""

from __future__ import annotations

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
        return masked_contrastive_loss(a, p, negatives.y, negatives.mask, tau=tau, form=form)
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
