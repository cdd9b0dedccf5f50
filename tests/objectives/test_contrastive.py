"""InfoNCE / DCL / GCL against float64 loops, autograd's gradcheck, and the identities the forms must satisfy."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from crl.objectives import (
    ContrastiveLoss,
    Temperature,
    contrastive_loss,
    contrastive_loss_from_scores,
)
from tests.objectives.reference import reference_loss, unit

FORMS = ["infonce", "dcl", "gcl"]


def _case(regime: str, symmetric: bool, explicit: bool, n: int = 5, m: int = 3, d: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a, p = unit(n, d, g), unit(n, d, g)
    if not explicit:
        return a, p, None
    if regime == "independent":
        return a, p, unit(n * m, d, g).view(n, m, d)
    if symmetric:
        return a, p, (unit(m, d, g), unit(m + 2, d, g))
    return a, p, unit(m, d, g)


CASES = [
    ("shared", False, False),
    ("shared", False, True),
    ("shared", True, False),
    ("shared", True, True),
    ("independent", False, True),
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("regime", "symmetric", "explicit"), CASES)
@pytest.mark.parametrize("tiling", ["dense", "tiled"])
@pytest.mark.parametrize("tau", [0.05, 0.5, 2.0])
def test_matches_float64_loops(form, regime, symmetric, explicit, tiling, tau):
    """Every form x regime x symmetric equals the explicit loop of docs/theory.md sec. 2 (else a formula is wrong)."""
    a, p, neg = _case(regime, symmetric, explicit)
    got = contrastive_loss(
        a,
        p,
        neg,
        tau=tau,
        form=form,
        regime=regime,
        symmetric=symmetric,
        tiling=tiling,
        block_size=2,
        reduction="none",
    )
    want = torch.tensor(
        reference_loss(a, p, neg, tau=tau, form=form, regime=regime, symmetric=symmetric), dtype=torch.float64
    )
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        contrastive_loss(a, p, neg, tau=tau, form=form, regime=regime, symmetric=symmetric, tiling=tiling),
        want.mean(),
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize("form", FORMS)
def test_from_scores_matches_loops(form):
    """The score-level entry point computes the same forms as the embedding-level one."""
    a, p, neg = _case("independent", False, True, seed=3)
    pos = (a * p).sum(1)
    negs = torch.einsum("nd,nmd->nm", a, neg)
    got = contrastive_loss_from_scores(pos, negs, tau=0.3, form=form, reduction="none")
    want = torch.tensor(
        reference_loss(a, p, neg, tau=0.3, form=form, regime="independent", symmetric=False),
        dtype=torch.float64,
    )
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_in_batch_infonce_is_clip_cross_entropy():
    """In-batch InfoNCE is CLIP's cross_entropy(a p^T / tau, arange(n)); symmetric adds the transposed direction."""
    g = torch.Generator().manual_seed(1)
    a, p = unit(16, 8, g), unit(16, 8, g)
    logits = a @ p.T / 0.07
    labels = torch.arange(16)
    one_sided = F.cross_entropy(logits, labels)
    both = 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))
    for tiling in ("dense", "tiled"):
        torch.testing.assert_close(contrastive_loss(a, p, tau=0.07, tiling=tiling, block_size=5), one_sided)
        torch.testing.assert_close(
            contrastive_loss(a, p, tau=0.07, symmetric=True, tiling=tiling, block_size=5), both
        )


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("tiling", ["dense", "tiled"])
def test_gradcheck(form, tiling):
    """Analytic gradients (including the tiled backward and tau) agree with finite differences in float64."""
    g = torch.Generator().manual_seed(2)
    a, p, neg = unit(4, 3, g), unit(4, 3, g), unit(5, 3, g)
    tau = torch.tensor(0.4, dtype=torch.float64)
    for x in (a, p, neg, tau):
        x.requires_grad_(True)

    def one_sided(a, p, neg, tau):
        return contrastive_loss(a, p, neg, tau=tau, form=form, tiling=tiling, block_size=2)

    def symmetric(a, p, tau):
        return contrastive_loss(a, p, tau=tau, form=form, symmetric=True, tiling=tiling, block_size=3)

    assert torch.autograd.gradcheck(one_sided, (a, p, neg, tau))
    assert torch.autograd.gradcheck(symmetric, (a, p, tau))


def test_gradcheck_independent():
    """The chunked (checkpointed) independent regime differentiates exactly."""
    g = torch.Generator().manual_seed(4)
    a, p, neg = unit(5, 3, g), unit(5, 3, g), unit(10, 3, g).view(5, 2, 3)
    for x in (a, p, neg):
        x.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda a, p, neg: contrastive_loss(
            a, p, neg, tau=0.3, form="infonce", regime="independent", block_size=2
        ),
        (a, p, neg),
    )


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 7),
    m=st.integers(1, 6),
    d=st.integers(1, 5),
    seed=st.integers(0, 10_000),
    tau=st.floats(0.05, 5.0),
    form=st.sampled_from(FORMS),
)
def test_permuting_negatives_changes_nothing(n, m, d, seed, tau, form):
    """The loss is a symmetric function of the negatives (each anchor's set, and the shared set)."""
    g = torch.Generator().manual_seed(seed)
    a, p = (
        torch.randn(n, d, generator=g, dtype=torch.float64),
        torch.randn(n, d, generator=g, dtype=torch.float64),
    )
    shared = torch.randn(m, d, generator=g, dtype=torch.float64)
    indep = torch.randn(n, m, d, generator=g, dtype=torch.float64)
    perm = torch.randperm(m, generator=g)
    torch.testing.assert_close(
        contrastive_loss(a, p, shared, tau=tau, form=form),
        contrastive_loss(a, p, shared[perm], tau=tau, form=form),
    )
    torch.testing.assert_close(
        contrastive_loss(a, p, indep, tau=tau, form=form, regime="independent"),
        contrastive_loss(a, p, indep[:, perm], tau=tau, form=form, regime="independent"),
    )


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 6),
    m=st.integers(1, 6),
    seed=st.integers(0, 10_000),
    shift=st.floats(-50.0, 50.0),
    form=st.sampled_from(FORMS),
)
def test_constant_shift_of_one_anchor_changes_nothing(n, m, seed, shift, form):
    """Adding a constant to all scores of one anchor (positive and negatives) leaves every form unchanged."""
    g = torch.Generator().manual_seed(seed)
    pos = torch.randn(n, generator=g, dtype=torch.float64)
    neg = torch.randn(n, m, generator=g, dtype=torch.float64)
    row = seed % n
    pos2, neg2 = pos.clone(), neg.clone()
    pos2[row] += shift
    neg2[row] += shift
    torch.testing.assert_close(
        contrastive_loss_from_scores(pos, neg, tau=0.7, form=form, reduction="none"),
        contrastive_loss_from_scores(pos2, neg2, tau=0.7, form=form, reduction="none"),
    )


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 7), d=st.integers(1, 5), seed=st.integers(0, 10_000), form=st.sampled_from(FORMS))
def test_symmetric_is_mean_of_two_directions(n, d, seed, form):
    """symmetric=True equals the mean of loss(x->y) and loss(y->x), in-batch and with explicit negatives."""
    g = torch.Generator().manual_seed(seed)
    a, p = (
        torch.randn(n, d, generator=g, dtype=torch.float64),
        torch.randn(n, d, generator=g, dtype=torch.float64),
    )
    neg_y, neg_x = (
        torch.randn(3, d, generator=g, dtype=torch.float64),
        torch.randn(4, d, generator=g, dtype=torch.float64),
    )
    torch.testing.assert_close(
        contrastive_loss(a, p, tau=0.5, form=form, symmetric=True),
        0.5 * (contrastive_loss(a, p, tau=0.5, form=form) + contrastive_loss(p, a, tau=0.5, form=form)),
    )
    torch.testing.assert_close(
        contrastive_loss(a, p, (neg_y, neg_x), tau=0.5, form=form, symmetric=True),
        0.5
        * (
            contrastive_loss(a, p, neg_y, tau=0.5, form=form)
            + contrastive_loss(p, a, neg_x, tau=0.5, form=form)
        ),
    )


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(2, 40),
    m=st.integers(1, 40),
    block=st.integers(1, 17),
    seed=st.integers(0, 10_000),
    form=st.sampled_from(FORMS),
    symmetric=st.booleans(),
)
def test_tiled_equals_dense_float32(n, m, block, seed, form, symmetric):
    """Tiled value and gradients in float32 (any block size) equal the dense computation in float64 to 1e-5 of
    their scale: the float32 tiled kernel is compared with the exact value, since it rounds differently from the
    float32 dense one (base-2 logits, shifts inside the GEMM). A gradient entry sums terms of order 1/(n tau)
    (unit vectors) that can cancel far below that (n = 2, seed 23: 1.5e-3 from terms near 5), so its float32
    error is allowed a few float32 epsilons of the terms' scale as well."""
    g = torch.Generator().manual_seed(seed)
    a, p = unit(n, 8, g, torch.float32), unit(n, 8, g, torch.float32)
    neg = None if symmetric else unit(m, 8, g, torch.float32)
    results = []
    for tiling, dtype in (("dense", torch.float64), ("tiled", torch.float32)):
        leaves = [x.to(dtype).requires_grad_(True) for x in (a, p)]
        extra = None if neg is None else neg.to(dtype).requires_grad_(True)
        loss = contrastive_loss(
            *leaves, extra, tau=0.1, form=form, symmetric=symmetric, tiling=tiling, block_size=block
        )
        grads = torch.autograd.grad(loss, [*leaves] + ([] if extra is None else [extra]))
        results.append((loss, grads))
    (l1, g1), (l2, g2) = results
    assert l2.dtype == torch.float32
    torch.testing.assert_close(l2.double(), l1, rtol=1e-5, atol=1e-6)
    for x, y in zip(g1, g2, strict=True):
        terms = 8.0 * torch.finfo(torch.float32).eps / (n * 0.1)
        torch.testing.assert_close(y.double(), x, rtol=1e-5, atol=max(1e-5 * float(x.abs().max()), terms))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("tiling", ["dense", "tiled"])
@pytest.mark.parametrize(("regime", "symmetric", "explicit"), CASES)
def test_stable_at_tiny_tau(form, tiling, regime, symmetric, explicit):
    """tau = 1e-3 with unit vectors (logits up to 1000) gives a finite loss and finite gradients."""
    a, p, neg = _case(regime, symmetric, explicit, n=6, m=5, d=3, seed=7)
    a32 = a.float().requires_grad_(True)
    p32 = p.float().requires_grad_(True)
    neg32 = None if neg is None else tuple(x.float() for x in neg) if isinstance(neg, tuple) else neg.float()
    loss = contrastive_loss(
        a32, p32, neg32, tau=1e-3, form=form, regime=regime, symmetric=symmetric, tiling=tiling, block_size=4
    )
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(a32.grad).all() and torch.isfinite(p32.grad).all()
    want = sum(reference_loss(a, p, neg, tau=1e-3, form=form, regime=regime, symmetric=symmetric)) / 6
    assert float(loss.detach()) == pytest.approx(want, rel=1e-3, abs=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_accumulates_in_float32(dtype):
    """fp16/bf16 inputs give a float32 loss equal to the float32 computation on the same (rounded) inputs."""
    g = torch.Generator().manual_seed(5)
    a, p = unit(64, 16, g, torch.float32).to(dtype), unit(64, 16, g, torch.float32).to(dtype)
    for tiling in ("dense", "tiled"):
        got = contrastive_loss(a, p, tau=0.05, symmetric=True, tiling=tiling, block_size=16)
        want = contrastive_loss(a.float(), p.float(), tau=0.05, symmetric=True, tiling="dense")
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_learnable_temperature_gets_gradient_and_is_clamped():
    """A Temperature module is usable by every form; its gradient flows; 1/tau never exceeds max_inverse."""
    g = torch.Generator().manual_seed(6)
    a, p = unit(8, 4, g, torch.float32), unit(8, 4, g, torch.float32)
    for form in FORMS:
        temp = Temperature(0.07)
        for tiling in ("dense", "tiled"):
            temp.zero_grad()
            contrastive_loss(a, p, tau=temp, form=form, tiling=tiling, block_size=3).backward()
            assert temp.log_inverse.grad is not None and torch.isfinite(temp.log_inverse.grad)
    clamped = Temperature(0.07, max_inverse=100.0)
    with torch.no_grad():
        clamped.log_inverse.fill_(10.0)
    assert float(clamped().detach()) == pytest.approx(0.01)
    fixed = Temperature(0.5, learnable=False)
    assert not any(True for _ in fixed.parameters())


@pytest.mark.filterwarnings("error")
def test_printing_a_learnable_temperature_shows_its_value_without_a_warning():
    """print(Temperature(0.07)) warned "Converting a tensor with requires_grad=True to a scalar"; it must not."""
    assert str(Temperature(0.07)) == "Temperature(tau=0.07, learnable=True)"
    assert repr(Temperature(0.5, learnable=False)) == "Temperature(tau=0.5, learnable=False)"


def test_module_wrapper_matches_function():
    g = torch.Generator().manual_seed(8)
    a, p = unit(10, 4, g), unit(10, 4, g)
    module = ContrastiveLoss(tau=0.2, form="dcl", symmetric=True)
    torch.testing.assert_close(module(a, p), contrastive_loss(a, p, tau=0.2, form="dcl", symmetric=True))


def test_gcl_of_equal_scores_is_zero_and_dcl_is_log_m():
    """Closed form: when all Delta_ij = 0, gcl = 0, dcl = log m and infonce = log(1 + m)."""
    pos, neg = torch.zeros(3), torch.zeros(3, 7)
    assert float(contrastive_loss_from_scores(pos, neg, tau=0.3, form="gcl")) == pytest.approx(0.0, abs=1e-7)
    assert float(contrastive_loss_from_scores(pos, neg, tau=0.3, form="dcl")) == pytest.approx(math.log(7))
    assert float(contrastive_loss_from_scores(pos, neg, tau=0.3, form="infonce")) == pytest.approx(
        math.log(8)
    )


@pytest.mark.parametrize("exclude_offset", [None, 0, 3])
def test_forecast_gradients_and_fallback_are_exact(exclude_offset):
    """The forward-pass gradients (forecast) are used only when the loss sends a proportional gradient; any other
    upstream gradient falls back to the exact recomputation. Both must match the dense reference."""
    from crl.objectives.tiled import dense_logsumexp, tiled_logsumexp

    g = torch.Generator().manual_seed(9)
    q, c = 5 * unit(9, 4, g), unit(12, 4, g)
    weights = torch.rand(9, generator=g, dtype=torch.float64) - 0.3

    def ones(lse, r0, r1):
        return torch.ones_like(lse)

    for upstream in (lambda lse: 3.0 * lse.sum(), lambda lse: (weights * lse).sum()):
        grads = []
        for method in ("tiled", "dense"):
            qq, cc = q.clone().requires_grad_(True), c.clone().requires_grad_(True)
            if method == "tiled":
                lse = tiled_logsumexp(qq, cc, exclude_offset=exclude_offset, block_size=5, forecast=ones)
            else:
                lse = dense_logsumexp(qq, cc, exclude_offset=exclude_offset)
            grads.append(torch.autograd.grad(upstream(lse), (qq, cc)))
        for got, want in zip(*grads, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_gradcheck_through_forecast_stripes():
    """gradcheck on a case whose blocks admit full-row stripes (the 3-GEMM forecast path), shared and in-batch."""
    g = torch.Generator().manual_seed(10)
    a, p, neg = (x.requires_grad_(True) for x in (unit(7, 3, g), unit(7, 3, g), unit(4, 3, g)))
    assert torch.autograd.gradcheck(
        lambda a, p, n: contrastive_loss(a, p, n, tau=0.3, tiling="tiled", block_size=3), (a, p, neg)
    )
    assert torch.autograd.gradcheck(
        lambda a, p: contrastive_loss(a, p, tau=0.3, tiling="tiled", block_size=3), (a, p)
    )


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("tiling", ["dense", "tiled"])
def test_positive_offset_reproduces_a_gathered_batch(form, symmetric, tiling):
    """Rank r of K sees the gathered batch (all positives, all anchors) with its positives at row r*n: its per-anchor
    losses are rows r*n..(r+1)*n-1 of the in-batch loss of the whole batch (what distributed training relies on)."""
    g = torch.Generator().manual_seed(11)
    n, ranks = 4, 3
    a_all, p_all = unit(n * ranks, 5, g), unit(n * ranks, 5, g)
    whole = contrastive_loss(a_all, p_all, tau=0.2, form=form, symmetric=symmetric, reduction="none")
    for r in range(ranks):
        rows = slice(r * n, (r + 1) * n)
        negatives = (p_all, a_all) if symmetric else p_all
        got = contrastive_loss(
            a_all[rows],
            p_all[rows],
            negatives,
            tau=0.2,
            form=form,
            symmetric=symmetric,
            positive_offset=r * n,
            tiling=tiling,
            block_size=3,
            reduction="none",
        )
        torch.testing.assert_close(got, whole[rows])


def test_positive_offset_errors():
    g = torch.Generator().manual_seed(12)
    a, p = unit(4, 3, g), unit(4, 3, g)
    with pytest.raises(ValueError, match=r"positive_offset=2 must satisfy"):
        contrastive_loss(a, p, unit(5, 3, g), tau=0.1, positive_offset=2)
    with pytest.raises(ValueError, match=r"positive_offset needs explicit negatives"):
        contrastive_loss(a, p, tau=0.1, positive_offset=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_column_sums_far_below_the_block_maximum_are_exact(dtype):
    """The symmetric forward gets column sums from one exp pass; columns whose entries all lie ~100 below the block's
    largest logit would underflow there and must be recomputed exactly (else the y->x loss would be -inf/NaN)."""
    from crl.objectives.tiled import dense_logsumexp_both, tiled_logsumexp_both

    q = torch.tensor([[10.0, 0.0], [0.0, -5.0], [1.0, 1.0]], dtype=dtype)
    c = torch.tensor([[10.0, 0.0], [0.0, 10.0], [-3.0, 2.0]], dtype=dtype)
    for offset in (None, 0):
        want_row, want_col = dense_logsumexp_both(q, c, exclude_offset=offset)
        got_row, got_col = tiled_logsumexp_both(q, c, exclude_offset=offset, block_size=3)
        torch.testing.assert_close(got_row, want_row)
        torch.testing.assert_close(got_col, want_col)
