"""The inputs of the kernel risks (embeddings, support weights, score draws, ratio pairs) as float64 tensors of
the right shapes, checked with :mod:`crl._validate`'s constraints."""

import math

import torch
from torch import Tensor

from crl._validate import ArgumentError, Floats, check


def pair_scores(anchor_embeddings: Tensor, support_embeddings: Tensor) -> Tensor:
    """(n, N) inner products in float64, after checking both (n, p), (N, p) inputs."""
    a = check_matrix("anchor_embeddings", anchor_embeddings)
    c = check_matrix("support_embeddings", support_embeddings)
    if a.shape[1] != c.shape[1]:
        raise ValueError(
            f"anchor_embeddings have p = {a.shape[1]} but support_embeddings have p = {c.shape[1]}; "
            "embed both with the same phi."
        )
    return a @ c.T


def support_log_weights(support_weights: Tensor | None, size: int) -> Tensor:
    """log pi_j of the support: from the given weights (positive, summing to 1) or log(1/N)."""
    if support_weights is None:
        return torch.full((size,), -math.log(size), dtype=torch.float64)
    w = check_vector("support_weights", support_weights, size)
    if bool((w <= 0).any()):
        raise ValueError(
            "support_weights has entries <= 0; pass positive weights pi_j (drop zero-mass points)."
        )
    total = float(w.sum())
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"support_weights sum to {total!r}; pass a probability vector (divide by its sum).")
    return torch.log(w)


def check_matrix(name: str, value: Tensor, *, allow_minus_inf: bool = False) -> Tensor:
    """A 2-D floating tensor as float64, without NaN or +inf (and without -inf unless allowed)."""
    matrix = check(name, value, Floats(ndim=2, finite=True, allow_minus_inf=allow_minus_inf))
    return matrix.detach().to(torch.float64)


def check_vector(name: str, value: Tensor, size: int) -> Tensor:
    """A finite 1-D floating tensor of the given length, as float64."""
    vector = check(name, value, Floats(ndim=1, finite=True))
    if vector.shape[0] != size:
        raise ArgumentError(f"{name} has shape {tuple(vector.shape)}; pass a vector of shape ({size},).")
    return vector.detach().to(torch.float64)


def check_draws(positive_scores: Tensor, negative_scores: Tensor) -> tuple[Tensor, Tensor]:
    """(R,) positive and (R, k) negative scores as float64, with matching R and k >= 1."""
    neg = check_matrix("negative_scores", negative_scores)
    if neg.shape[1] == 0:
        raise ValueError("negative_scores has k = 0 columns; the risk needs at least one negative.")
    pos = check_vector("positive_scores", positive_scores, neg.shape[0])
    return pos, neg


def check_matrix_pair(
    first: tuple[str, Tensor], second: tuple[str, Tensor], hint: str, *, allow_minus_inf: bool = False
) -> tuple[Tensor, Tensor]:
    """Two (name, value) matrices of the same shape, as float64 (``allow_minus_inf`` for the second only).

    Raises:
        ValueError: on NaN or +inf in either, -inf in the first (or in the second unless allowed), or differing
            shapes (the message ends with ``hint``).
    """
    (name_x, value_x), (name_y, value_y) = first, second
    x = check_matrix(name_x, value_x)
    y = check_matrix(name_y, value_y, allow_minus_inf=allow_minus_inf)
    if x.shape != y.shape:
        raise ValueError(f"{name_x} {tuple(x.shape)} and {name_y} {tuple(y.shape)} differ; {hint}.")
    return x, y


def check_ratio_pair(log_learned_ratio: Tensor, log_kernel_ratio: Tensor) -> tuple[Tensor, Tensor]:
    """log dQ/dpi and log dM/dpi on the same (n, N) anchors x support, as float64.

    Raises:
        ValueError: on NaN or +inf in either, -inf in the learned ratio, or differing shapes.
    """
    return check_matrix_pair(
        ("log_learned_ratio", log_learned_ratio),
        ("log_kernel_ratio", log_kernel_ratio),
        "evaluate both on the same anchors and support",
        allow_minus_inf=True,
    )
