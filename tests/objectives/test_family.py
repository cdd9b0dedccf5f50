"""OCE, pairwise surrogates and the sigmoid loss against loops, scipy and closed forms; bad input errors."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from crl.objectives import (
    CVaR,
    Entropic,
    contrastive_loss,
    contrastive_loss_from_scores,
    oce_loss,
    oce_loss_from_scores,
    pairwise_loss,
    sigmoid_loss,
)
from tests.objectives.reference import negatives_per_anchor, reference_cvar, reference_pairwise, unit


def _scores(n: int, m: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g, dtype=torch.float64), torch.randn(
        n, m, generator=g, dtype=torch.float64
    )


@pytest.mark.parametrize("tau", [0.05, 0.3, 2.0])
def test_entropic_oce_equals_gcl_and_scipy_minimum(tau):
    """[A] Lemma 4.2: the entropic OCE equals GCL, and equals a numerical minimisation of the OCE objective over mu."""
    pos, neg = _scores(6, 9, seed=1)
    oce = oce_loss_from_scores(pos, neg, tau=tau, disutility="entropic", reduction="none")
    gcl = contrastive_loss_from_scores(pos, neg, tau=tau, form="gcl", reduction="none")
    torch.testing.assert_close(oce, gcl, rtol=1e-10, atol=1e-10)
    for i in range(6):
        delta = (neg[i] - pos[i]).tolist()

        def objective(mu: float, delta=delta) -> float:
            return mu + tau * sum(math.expm1((d - mu) / tau) for d in delta) / len(delta)

        best = minimize_scalar(
            objective, bounds=(min(delta) - 1, max(delta) + 1), method="bounded", options={"xatol": 1e-10}
        )
        assert float(oce[i]) == pytest.approx(best.fun, abs=1e-7)


def test_entropic_gradient_equals_gcl_gradient():
    pos, neg = _scores(4, 5, seed=2)
    grads = []
    for fn in (
        lambda p, n: oce_loss_from_scores(p, n, tau=0.4, disutility=Entropic()),
        lambda p, n: contrastive_loss_from_scores(p, n, tau=0.4, form="gcl"),
    ):
        p, n = pos.clone().requires_grad_(True), neg.clone().requires_grad_(True)
        grads.append(torch.autograd.grad(fn(p, n), (p, n)))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 12), alpha=st.floats(0.01, 1.0), seed=st.integers(0, 10_000))
def test_cvar_exact_minimum(m, alpha, seed):
    """CVaR's OCE value equals the brute-force minimum over mu of mu + mean_j [Delta_j - mu]_+ / alpha."""
    pos, neg = _scores(3, m, seed)
    got = oce_loss_from_scores(pos, neg, tau=0.5, disutility=CVaR(alpha), reduction="none")
    want = [reference_cvar((neg[i] - pos[i]).tolist(), alpha) for i in range(3)]
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=1e-10, atol=1e-10)


def test_cvar_limits_and_gradient():
    """alpha = 1 is the mean of Delta, alpha <= 1/m its max; the gradient is the exact CVaR weights (sum to 1)."""
    pos, neg = _scores(5, 8, seed=3)
    delta = neg - pos[:, None]
    torch.testing.assert_close(
        oce_loss_from_scores(pos, neg, tau=1.0, disutility=CVaR(1.0), reduction="none"), delta.mean(1)
    )
    torch.testing.assert_close(
        oce_loss_from_scores(pos, neg, tau=1.0, disutility=CVaR(0.1), reduction="none"), delta.max(1).values
    )
    n = neg.clone().requires_grad_(True)
    oce_loss_from_scores(pos, n, tau=1.0, disutility=CVaR(0.3), reduction="none").sum().backward()
    torch.testing.assert_close(n.grad.sum(1), torch.ones(5, dtype=torch.float64))
    assert bool((n.grad <= 1 / (0.3 * 8) + 1e-12).all()) and bool((n.grad >= 0).all())
    p2, n2 = pos.clone().requires_grad_(True), neg.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda p, q: oce_loss_from_scores(p, q, tau=1.0, disutility=CVaR(0.3)), (p2, n2)
    )


@pytest.mark.parametrize("psi", ["hinge", "squared_hinge", "logistic", "exponential"])
@pytest.mark.parametrize(("regime", "explicit"), [("shared", False), ("shared", True), ("independent", True)])
def test_pairwise_matches_loops(psi, regime, explicit):
    """mean_i mean_j psi(Delta_ij / tau) equals the loop over every (anchor, negative) pair, chunked or not."""
    g = torch.Generator().manual_seed(4)
    n, m, d = 6, 4, 3
    a, p = unit(n, d, g), unit(n, d, g)
    neg = (
        None
        if not explicit
        else unit(n * m, d, g).view(n, m, d)
        if regime == "independent"
        else unit(m, d, g)
    )
    negs = negatives_per_anchor(p.tolist(), neg, regime)
    deltas = [
        [
            sum(x * y for x, y in zip(ai, yj, strict=True)) - sum(x * y for x, y in zip(ai, pi, strict=True))
            for yj in nj
        ]
        for ai, pi, nj in zip(a.tolist(), p.tolist(), negs, strict=True)
    ]
    want = torch.tensor(reference_pairwise(deltas, 0.5, psi, 0.2), dtype=torch.float64)
    for chunk in (None, 1, 4):
        got = pairwise_loss(
            a, p, neg, tau=0.5, psi=psi, margin=0.2, regime=regime, chunk=chunk, reduction="none"
        )
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_sigmoid_in_batch_equals_siglip_all_pairs():
    """In-batch sigmoid loss is SigLIP's -sum_ij log sigma(z_ij (s_ij/tau + b)) / n with z = +1 on the diagonal."""
    g = torch.Generator().manual_seed(5)
    a, p = unit(7, 4, g), unit(7, 4, g)
    logits = a @ p.T / 0.1 + (-3.0)
    labels = 2 * torch.eye(7, dtype=torch.float64) - 1
    want = -torch.nn.functional.logsigmoid(labels * logits).sum() / 7
    for chunk in (None, 2):
        torch.testing.assert_close(sigmoid_loss(a, p, tau=0.1, bias=-3.0, chunk=chunk), want)
    bias = torch.tensor(-3.0, dtype=torch.float64, requires_grad=True)
    sigmoid_loss(a, p, tau=0.1, bias=bias).backward()
    assert bias.grad is not None and torch.isfinite(bias.grad)


def test_oce_of_embeddings_matches_scores():
    g = torch.Generator().manual_seed(6)
    a, p, neg = unit(5, 3, g), unit(5, 3, g), unit(4, 3, g)
    got = oce_loss(a, p, neg, tau=0.2, disutility=CVaR(0.5), chunk=2)
    want = oce_loss_from_scores((a * p).sum(1), a @ neg.T, tau=0.2, disutility=CVaR(0.5))
    torch.testing.assert_close(got, want)


def test_chunked_family_gradcheck():
    """Checkpointed chunks differentiate exactly (pairwise and sigmoid, shared and in-batch)."""
    g = torch.Generator().manual_seed(7)
    a, p, neg = (x.requires_grad_(True) for x in (unit(5, 3, g), unit(5, 3, g), unit(4, 3, g)))
    assert torch.autograd.gradcheck(lambda a, p, n: pairwise_loss(a, p, n, tau=0.5, chunk=2), (a, p, neg))
    assert torch.autograd.gradcheck(lambda a, p: sigmoid_loss(a, p, tau=0.5, bias=-1.0, chunk=2), (a, p))


# --- bad input: a ValueError naming the argument, its value and the fix -------------------------------------


def _ok():
    g = torch.Generator().manual_seed(8)
    return unit(4, 3, g, torch.float32), unit(4, 3, g, torch.float32)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tau": 0.0}, r"tau=0\.0 must be a finite number > 0"),
        ({"tau": -1.0}, r"tau=-1\.0"),
        ({"tau": float("nan")}, r"tau=nan"),
        ({"tau": float("inf")}, r"tau=inf"),
        ({"tau": 0.1, "form": "nce"}, r"form='nce' is not known; use one of 'infonce', 'dcl', 'gcl'"),
        ({"tau": 0.1, "regime": "batch"}, r"regime='batch' is not known"),
        ({"tau": 0.1, "tiling": "blocks"}, r"tiling='blocks' is not known"),
        ({"tau": 0.1, "block_size": 0}, r"block_size=0"),
    ],
)
def test_bad_options_raise_value_error(kwargs, match):
    a, p = _ok()
    with pytest.raises(ValueError, match=match):
        contrastive_loss(a, p, **kwargs)


def test_bad_tensors_raise_value_error():
    a, p = _ok()
    with pytest.raises(ValueError, match=r"anchors \(4, 3\) and positives \(4, 2\) differ"):
        contrastive_loss(a, p[:, :2], tau=0.1)
    with pytest.raises(ValueError, match=r"different dtypes"):
        contrastive_loss(a, p.double(), tau=0.1)
    with pytest.raises(ValueError, match=r"different devices"):
        contrastive_loss(a, p, torch.zeros(3, 3, device="meta"), tau=0.1)
    bad = a.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"anchors contains 1 NaN/Inf"):
        contrastive_loss(bad, p, tau=0.1)
    with pytest.raises(ValueError, match=r"negatives has shape \(0, 3\): it holds no rows"):
        contrastive_loss(a, p, torch.zeros(0, 3), tau=0.1)
    with pytest.raises(ValueError, match=r"m = 0 per anchor"):
        contrastive_loss(a, p, torch.zeros(4, 0, 3), tau=0.1, regime="independent")
    with pytest.raises(ValueError, match=r"negatives has dimension 2 but the anchors have d = 3"):
        contrastive_loss(a, p, torch.zeros(5, 2), tau=0.1)
    with pytest.raises(ValueError, match=r"regime='independent' needs negatives of shape \(n, m, d\)"):
        contrastive_loss(a, p, tau=0.1, regime="independent")
    with pytest.raises(ValueError, match=r"needs n >= 2"):
        contrastive_loss(a[:1], p[:1], tau=0.1)
    with pytest.raises(ValueError, match=r"pass a floating tensor"):
        contrastive_loss(torch.ones(4, 3, dtype=torch.long), p, tau=0.1)
    with pytest.raises(ValueError, match=r"symmetric=True and positive_offset need regime='shared'"):
        contrastive_loss(a, p, torch.zeros(4, 2, 3), tau=0.1, regime="independent", symmetric=True)
    with pytest.raises(ValueError, match=r"needs a pair"):
        contrastive_loss(a, p, torch.zeros(5, 3), tau=0.1, symmetric=True)
    with pytest.raises(ValueError, match=r"m = 0 columns"):
        contrastive_loss_from_scores(torch.zeros(2), torch.zeros(2, 0), tau=0.1)


def test_family_bad_options():
    a, p = _ok()
    with pytest.raises(ValueError, match=r"alpha=0 must be in \(0, 1\]"):
        CVaR(0)
    with pytest.raises(ValueError, match=r"disutility='huber' is not known"):
        oce_loss(a, p, tau=0.1, disutility="huber")
    with pytest.raises(ValueError, match=r"psi='square' is not known"):
        pairwise_loss(a, p, tau=0.1, psi="square")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"bias=nan must be one finite number"):
        sigmoid_loss(a, p, tau=0.1, bias=float("nan"))


def test_negatives_of_the_other_regime_name_the_fix():
    """(n, m, d) negatives without regime='independent', or (m, d) with it, say which argument to change."""
    a, p = _ok()
    with pytest.raises(
        ValueError,
        match=r"negatives has shape \(n, m, d\) = \(4, 2, 3\): for per-anchor \(SCRL\) negatives pass "
        r"regime='independent'; for shared negatives pass an \(m, d\) tensor",
    ):
        contrastive_loss(a, p, torch.zeros(4, 2, 3), tau=0.1)
    with pytest.raises(
        ValueError,
        match=r"negatives has shape \(m, d\) = \(5, 3\), one set shared by all anchors, but regime='independent' "
        r"needs \(n, m, d\) = \(4, m, 3\): for shared \(SSCRL\) negatives pass regime='shared'; "
        r"for per-anchor \(SCRL\) negatives pass an \(n, m, d\) tensor",
    ):
        contrastive_loss(a, p, torch.zeros(5, 3), tau=0.1, regime="independent")


@pytest.mark.parametrize(
    "loss",
    [
        lambda *args, **kw: oce_loss(*args, tau=0.1, **kw),
        lambda *args, **kw: pairwise_loss(*args, tau=0.1, **kw),
        lambda *args, **kw: sigmoid_loss(*args, tau=0.1, **kw),
    ],
    ids=["oce", "pairwise", "sigmoid"],
)
def test_score_losses_check_negatives_as_contrastive_loss_does(loss):
    """The score-based losses resolve ``negatives`` with the same rules and messages as contrastive_loss."""
    a, p = _ok()
    with pytest.raises(ValueError, match=r"for per-anchor \(SCRL\) negatives pass regime='independent'"):
        loss(a, p, torch.zeros(4, 2, 3))
    with pytest.raises(ValueError, match=r"for shared \(SSCRL\) negatives pass regime='shared'"):
        loss(a, p, torch.zeros(5, 3), regime="independent")
    with pytest.raises(ValueError, match=r"regime='independent' needs negatives of shape \(n, m, d\)"):
        loss(a, p, regime="independent")
    with pytest.raises(ValueError, match=r"negatives has dimension 2 but the anchors have d = 3"):
        loss(a, p, torch.zeros(5, 2))
    with pytest.raises(ValueError, match=r"needs n >= 2"):
        loss(a[:1], p[:1])
    with pytest.raises(ValueError, match=r"chunk=0 must be an integer >= 1"):
        loss(a, p, chunk=0)


def test_negatives_structure_errors():
    """A tuple that is not a pair, a pair without symmetric=True, another type, and offsets out of range."""
    a, p = _ok()
    neg = torch.zeros(5, 3)
    with pytest.raises(ValueError, match=r"negatives is a tuple of 3; symmetric=True takes a pair"):
        contrastive_loss(a, p, (neg, neg, neg), tau=0.1, symmetric=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"is for symmetric=True only; pass one \(m, d\) tensor"):
        contrastive_loss(a, p, (neg, neg), tau=0.1)
    with pytest.raises(TypeError, match=r"negatives must be None, a tensor or a pair of tensors, got list"):
        contrastive_loss(a, p, [neg], tau=0.1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"negatives\[1\] has dimension 2 but the anchors have d = 3"):
        contrastive_loss(a, p, (neg, torch.zeros(5, 2)), tau=0.1, symmetric=True)
    with pytest.raises(ValueError, match=r"positive_offset=-1 must be an integer >= 0"):
        contrastive_loss(a, p, neg, tau=0.1, positive_offset=-1)
    with pytest.raises(ValueError, match=r"positive_offset=1 must satisfy .* M = 4 rows of negatives\[1\]"):
        contrastive_loss(a, p, (neg, torch.zeros(4, 3)), tau=0.1, symmetric=True, positive_offset=1)
