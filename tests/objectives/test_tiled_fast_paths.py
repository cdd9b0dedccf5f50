"""The tiled kernel's fast paths against its exact paths and float64: one-exp symmetric weights, bf16 autocast."""

import pytest
import torch
import torch.nn.functional as F

from crl.objectives import contrastive_loss
from crl.objectives import tiled as tiled_module


def _pair(n, d, seed, dtype=torch.float32, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    a = F.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1) * scale
    p = F.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1)
    return a.to(dtype), p.to(dtype)


def _loss_and_grads(a, p, **kwargs):
    x, y = a.clone().requires_grad_(True), p.clone().requires_grad_(True)
    loss = contrastive_loss(x, y, symmetric=True, **kwargs)
    loss.backward()
    return loss.detach(), x.grad, y.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("form", ["infonce", "gcl"])
def test_one_exp_symmetric_weights_equal_the_two_exp_path(monkeypatch, dtype, form):
    a, p = _pair(23, 5, 0, dtype)
    ids = torch.arange(23) % 17
    fast = _loss_and_grads(a, p, tau=0.2, form=form, tiling="tiled", block_size=6, positive_ids=ids)
    monkeypatch.setattr(tiled_module, "_RANK_ONE_LIMIT", {dtype: -1.0})
    exact = _loss_and_grads(a, p, tau=0.2, form=form, tiling="tiled", block_size=6, positive_ids=ids)
    reference = _loss_and_grads(*_pair(23, 5, 0), tau=0.2, form=form, tiling="dense", positive_ids=ids)
    tol = {"rtol": 1e-12, "atol": 1e-14} if dtype == torch.float64 else {"rtol": 2e-5, "atol": 1e-7}
    for got, want in zip(fast, exact, strict=True):
        torch.testing.assert_close(got, want, **tol)
    for got, want in zip(fast, reference, strict=True):
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-4, atol=1e-6)


def test_blocks_far_apart_take_the_exact_path_and_stay_exact():
    """tau = 0.01 and anchors of norms 0.2..3: rs_i - cs_j spans far more than 30 (float32 factors would fail)."""
    a, p = _pair(20, 4, 1, torch.float64)
    a = a * torch.linspace(0.2, 3.0, 20, dtype=torch.float64)[:, None]
    got = _loss_and_grads(a.float(), p.float(), tau=0.01, tiling="tiled", block_size=5)
    want = _loss_and_grads(a, p, tau=0.01, tiling="dense")
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.double(), w, rtol=1e-4, atol=1e-5)


def test_bf16_autocast_runs_the_gemms_in_bf16_with_float32_accumulation():
    a, p = _pair(40, 16, 2)
    q = (a / 0.1).requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        row, col = tiled_module.tiled_logsumexp_both(q, p, exclude_offset=0, block_size=16)
    (row.sum() + col.sum()).backward()
    assert row.dtype == torch.float32 and q.grad is not None and q.grad.dtype == torch.float32
    logits = (
        q.detach().bfloat16() @ p.bfloat16().T
    ).double()  # the CPU's bf16 GEMM rounds its output to bf16
    logits.fill_diagonal_(float("-inf"))
    torch.testing.assert_close(row.double(), torch.logsumexp(logits, 1), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(col.double(), torch.logsumexp(logits, 0), rtol=1e-6, atol=1e-5)
    exact = q.detach().double() @ p.double().T
    exact.fill_diagonal_(float("-inf"))
    assert float((row.double() - torch.logsumexp(exact, 1)).abs().max()) > 1e-4
    with torch.enable_grad():
        qq = q.detach().double().requires_grad_(True)
        full = qq @ p.double().T
        full = full.masked_fill(torch.eye(40, dtype=torch.bool), float("-inf"))
        (torch.logsumexp(full, 1).sum() + torch.logsumexp(full, 0).sum()).backward()
    torch.testing.assert_close(q.grad.double(), qq.grad, rtol=0.05, atol=0.05)


def test_one_sided_forecast_under_autocast_matches_float64():
    a, p = _pair(30, 8, 3)
    neg = _pair(25, 8, 4)[0]
    x = a.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = contrastive_loss(x, p, neg, tau=0.2, tiling="tiled", block_size=8)
    loss.backward()
    xx = a.double().requires_grad_(True)
    ref = contrastive_loss(xx, p.double(), neg.double(), tau=0.2, tiling="dense")
    ref.backward()
    assert abs(float(loss) - float(ref)) < 2e-2
    torch.testing.assert_close(x.grad.double(), xx.grad, rtol=0.05, atol=2e-3)
