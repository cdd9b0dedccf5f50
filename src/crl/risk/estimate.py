"""What every risk estimate returns, and the checks shared by the estimators of [A]'s quantities.

An :class:`Estimate` is a Monte-Carlo mean with its standard error ``sd / sqrt(n)`` over independent
draws (``se = 0`` for an exact computation). Score functions are plain callables ``s(x, y)`` that broadcast
over leading dimensions: ``score_fn(x[:, None, :], y[None, :, :])`` is the (n, m) matrix of scores of n
anchors against m candidates, as the synthetic models' ``log_ratio`` does.
"""

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from crl._validate import check_choice
from crl._vocab import FORMS, Estimate

ScoreFn = Callable[[Tensor, Tensor], Tensor]
"""A score s(x, y): maps broadcastable (..., d) tensors x and y to the (...) tensor of scores."""

CHUNK_ELEMENTS = 1 << 22
"""Largest number of floats (anchors x negatives x d) one chunk of an estimator materialises."""


def estimate_from_draws(draws: Tensor) -> Estimate:
    """Mean and standard error ``sd / sqrt(n)`` of independent draws (float64).

    Args:
        draws: 1-D tensor of at least two finite draws.

    Raises:
        ValueError: if fewer than two draws are given or any is NaN/Inf.
    """
    values = draws.detach().to(torch.float64).reshape(-1)
    if values.numel() < 2:
        raise ValueError(f"draws has {values.numel()} entries; pass at least 2 to estimate a standard error.")
    if not bool(torch.isfinite(values).all()):
        bad = int((~torch.isfinite(values)).sum())
        raise ValueError(
            f"draws contains {bad} NaN/Inf values; the score or the model produced non-finite terms."
        )
    n = values.numel()
    return Estimate(float(values.mean()), float(values.std(unbiased=True)) / math.sqrt(n), n)


def evaluate_scores(score_fn: ScoreFn, x: Tensor, y: Tensor, name: str = "score_fn") -> Tensor:
    """``score_fn(x, y)`` in float64, checked to be finite and of the broadcast shape of x and y minus d.

    Raises:
        ValueError: if the scores have the wrong shape or contain NaN/Inf.
    """
    expected = np.broadcast_shapes(tuple(x.shape[:-1]), tuple(y.shape[:-1]))
    scores = score_fn(x, y)
    if not isinstance(scores, Tensor) or tuple(scores.shape) != tuple(expected):
        shape = tuple(scores.shape) if isinstance(scores, Tensor) else type(scores).__name__
        raise ValueError(
            f"{name} returned {shape} for x {tuple(x.shape)} and y {tuple(y.shape)}; it must broadcast over "
            f"leading dimensions and return shape {tuple(expected)} (one score per pair)."
        )
    scores = scores.detach().to(torch.float64)
    if not bool(torch.isfinite(scores).all()):
        raise ValueError(f"{name} returned NaN/Inf scores; [A]'s risks need finite scores s(x, y).")
    return scores


def anchor_chunks(n: int, per_anchor: int) -> list[tuple[int, int]]:
    """``(start, stop)`` ranges of anchors so that each chunk holds at most ~CHUNK_ELEMENTS floats."""
    rows = max(1, CHUNK_ELEMENTS // max(1, per_anchor))
    return [(start, min(n, start + rows)) for start in range(0, n, rows)]


def limit_form(form: str) -> Literal["gcl", "dcl"]:
    """The form whose m -> infinity limit a form has after centring: "gcl" for gcl, "dcl" for dcl and infonce.

    ``infonce - log m`` and ``dcl - log m`` both tend to ``log Z_s(x) - s(x, y)/tau`` ([B]'s CE); ``gcl`` tends to
    ``tau log Z_s(x) - s(x, y)`` ([A]'s L).
    """
    check_choice("form", form, FORMS)
    return "gcl" if form == "gcl" else "dcl"
