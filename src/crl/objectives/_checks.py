"""Boundary checks shared by the public loss functions.

Every check raises a ``ValueError`` (or ``TypeError``) that names the argument, shows its value and says how to fix
it, so that bad input never surfaces as a traceback from inside torch or as a silent NaN.
"""

import math
import typing
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from crl._validate import Floats, check, check_tau

Tiling = Literal["auto", "dense", "tiled"]
Reduction = Literal["mean", "none"]

TILINGS: tuple[str, ...] = typing.get_args(Tiling)
REDUCTIONS: tuple[str, ...] = typing.get_args(Reduction)


def check_embeddings(name: str, x: object, ndim: int) -> Tensor:
    """A floating tensor with ``ndim`` dimensions and at least one row, returned as it is (no copy).

    Finiteness is checked with the other inputs by :func:`check_inputs`, once devices and dtypes agree.
    """
    return check(name, x, Floats(ndim=ndim, min_rows=1))


def check_pair(anchors: object, positives: object) -> tuple[Tensor, Tensor]:
    """Check (n, d) anchors and (n, d) positives, one positive per anchor (each as in :func:`check_embeddings`)."""
    a = check_embeddings("anchors", anchors, 2)
    p = check_embeddings("positives", positives, 2)
    if a.shape != p.shape:
        raise ValueError(
            f"anchors {tuple(a.shape)} and positives {tuple(p.shape)} differ; pass one positive per anchor (n, d)."
        )
    if a.shape[1] == 0:
        raise ValueError(
            f"anchors has shape {tuple(a.shape)}: embedding dimension d = 0 gives every score 0 (loss log n); "
            "pass embeddings with d >= 1."
        )
    return a, p


def check_inputs(tensors: dict[str, Tensor]) -> None:
    """Raise ``ValueError`` unless the named tensors share one device and one dtype and are all finite.

    Finiteness is checked on the CPU only: on an accelerator it would cost a host synchronisation per call, so
    there a NaN input shows as a NaN loss, which the trainer checks once per log step (``check_finite_loss``).
    """
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{name} on {dev}" for name, dev in devices.items())
        raise ValueError(
            f"inputs are on different devices ({listing}); move them to one device with .to(device)."
        )
    dtypes = {name: t.dtype for name, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        listing = ", ".join(f"{name}: {dt}" for name, dt in dtypes.items())
        raise ValueError(f"inputs have different dtypes ({listing}); cast them to one dtype first.")
    for name, t in tensors.items():
        if t.device.type == "cpu" and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            raise ValueError(
                f"{name} contains {bad} NaN/Inf entries; check the encoder output (or the learning rate) upstream."
            )


def check_scores(positive_scores: object, negative_scores: object) -> tuple[Tensor, Tensor]:
    """Check (n,) positive and (n, m >= 1) negative scores; return them upcast from half precision."""
    pos = check_embeddings("positive_scores", positive_scores, 1)
    neg = check_embeddings("negative_scores", negative_scores, 2)
    check_inputs({"positive_scores": pos, "negative_scores": neg})
    if neg.shape[0] != pos.shape[0]:
        raise ValueError(
            f"negative_scores has {neg.shape[0]} rows but positive_scores has {pos.shape[0]}; "
            "pass one row of m negative scores per anchor."
        )
    if neg.shape[1] == 0:
        raise ValueError("negative_scores has m = 0 columns; pass at least one negative per anchor.")
    return upcast(pos), upcast(neg)


def check_tau_value(tau: Tensor) -> None:
    """Raise ``ValueError`` unless the temperature is a finite positive scalar (its value: on the CPU only, as
    reading it from an accelerator would synchronise the host on every call)."""
    if tau.numel() != 1:
        raise ValueError(f"tau has shape {tuple(tau.shape)}; pass a scalar temperature.")
    if tau.device.type == "cpu":
        check_tau(float(tau.detach()))


def max_row_norm(x: Tensor) -> float:
    """The largest Euclidean norm of x's rows (over its last dimension), computed without overflow; 0 if empty."""
    rows = x.detach()
    if rows.numel() == 0:
        return 0.0
    top = float(torch.linalg.vector_norm(rows, dim=-1).max())
    if math.isfinite(top):
        return top
    scale = float(rows.abs().amax())
    return scale * float(torch.linalg.vector_norm(rows / scale, dim=-1).max())


class ScoreBound(NamedTuple):
    """A bound on the scores |s| of a loss, with the inputs that reach it and the fix should it be too large."""

    names: str
    bound: float
    fix: str


def score_bound(pairs: dict[str, tuple[Tensor, Tensor]]) -> ScoreBound | None:
    """The largest Cauchy-Schwarz bound |<q, c>| <= max|q| max|c| over named (queries, candidates) pairs, O(n d).

    Returns:
        The bound of the pair with the largest one, or None off the CPU (reading a value from an
        accelerator would synchronise the host on every call).
    """
    if any(t.device.type != "cpu" for pair in pairs.values() for t in pair):
        return None
    bounds = {name: max_row_norm(q) * max_row_norm(c) for name, (q, c) in pairs.items()}
    name = max(bounds, key=lambda key: bounds[key])
    return ScoreBound(name, bounds[name], "normalise the embeddings")


def highest_score(positive_scores: Tensor, negative_scores: Tensor) -> ScoreBound | None:
    """The largest logit-to-be of given scores: max(|s_ii|, s_ij) (a very negative s_ij only underflows exp to 0,
    as intended); None off the CPU, as :func:`score_bound`."""
    if positive_scores.device.type != "cpu":
        return None
    top = max(float(positive_scores.detach().abs().amax()), float(negative_scores.detach().amax()))
    return ScoreBound("positive_scores/negative_scores", top, "rescale the scores")


def _limit(dtype: torch.dtype, count: int) -> float:
    """The largest magnitude of a logit (or tau, or 1/tau) whose sums over ``count`` logits stay finite."""
    return torch.finfo(dtype).max / (4 * max(count, 1))


def _wider(dtype: torch.dtype) -> str:
    """The remedy of a float64 computation, where the inputs are narrower."""
    return "" if dtype == torch.float64 else " or use float64 inputs"


def check_score_range(bound: ScoreBound | None, dtype: torch.dtype, *, count: int) -> None:
    """Raise ``ValueError`` if the scores |s| <= ``bound`` may overflow ``dtype`` in sums over ``count`` of them.

    The limit is finfo(dtype).max / (4 count): a loss sums its per-anchor values over the anchors, each a sum or
    difference of a few logits, in both directions of a symmetric loss. ``bound`` None (off the CPU) checks nothing.
    """
    if bound is None:
        return
    names, top, fix = bound
    limit = _limit(dtype, count)
    if top > limit:
        raise ValueError(
            f"{names}: scores overflow {str(dtype).removeprefix('torch.')} (|s| up to {top:.3g}, at most "
            f"{limit:.3g} fits); {fix}{_wider(dtype)}."
        )


def check_logit_range(
    tau: Tensor, dtype: torch.dtype, bound: ScoreBound | None, *, count: int, form: str = ""
) -> None:
    """Raise ``ValueError`` unless tau, 1/tau, the scores and the logits s/tau fit ``dtype`` with room to sum them.

    Each must stay within the limit of :func:`check_score_range`. GCL, tau (lse - log m) - s_ii, keeps fewer than
    half of the dtype's digits beyond tau = max(1, |s|) / sqrt(eps) (its rounding error grows as tau eps), so a
    larger tau is refused there. Checked on the CPU only, as :func:`check_tau_value`; ``bound``
    (:func:`score_bound`) None skips the checks that need the scores.
    """
    if tau.device.type != "cpu":
        return
    value = float(tau.detach())
    limit = _limit(dtype, count)
    kind = str(dtype).removeprefix("torch.")
    if not 1.0 / limit <= value <= limit:
        raise ValueError(
            f"tau={value:.3g} is outside [{1.0 / limit:.3g}, {limit:.3g}], the range in which tau, 1/tau and sums "
            f"of the {count} logits fit {kind}; pass a tau in it{_wider(dtype)}."
        )
    check_score_range(bound, dtype, count=count)
    if bound is None:
        return
    names, top, _ = bound
    if top / value > limit:
        raise ValueError(
            f"tau={value:.3g}: the logits s/tau of {names} (|s| up to {top:.3g}) overflow {kind}; use "
            f"tau >= {top / limit:.3g}{_wider(dtype)}."
        )
    ceiling = max(top, 1.0) / math.sqrt(torch.finfo(dtype).eps)
    if form == "gcl" and value > ceiling:
        raise ValueError(
            f"tau={value:.3g} with form='gcl': beyond tau = {ceiling:.3g} ({kind}, |s| up to {top:.3g}) GCL's "
            f"rounding error tau*eps exceeds half of its digits; use a smaller tau{_wider(dtype)}, or "
            "oce_loss(..., disutility='entropic'), which computes the same risk stably."
        )


RESOLVED_SHARE = 1e-3
"""Largest rounding error of a per-anchor loss, as a share of max(1, its size in nats), that is returned."""


def check_resolution(positive_logits: Tensor, negative_lse: Tensor, difference: Tensor) -> None:
    """Raise ``ValueError`` when a per-anchor loss ``difference`` = lse_i - s_ii/tau (in nats) is a difference of
    logits so large that its rounding error, eps (|s_ii/tau| + |lse_i|), exceeds :data:`RESOLVED_SHARE` of
    max(1, |difference|): collapsed or huge embeddings, whose loss would be rounded away (to 0, or to a
    multiple of the logits' spacing). Checked on the CPU only, as :func:`check_logit_range`."""
    if positive_logits.device.type != "cpu":
        return
    with torch.no_grad():
        lse = negative_lse.detach()
        magnitude = positive_logits.detach().abs() + torch.where(lse.isfinite(), lse.abs(), 0.0)
        error = torch.finfo(magnitude.dtype).eps * magnitude
        allowed = RESOLVED_SHARE * difference.detach().abs().nan_to_num(posinf=0.0).clamp(min=1.0)
        if not bool((error > allowed).any()):
            return
        worst = int(torch.argmax(error / allowed))
    kind = str(magnitude.dtype).removeprefix("torch.")
    raise ValueError(
        f"the logits s/tau reach {float(magnitude[worst]) / 2:.3g}, where {kind} resolves a loss only to "
        f"{float(error[worst]):.3g} nats, more than {RESOLVED_SHARE:g} of the loss itself (collapsed or huge "
        "embeddings: the loss, a small difference of huge logits, would be rounded away); normalise the "
        f"embeddings or raise tau (|s| / tau below about {RESOLVED_SHARE / torch.finfo(magnitude.dtype).eps:.3g})"
        f"{_wider(magnitude.dtype)}."
    )


def upcast(x: Tensor) -> Tensor:
    """Half-precision inputs (fp16, bf16) are accumulated in float32; float32/float64 pass through."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
