"""The tiled kernel's fast paths against its exact paths and float64: one-exp symmetric weights, the row shift
inside the GEMM (with its fallback for untrusted row sums), bf16 autocast."""

import math

import pytest
import torch
import torch.nn.functional as F

from crl.objectives import _shifted, _tiled_backward, contrastive_loss
from crl.objectives import tiled as tiled_module
from crl.objectives._blocks import LOG2_E


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
    monkeypatch.setattr(_tiled_backward, "_RANK_ONE_LIMIT", {dtype: -1.0})
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
    base2 = tiled_module.base2_queries(q.detach(), None)  # log2(e) q, the kernel's base-2 queries
    logits = (base2.bfloat16() @ p.bfloat16().T).double() * math.log(
        2.0
    )  # the CPU's bf16 GEMM rounds to bf16
    logits.fill_diagonal_(float("-inf"))
    torch.testing.assert_close(row.double(), torch.logsumexp(logits, 1), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(col.double(), torch.logsumexp(logits, 0), rtol=1e-6, atol=1e-5)
    exact = q.detach().double() @ p.double().T
    exact.fill_diagonal_(float("-inf"))
    assert float((row.detach().double() - torch.logsumexp(exact, 1)).abs().max()) > 1e-4
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
    assert abs(float(loss.detach()) - float(ref.detach())) < 2e-2
    torch.testing.assert_close(x.grad.double(), xx.grad, rtol=0.05, atol=2e-3)


def _without_shifted_path(monkeypatch):
    """Route every block through the exact paths (row maxima, subtraction passes)."""
    monkeypatch.setattr(tiled_module, "shifted_path", lambda q: False)
    monkeypatch.setattr(_tiled_backward, "shifted_path", lambda q: False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", ["symmetric", "one-sided", "weighted-positive", "weighted-signed"])
def test_shift_inside_the_gemm_equals_the_exact_path(monkeypatch, dtype, case):
    """[q, -shift] . [c, 1] = S - shift: the fast path's loss and gradients equal the exact path's, with left-out
    false negatives, in the symmetric kernel, the one-sided forecast stripes and the one-sided recomputation
    (per-anchor weights that the forecast does not predict, all positive: folded into the shift, or signed)."""
    a, p = _pair(23, 5, 5, dtype, scale=1.7)
    neg = _pair(19, 5, 6, dtype)[0]
    ids = torch.arange(23) % 17

    def run():
        x, y = a.clone().requires_grad_(True), p.clone().requires_grad_(True)
        if case == "symmetric":
            loss = contrastive_loss(
                x, y, symmetric=True, tau=0.2, tiling="tiled", block_size=6, positive_ids=ids
            )
        elif case == "one-sided":
            loss = contrastive_loss(x, y, neg, tau=0.2, tiling="tiled", block_size=6)
        else:
            low = 0.5 if case == "weighted-positive" else -1.0
            per_anchor = contrastive_loss(x, y, neg, tau=0.2, tiling="tiled", block_size=6, reduction="none")
            loss = (per_anchor * torch.linspace(low, 2.0, 23, dtype=dtype)).sum()
        loss.backward()
        return loss.detach(), x.grad, y.grad

    fast = run()
    _without_shifted_path(monkeypatch)
    exact = run()
    tol = {"rtol": 1e-12, "atol": 1e-13} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-6}
    for got, want in zip(fast, exact, strict=True):
        torch.testing.assert_close(got, want, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rows_far_below_their_bound_fall_back_to_the_exact_maxima(monkeypatch, dtype):
    """Queries of norm 50 whose best candidate is orthogonal, beside a candidate of norm 5: the bound
    |q_i| max_j |c_j| = 250 lies 250 nats above the row maxima, exp(S - 250) underflows in float32 (and sums
    below e^-60 in float64), so every block must take the exact path and still give dense's values."""
    calls = {"untrusted": 0}
    real = _shifted.trusted

    def counting(totals):
        verdict = real(totals)
        calls["untrusted"] += not verdict
        return verdict

    monkeypatch.setattr(tiled_module, "trusted", counting)
    g = torch.Generator().manual_seed(7)
    q = torch.cat([torch.full((12, 1), 50.0), 0.1 * torch.randn(12, 1, generator=g)], 1).double()
    c = torch.cat([-torch.rand(9, 1, generator=g) - 0.5, torch.randn(9, 1, generator=g)], 1).double()
    c[4] = torch.tensor([0.0, 5.0])
    x = q.to(dtype, copy=True).requires_grad_(True)
    row, col = tiled_module.tiled_logsumexp_both(x, c.to(dtype), block_size=4)
    (row.sum() + col.sum()).backward()
    xx = q.clone().requires_grad_(True)
    logits = xx @ c.T
    (torch.logsumexp(logits, 1).sum() + torch.logsumexp(logits, 0).sum()).backward()
    assert calls["untrusted"] > 0
    torch.testing.assert_close(row.double(), torch.logsumexp(logits, 1).detach(), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(col.double(), torch.logsumexp(logits, 0).detach(), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(x.grad.double(), xx.grad, rtol=1e-5, atol=1e-6)


def _gradient_error(tiling, dtype, tau, seed):
    """Normwise relative error of the symmetric loss's input gradients against the float64 dense ones."""
    a, p = _pair(256, 16, seed, torch.float64)
    grads = []
    for kind, precision in (("dense", torch.float64), (tiling, dtype)):
        x, y = a.to(precision).requires_grad_(True), p.to(precision).requires_grad_(True)
        loss = contrastive_loss(x, y, tau=tau, symmetric=True, tiling=kind, block_size=32)
        grads.append(torch.cat([g.double().flatten() for g in torch.autograd.grad(loss, [x, y])]))
    return float((grads[1] - grads[0]).norm() / grads[0].norm())


def test_base2_exponent_keeps_float32_gradients_as_accurate_as_dense_at_small_tau():
    """tau = 0.01 (logits up to 100): the tiled float32 gradients stay within 2.5x of the dense float32 error.

    Measured: 1.7x (the exp2 path that multiplies the shifted logit by log2 e, and the exp path before it); folding
    log2 e into q instead (one more rounding of every q_i) gave 3.9x and fails here."""
    for seed in range(4):
        tiled = _gradient_error("tiled", torch.float32, 0.01, seed)
        dense = _gradient_error("dense", torch.float32, 0.01, seed)
        assert tiled <= 2.5 * dense, (seed, tiled, dense)


@pytest.mark.parametrize("kind", ["float", "scalar tensor", "per query"])
def test_base2_queries_round_log2e_a_over_tau_once(kind):
    """The kernel's queries log2(e) a_i / tau_i equal the float64 value rounded once to float32."""
    a = _pair(300, 7, 8)[0] * 3.0
    taus = torch.linspace(0.01, 2.0, 300, dtype=torch.float64)
    tau = {"float": 0.013, "scalar tensor": torch.tensor(0.013), "per query": taus.float()}[kind]
    wide = torch.as_tensor(tau, dtype=torch.float64)
    want = (a.double() * (LOG2_E / (wide[:, None] if wide.ndim else wide))).float()
    assert torch.equal(tiled_module.base2_queries(a, tau), want)


@pytest.mark.parametrize("per_query", [False, True])
def test_tau_argument_matches_dense_and_passes_gradcheck(per_query):
    """tiled_logsumexp_both(a, c, tau=...) is logsumexp(a c^T / tau) in both directions, differentiable in a, c and
    tau (a learned temperature, or per-query temperatures)."""
    a, c = _pair(9, 3, 9, torch.float64)
    tau = (torch.linspace(0.2, 0.9, 9) if per_query else torch.tensor(0.3)).double().requires_grad_(True)
    a, c = a.requires_grad_(True), c.requires_grad_(True)

    def tiled(a, c, tau):
        row, col = tiled_module.tiled_logsumexp_both(a, c, tau=tau, exclude_offset=0, block_size=4)
        return row, col

    def dense(a, c, tau):
        return tiled_module.dense_logsumexp_both(a, c, tau=tau, exclude_offset=0)

    for got, want in zip(tiled(a, c, tau), dense(a, c, tau), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(tiled, (a, c, tau))


@pytest.mark.parametrize("factor", [0.7, 1.0 / 3.0, 1e-5 * math.log(2.0)])
def test_proportional_gradient_is_recognised_whatever_the_factor_and_threads(factor):
    """The forecast's proportionality test on 2^20 rows near 1 with one thread, where float32 dot products err by
    more than its 1e-6 tolerance: it must still accept factor * forecast (else every one-sided step of the base-2
    kernel, whose gradients carry ln 2, recomputes: 2.4x instead of 1.35x), and still reject a perturbed one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        forecast = 1.0 - 1e-2 * torch.rand(1 << 20, generator=torch.Generator().manual_seed(0))
        u = tiled_module._proportion(forecast * factor, forecast)
        assert u is not None and abs(float(u) / factor - 1.0) < 1e-6
        perturbed = forecast * factor
        perturbed[5] *= 1.001
        assert tiled_module._proportion(perturbed, forecast) is None
    finally:
        torch.set_num_threads(threads)
