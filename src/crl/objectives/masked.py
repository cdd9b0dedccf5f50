"""SCRL over shared candidates: anchor i's negatives are the candidates its row of a membership mask names.

[A]'s SCRL gives anchor x_i a fixed set S_i of m negatives of its own. When the sets are drawn from one list of M
candidates (the n training items, or a pool), a batch of b anchors needs the embeddings of the candidates only
once: the b x M scores s(x_i, y_j) = <a_i, c_j> are computed densely and masked to S_i, so memory is O(b M + M d)
whatever m is, where the (b, m, d) tensor of :func:`crl.objectives.contrastive_loss`'s independent regime would
hold every anchor's negatives separately. With Delta_ij = s(x_i, y_j) - s(x_i, y_i) and m_i = |S_i| the
per-anchor values are those of :func:`crl.objectives.contrastive_form` (its single definition of each form):

    infonce_i = log(1 + sum_{j in S_i} exp(Delta_ij / tau))
    dcl_i     = log(sum_{j in S_i} exp(Delta_ij / tau))
    gcl_i     = tau * log((1/m_i) sum_{j in S_i} exp(Delta_ij / tau))     ([A]'s empirical risk L_hat per anchor)

and the loss is their mean over the b anchors: with every anchor of the training set once, (1/n) sum_i gcl_i is
[A]'s L_hat exactly, over all m negatives of every S_i. False negatives named by ids are left out of S_i as in
:func:`crl.objectives.contrastive_loss` (a candidate whose id equals the anchor's positive id); m_i counts what is
left.
"""

import math

import torch
from torch import Tensor

from crl._validate import Integers, check, check_choice, check_count
from crl._vocab import FORMS, Form
from crl.objectives._checks import (
    REDUCTIONS,
    Reduction,
    check_embeddings,
    check_inputs,
    check_logit_range,
    check_pair,
    score_bound,
    upcast,
)
from crl.objectives._chunking import chunk_rows, per_anchor_in_chunks
from crl.objectives.infonce import contrastive_form
from crl.objectives.temperature import TauLike, resolve_tau

__all__ = ["masked_contrastive_loss"]


def _member_mask(member: object, n: int, size: int, device: torch.device) -> Tensor:
    """The (n, M) boolean membership mask, checked."""
    if not isinstance(member, Tensor) or member.dtype != torch.bool:
        kind = f"a {member.dtype} tensor" if isinstance(member, Tensor) else type(member).__name__
        raise TypeError(
            f"member must be a boolean tensor (n, M) = ({n}, {size}), got {kind}; pass mask.bool()."
        )
    if tuple(member.shape) != (n, size):
        raise ValueError(
            f"member has shape {tuple(member.shape)}; it needs (n, M) = ({n}, {size}): one row per anchor, one "
            "column per candidate."
        )
    if member.device != device:
        raise ValueError(
            f"member is on {member.device} but the embeddings are on {device}; move it with .to()."
        )
    return member


def _ids(name: str, ids: object, length: int, device: torch.device) -> Tensor:
    checked: Tensor = check(name, ids, Integers((length,)))
    if checked.device != device:
        raise ValueError(
            f"{name} is on {checked.device} but the embeddings are on {device}; move it with .to()."
        )
    return checked


def _nonempty(kept: Tensor) -> Tensor:
    """The (n,) set sizes m_i; on the CPU, refuse an empty set (its log-sum-exp is -inf and its gradient NaN in
    every form). On CUDA (no host synchronisation) an empty set shows as a NaN loss."""
    if kept.device.type == "cpu" and bool((kept == 0).any()):
        anchor = int((kept == 0).nonzero()[0, 0])
        raise ValueError(
            f"anchor {anchor} has an empty negative set S_i (its row of member is all False, or every member shares "
            "its positive's id); give every anchor at least one negative."
        )
    return kept


def masked_contrastive_loss(
    anchors: Tensor,
    positives: Tensor,
    candidates: Tensor,
    member: Tensor,
    *,
    tau: TauLike,
    form: Form = "infonce",
    positive_ids: Tensor | None = None,
    candidate_ids: Tensor | None = None,
    block_size: int | None = None,
    reduction: Reduction = "mean",
) -> Tensor:
    """InfoNCE / DCL / GCL of anchors against their own sets S_i = {j : member[i, j]} of shared candidates, exactly.

    The scores of each chunk of anchors against all M candidates are computed densely, the entries outside S_i
    set to -inf before the log-sum-exp (gradients through them are exactly 0), and each chunk is recomputed in
    the backward pass when there are several (``block_size`` anchors each; default about 2^22 scores per chunk).

    Args:
        anchors: (n, d) anchor embeddings f(x_i).
        positives: (n, d) positive embeddings g(y_i).
        candidates: (M, d) candidate embeddings g(y_j).
        member: (n, M) bool, ``member[i, j]`` when candidate j is in anchor i's set S_i.
        tau: temperature (float, scalar tensor or a :class:`crl.objectives.Temperature`).
        form: "infonce", "dcl" or "gcl" (formulas in the module docstring).
        positive_ids: (n,) integer ids of the positives; with ``candidate_ids`` (M,), a candidate with the
            anchor's positive id is left out of S_i (a false negative).
        candidate_ids: (M,) integer ids of the candidates.
        block_size: anchors per chunk.
        reduction: "mean" over anchors or "none" for the (n,) per-anchor values.

    Raises:
        ValueError / TypeError: on shapes, dtypes or devices that do not fit, NaN/Inf embeddings, a mask that is
            not boolean (n, M), ids without their other half, tau <= 0, logits that overflow the dtype, an unknown
            form or reduction, and (on the CPU) an anchor whose S_i is empty.

    Examples:
        >>> a = torch.nn.functional.normalize(torch.randn(3, 4), dim=1)
        >>> c = torch.nn.functional.normalize(torch.randn(5, 4), dim=1)
        >>> member = torch.ones(3, 5, dtype=torch.bool)
        >>> bool(torch.isfinite(masked_contrastive_loss(a, a, c, member, tau=0.1, form="gcl")))
        True
    """
    check_choice("form", form, FORMS)
    check_choice("reduction", reduction, REDUCTIONS)
    if block_size is not None:
        check_count("block_size", block_size, 1)
    a, p = check_pair(anchors, positives)
    c = check_embeddings("candidates", candidates, 2)
    if c.shape[1] != a.shape[1]:
        raise ValueError(
            f"candidates has dimension {c.shape[1]} but the anchors have d = {a.shape[1]}; embed both alike."
        )
    n, size = a.shape[0], c.shape[0]
    mask = _member_mask(member, n, size, a.device)
    if (positive_ids is None) != (candidate_ids is None):
        raise ValueError(
            "positive_ids and candidate_ids go together (the ids the candidates are compared with)."
        )
    if positive_ids is not None:
        same = (
            _ids("positive_ids", positive_ids, n, a.device)[:, None]
            == _ids("candidate_ids", candidate_ids, size, a.device)[None, :]
        )
        mask = mask & ~same
    check_inputs({"anchors": a, "positives": p, "candidates": c})
    a, p, c = upcast(a), upcast(p), upcast(c)
    tau_value = resolve_tau(tau)
    bound = score_bound({"anchors/positives": (a, p), "anchors/candidates": (a, c)})
    check_logit_range(tau_value, a.dtype, bound, count=n * (size + 1), form=form)
    t = tau_value.to(device=a.device, dtype=a.dtype)
    kept = _nonempty(mask.sum(dim=1))

    def chunk(a_c: Tensor, p_c: Tensor, mask_c: Tensor, kept_c: Tensor, _start: int) -> Tensor:
        positive_logits = (a_c * p_c).sum(dim=1) / t
        logits = (a_c @ c.T / t).masked_fill(~mask_c, -math.inf)
        lse = torch.logsumexp(logits, dim=1)
        return contrastive_form(positive_logits, lse, n_negatives=kept_c, tau=t, form=form)

    rows = block_size or chunk_rows(n, size)
    per_anchor = per_anchor_in_chunks(chunk, (a, p, mask, kept), rows)
    return per_anchor.mean() if reduction == "mean" else per_anchor
