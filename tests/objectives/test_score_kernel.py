"""The workspace-reusing score kernel (sigmoid, pairwise; shared regime) against plain autograd, in float64.

Values and every gradient (anchors, positives, negatives, a learnable tau, a learnable bias) must equal those of
the per-anchor formulas differentiated by autograd on the full score matrix, for every psi, in-batch and
explicit negatives, chunks of 1..n rows, and a weighted (reduction "none") backward pass.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from crl.objectives import pairwise_loss, pairwise_psi, sigmoid_loss
from tests.objectives.reference import unit

N, M, D = 7, 5, 3


def _leaves(explicit: bool) -> tuple[Tensor, ...]:
    g = torch.Generator().manual_seed(3)
    a, p = unit(N, D, g).requires_grad_(True), unit(N, D, g).requires_grad_(True)
    neg = unit(M, D, g).requires_grad_(True) if explicit else None
    tau = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    bias = torch.tensor(-0.7, dtype=torch.float64, requires_grad=True)
    return a, p, neg, tau, bias  # type: ignore[return-value]


def _plain_scores(a: Tensor, p: Tensor, neg: Tensor | None) -> tuple[Tensor, Tensor]:
    """(pos (n,), negative scores (n, m)) on the full matrix; in-batch leaves out the diagonal."""
    pos = (a * p).sum(dim=1)
    if neg is not None:
        return pos, a @ neg.T
    full = a @ p.T
    keep = ~torch.eye(N, dtype=torch.bool)
    return pos, full[keep].view(N, N - 1)


def _check(got: Tensor, want: Tensor, leaves: tuple[Tensor | None, ...]) -> None:
    weights = torch.linspace(-1.0, 2.0, N, dtype=torch.float64)
    inputs = [leaf for leaf in leaves if leaf is not None]
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    got_grads = torch.autograd.grad((got * weights).sum(), inputs)
    want_grads = torch.autograd.grad((want * weights).sum(), inputs)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("psi", ["hinge", "squared_hinge", "logistic", "exponential"])
@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("chunk", [1, 3, None])
def test_pairwise_kernel_equals_autograd(psi: str, explicit: bool, chunk: int | None) -> None:
    """If this fails, the pairwise loss's shared-regime gradients (tau included) are not exact."""
    a, p, neg, tau, _ = _leaves(explicit)
    got = pairwise_loss(a, p, neg, tau=tau, psi=psi, margin=0.4, chunk=chunk, reduction="none")  # type: ignore[arg-type]
    pos, scores = _plain_scores(a, p, neg)
    want = pairwise_psi((scores - pos[:, None]) / tau, psi, 0.4).mean(dim=1)  # type: ignore[arg-type]
    _check(got, want, (a, p, neg, tau))


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("chunk", [1, 3, None])
def test_sigmoid_kernel_equals_autograd(explicit: bool, chunk: int | None) -> None:
    """If this fails, the sigmoid loss's shared-regime gradients (tau and bias included) are not exact."""
    a, p, neg, tau, bias = _leaves(explicit)
    got = sigmoid_loss(a, p, neg, tau=tau, bias=bias, chunk=chunk, reduction="none")
    pos, scores = _plain_scores(a, p, neg)
    want = F.softplus(-(pos / tau + bias)) + F.softplus(scores / tau + bias).sum(dim=1)
    _check(got, want, (a, p, neg, tau, bias))


def test_kernel_gradcheck() -> None:
    """Finite differences agree with the kernel's backward pass (a, p, negatives, tau, bias)."""
    a, p, neg, tau, bias = _leaves(True)
    assert torch.autograd.gradcheck(
        lambda a, p, n, t, b: sigmoid_loss(a, p, n, tau=t, bias=b, chunk=2), (a, p, neg, tau, bias)
    )
    assert torch.autograd.gradcheck(
        lambda a, p, t: pairwise_loss(a, p, tau=t, psi="logistic", chunk=2), (a, p, tau)
    )


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("scale", [1.0, -2.5])
def test_sigmoid_forward_products_serve_a_uniform_gradient_without_recomputing(
    explicit: bool, scale: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, the gradient products formed in the forward pass (for a mean or sum of the values) are not
    exact, a uniform incoming gradient still recomputes the logits, or a weighted one does not."""
    from crl.objectives import _sigmoid_kernel

    a, p, neg, tau, bias = _leaves(explicit)
    calls = []
    logits = _sigmoid_kernel._logits
    monkeypatch.setattr(_sigmoid_kernel, "_logits", lambda *args: calls.append(1) or logits(*args))
    got = sigmoid_loss(a, p, neg, tau=tau, bias=bias, chunk=3, reduction="none")
    forward_calls = len(calls)
    inputs = [leaf for leaf in (a, p, neg, tau, bias) if leaf is not None]
    got_grads = torch.autograd.grad(got.sum() * scale, inputs)
    assert forward_calls == 3 and len(calls) == forward_calls
    pos, scores = _plain_scores(a, p, neg)
    want = F.softplus(-(pos / tau + bias)) + F.softplus(scores / tau + bias).sum(dim=1)
    want_grads = torch.autograd.grad(want.sum() * scale, inputs)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)
    weighted = sigmoid_loss(a, p, neg, tau=tau, bias=bias, chunk=3, reduction="none")
    torch.autograd.grad((weighted * torch.linspace(-1.0, 2.0, N, dtype=torch.float64)).sum(), inputs)
    assert len(calls) == 3 * forward_calls  # its forward pass, then a weighted backward that recomputes
