"""The SogCLR / FastCLIP moving-average estimator: reduces to minibatch GCL at gamma = 1, its u_i converge to the
exact pool means with a fixed model, its state resumes bit for bit, bad input is refused, and gradcheck."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from crl.objectives import MovingAverageState, contrastive_loss, cosine_gamma, moving_average_loss


def _unit(rows: int, d: int, g: torch.Generator) -> torch.Tensor:
    return F.normalize(torch.randn(rows, d, generator=g, dtype=torch.float64), dim=1)


def _pool_case(n: int = 16, m: int = 64, d: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a = _unit(n, d, g)
    p = F.normalize(a + 0.3 * _unit(n, d, g), dim=1)
    return a, p, _unit(m, d, g), g


def _exact_pool_mean(a: torch.Tensor, p: torch.Tensor, pool: torch.Tensor, tau: float) -> torch.Tensor:
    """g_i = (1/m) sum_j exp(Delta_ij / tau), written out directly."""
    delta = a @ pool.T - (a * p).sum(dim=1, keepdim=True)
    return torch.exp(delta / tau).mean(dim=1)


@pytest.mark.parametrize("tau", [0.05, 0.5])
@pytest.mark.parametrize("seen", [False, True])
def test_gamma_one_is_the_minibatch_gcl_loss(tau: float, seen: bool) -> None:
    """gamma = 1 (or a first visit): value and gradient equal contrastive_loss(form="gcl", regime="shared")."""
    g = torch.Generator().manual_seed(1)
    a, p, neg = _unit(6, 5, g), _unit(6, 5, g), _unit(9, 5, g)
    state = MovingAverageState(20)
    ids = torch.tensor([3, 0, 7, 19, 11, 5])
    if seen:
        moving_average_loss(_unit(6, 5, g), _unit(6, 5, g), _unit(4, 5, g), ids, state, tau=tau, gamma=0.3)
    gamma = 1.0 if seen else 0.3
    leaves = [x.clone().requires_grad_(True) for x in (a, p, neg)]
    got = moving_average_loss(*leaves, ids, state, tau=tau, gamma=gamma)
    got.backward()
    refs = [x.clone().requires_grad_(True) for x in (a, p, neg)]
    want = contrastive_loss(*refs, tau=tau, form="gcl", regime="shared")
    want.backward()
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for x, r in zip(leaves, refs, strict=True):
        torch.testing.assert_close(x.grad, r.grad, rtol=1e-10, atol=1e-12)


def test_gradient_is_tau_grad_g_hat_over_u() -> None:
    """gamma < 1 on seen items: the gradient is (1/n) sum_i tau * grad g_hat_i / u_i with the updated u_i."""
    g = torch.Generator().manual_seed(2)
    a, p, neg = _unit(4, 3, g), _unit(4, 3, g), _unit(5, 3, g)
    state, ids, tau, gamma = MovingAverageState(4), torch.arange(4), 0.2, 0.25
    moving_average_loss(_unit(4, 3, g), _unit(4, 3, g), _unit(5, 3, g), ids, state, tau=tau, gamma=1.0)
    u_old = state.u.clone()
    x = a.clone().requires_grad_(True)
    value = moving_average_loss(x, p, neg, ids, state, tau=tau, gamma=gamma)
    value.backward()
    y = a.clone().requires_grad_(True)
    g_hat = _exact_pool_mean(y, p, neg, tau)
    u_new = (1 - gamma) * u_old + gamma * g_hat.detach()
    (tau * g_hat / u_new).mean().backward()
    torch.testing.assert_close(x.grad, y.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(state.u, u_new, rtol=1e-12, atol=0.0)
    torch.testing.assert_close(value, (tau * u_new.log()).mean(), rtol=1e-12, atol=1e-12)


def test_u_converges_to_the_exact_pool_mean() -> None:
    """Fixed embeddings, b = 32 of a pool of m = 64 per step, gamma = 0.1: u_i tracks g_i (within 2% on average
    over items, 5% for each), and its average over the last 500 steps is within 2% of g_i for every item."""
    a, p, pool, g = _pool_case()
    tau, b = 1.0, 32
    exact = _exact_pool_mean(a, p, pool, tau)
    state, ids = MovingAverageState(a.shape[0]), torch.arange(a.shape[0])
    running = torch.zeros_like(exact)
    for step in range(1000):
        batch = pool[torch.randperm(pool.shape[0], generator=g)[:b]]
        moving_average_loss(a, p, batch, ids, state, tau=tau, gamma=0.1)
        if step >= 500:
            running += state.u / 500
    relative = (state.u / exact - 1).abs()
    assert float(relative.mean()) < 0.02
    assert float(relative.max()) < 0.05
    assert float((running / exact - 1).abs().max()) < 0.02


def _run(state: MovingAverageState, steps: range, gamma) -> list[torch.Tensor]:
    """Deterministic sequence of losses: step k draws anchors, items and negatives from seed k."""
    losses = []
    for k in steps:
        g = torch.Generator().manual_seed(100 + k)
        a, p, neg = _unit(5, 4, g), _unit(5, 4, g), _unit(7, 4, g)
        ids = torch.randperm(12, generator=g)[:5]
        losses.append(moving_average_loss(a, p, neg, ids, state, tau=0.1, gamma=gamma))
    return losses


@pytest.mark.parametrize("gamma", [0.3, cosine_gamma(decay_steps=6, floor=0.1)])
def test_state_dict_round_trip_and_resume_bit_for_bit(gamma) -> None:
    """A state saved after 5 steps and loaded into a fresh one continues exactly as the uninterrupted run."""
    whole = MovingAverageState(12, dtype=torch.float32)
    uninterrupted = _run(whole, range(10), gamma)
    first = MovingAverageState(12, dtype=torch.float32)
    head = _run(first, range(5), gamma)
    saved = first.state_dict()
    assert all(isinstance(v, torch.Tensor) for v in saved.values())
    resumed = MovingAverageState(12, dtype=torch.float32)
    resumed.load_state_dict(saved)
    assert torch.equal(resumed.log_u, first.log_u) and torch.equal(resumed.seen, first.seen)
    assert torch.equal(resumed.u.nan_to_num(), first.u.nan_to_num()) and int(resumed.step) == 5
    tail = _run(resumed, range(5, 10), gamma)
    for x, y in zip(uninterrupted, head + tail, strict=True):
        assert torch.equal(x, y)
    assert torch.equal(whole.log_u, resumed.log_u) and torch.equal(whole.seen, resumed.seen)


def test_state_refuses_a_foreign_state_dict() -> None:
    with pytest.raises(ValueError, match="n_items=12"):
        MovingAverageState(12).load_state_dict(MovingAverageState(13).state_dict())
    with pytest.raises(ValueError, match="keys"):
        MovingAverageState(12).load_state_dict({"u": torch.zeros(12)})


def test_cosine_gamma_decays_from_one_to_the_floor() -> None:
    schedule = cosine_gamma(decay_steps=10, floor=0.2)
    values = [schedule(t) for t in range(12)]
    assert values[0] == 1.0 and values[10] == values[11] == pytest.approx(0.2)
    assert all(x >= y for x, y in itertools.pairwise(values))
    assert values[5] == pytest.approx(0.6)


def _call(**overrides):
    g = torch.Generator().manual_seed(3)
    args = {
        "anchors": _unit(4, 3, g),
        "positives": _unit(4, 3, g),
        "negatives": _unit(5, 3, g),
        "item_ids": torch.arange(4),
        "state": MovingAverageState(6),
        "tau": 0.1,
        "gamma": 0.5,
    }
    args.update(overrides)
    return moving_average_loss(**args)


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({"item_ids": torch.tensor([0, 1, 2, 6])}, "item_ids"),
        ({"item_ids": torch.tensor([-1, 1, 2, 3])}, "item_ids"),
        ({"item_ids": torch.tensor([0, 1, 1, 3])}, "item_ids"),
        ({"item_ids": torch.arange(3)}, "item_ids"),
        ({"item_ids": torch.arange(4, dtype=torch.int32)}, "item_ids"),
        ({"gamma": 0.0}, "gamma"),
        ({"gamma": 1.5}, "gamma"),
        ({"gamma": math.nan}, "gamma"),
        ({"gamma": lambda step: 2.0}, r"gamma\(step=0\)"),
        ({"tau": 0.0}, "tau"),
        ({"tau": -0.1}, "tau"),
        ({"positives": torch.zeros(3, 3, dtype=torch.float64)}, "positives"),
        ({"negatives": torch.zeros(5, 2, dtype=torch.float64)}, "negatives"),
        ({"negatives": torch.zeros(5, dtype=torch.float64)}, "negatives"),
        ({"reduction": "sum"}, "reduction"),
        ({"state": object()}, "state"),
    ],
)
def test_bad_input_is_refused_by_name(overrides, names) -> None:
    with pytest.raises(ValueError, match=names):
        _call(**overrides)


def test_refused_call_leaves_the_state_untouched() -> None:
    state = MovingAverageState(6)
    with pytest.raises(ValueError, match="gamma"):
        _call(state=state, gamma=0.0)
    assert not bool(state.seen.any()) and int(state.step) == 0


def test_gradcheck_tiny_case() -> None:
    """Autograd's gradients against finite differences (gamma = 1, where the value's gradient is the loss's)."""
    g = torch.Generator().manual_seed(4)
    a, p, neg = (x.requires_grad_(True) for x in (_unit(3, 2, g), _unit(3, 2, g), _unit(4, 2, g)))
    ids = torch.tensor([2, 0, 1])

    def loss(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return moving_average_loss(x, y, z, ids, MovingAverageState(3), tau=0.3, gamma=1.0, reduction="none")

    assert torch.autograd.gradcheck(loss, (a, p, neg))


def test_per_anchor_negatives_gamma_one_is_the_independent_gcl_loss() -> None:
    """(n, b, d) negatives (SCRL, each anchor its own): gamma = 1 equals contrastive_loss(regime="independent")."""
    g = torch.Generator().manual_seed(5)
    a, p, neg = _unit(6, 5, g), _unit(6, 5, g), _unit(6 * 7, 5, g).reshape(6, 7, 5)
    leaves = [x.clone().requires_grad_(True) for x in (a, p, neg)]
    got = moving_average_loss(*leaves, torch.arange(6), MovingAverageState(6), tau=0.2, gamma=1.0)
    got.backward()
    refs = [x.clone().requires_grad_(True) for x in (a, p, neg)]
    want = contrastive_loss(*refs, tau=0.2, form="gcl", regime="independent")
    want.backward()
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for x, r in zip(leaves, refs, strict=True):
        torch.testing.assert_close(x.grad, r.grad, rtol=1e-10, atol=1e-12)


def test_per_anchor_u_converges_to_each_anchors_own_pool_mean() -> None:
    """Anchor i's u_i -> (1/m) sum_j exp(Delta_ij / tau) over its own pool, from b = 8 draws per step."""
    a, p, _, g = _pool_case(n=4, m=1, d=6, seed=3)
    pools = _unit(4 * 32, 6, g).reshape(4, 32, 6)
    state = MovingAverageState(4)
    for _ in range(4000):
        draws = torch.randint(32, (4, 8), generator=g)
        own = pools[torch.arange(4)[:, None], draws]
        moving_average_loss(a, p, own, torch.arange(4), state, tau=0.5, gamma=0.01)
    exact = torch.stack([_exact_pool_mean(a[i : i + 1], p[i : i + 1], pools[i], 0.5)[0] for i in range(4)])
    torch.testing.assert_close(state.u, exact, rtol=0.05, atol=0.0)


def test_per_anchor_negatives_of_another_batch_are_refused() -> None:
    g = torch.Generator().manual_seed(6)
    a = _unit(3, 4, g)
    with pytest.raises(ValueError, match=r"\(n, b, d\) per-anchor negatives"):
        moving_average_loss(
            a, a, _unit(8, 4, g).reshape(2, 4, 4), torch.arange(3), MovingAverageState(3), tau=0.1, gamma=1.0
        )
