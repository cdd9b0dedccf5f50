"""iSogCLR's per-sample temperature against its update formulas, written as float64 loops over anchors."""

import math

import pytest
import torch
import torch.nn.functional as F

from crl.objectives.individual_temperature import (
    IndividualTemperatureState,
    TemperatureRule,
    individual_temperature_loss,
)

RULE = TemperatureRule(tau_min=0.05, tau_max=1.0, rho=0.3, eta=0.05, beta=0.8, gamma=0.6, grad_clip=5.0)


def _unit(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1)


def reference_step(a, p, neg, tau, s, v, seen, rule):
    """One step by loops: returns the new (tau, s, v) lists."""
    n = len(a)
    new_tau, new_s, new_v = [], [], []
    for i in range(n):
        deltas = [(float(a[i] @ y) - float(a[i] @ p[i])) / tau[i] for y in neg]
        g_hat = sum(math.exp(x) for x in deltas) / len(deltas)
        s_i = (1 - rule.gamma) * s[i] + rule.gamma * g_hat if seen[i] else g_hat
        grad = math.log(s_i) + rule.rho - sum(math.exp(x) / s_i * x for x in deltas) / len(deltas)
        grad = max(-rule.grad_clip, min(rule.grad_clip, grad))
        v_i = (1 - rule.beta) * v[i] + rule.beta * grad
        new_tau.append(min(rule.tau_max, max(rule.tau_min, tau[i] - rule.eta * v_i)))
        new_s.append(s_i)
        new_v.append(v_i)
    return new_tau, new_s, new_v


def _objective(a, p, neg, tau, s):
    """(1/n) sum_i tau_i g_hat_i(w) / s_i, differentiable in a, p (tau, s constants)."""
    delta = (a @ neg.T - (a * p).sum(1, keepdim=True)) / tau[:, None]
    return (tau * delta.exp().mean(1) / s).mean()


@pytest.mark.parametrize("tiling", ["dense", "tiled"])
def test_two_steps_match_the_formulas(tiling):
    a, p, neg = _unit(5, 4, 0), _unit(5, 4, 1), _unit(6, 4, 2)
    ids = torch.tensor([7, 2, 0, 9, 4])
    state = IndividualTemperatureState(10, tau_init=0.2)
    tau, s, v, seen = [0.2] * 5, [0.0] * 5, [0.0] * 5, [False] * 5
    for step in range(2):
        x = (a * (1 + 0.1 * step)).requires_grad_(True)
        want_tau, want_s, want_v = reference_step(x.detach(), p, neg, tau, s, v, seen, RULE)
        objective = _objective(
            x, p, neg, torch.tensor(tau, dtype=torch.float64), torch.tensor(want_s, dtype=torch.float64)
        )
        (want_grad,) = torch.autograd.grad(objective, x)
        loss = individual_temperature_loss(x, p, neg, ids, state, RULE, tiling=tiling)
        loss.backward()
        torch.testing.assert_close(x.grad, want_grad, rtol=1e-9, atol=1e-12)
        want_value = sum(t * math.log(si) for t, si in zip(tau, want_s, strict=True)) / 5
        assert float(loss.detach()) == pytest.approx(want_value, rel=1e-10)
        torch.testing.assert_close(state.tau[ids], torch.tensor(want_tau, dtype=torch.float64))
        torch.testing.assert_close(state.log_s[ids].exp(), torch.tensor(want_s, dtype=torch.float64))
        torch.testing.assert_close(state.v[ids], torch.tensor(want_v, dtype=torch.float64))
        tau, s, v, seen = want_tau, want_s, want_v, [True] * 5
    assert int(state.step) == 2
    untouched = torch.tensor([1, 3, 5, 6, 8])
    assert bool((state.tau[untouched] == 0.2).all()) and not bool(state.seen[untouched].any())


def test_in_batch_negatives_leave_out_the_own_positive():
    a, p = _unit(6, 3, 3), _unit(6, 3, 4)
    ids = torch.arange(6)
    state = IndividualTemperatureState(6, tau_init=0.3)
    rule = TemperatureRule(gamma=1.0)
    individual_temperature_loss(a, p, None, ids, state, rule)
    for i in range(6):
        deltas = [(float(a[i] @ p[j]) - float(a[i] @ p[i])) / 0.3 for j in range(6) if j != i]
        g_hat = sum(math.exp(x) for x in deltas) / 5
        assert float(state.log_s[i].exp()) == pytest.approx(g_hat, rel=1e-10)


def test_tau_stays_within_its_bounds_and_reaches_them():
    a, p, neg = _unit(8, 4, 5), _unit(8, 4, 6), _unit(9, 4, 7)
    ids = torch.arange(8)
    for rho, bound in ((50.0, 0.05), (0.0, None)):
        rule = TemperatureRule(tau_min=0.05, tau_max=0.4, rho=rho, eta=10.0, grad_clip=100.0)
        state = IndividualTemperatureState(8, tau_init=0.2)
        for _ in range(3):
            individual_temperature_loss(a, p, neg, ids, state, rule)
        assert bool(((state.tau >= 0.05) & (state.tau <= 0.4)).all())
        if bound is not None:
            assert bool((state.tau == bound).all())


def test_update_false_changes_nothing_and_state_round_trips():
    a, p, neg = _unit(4, 3, 8), _unit(4, 3, 9), _unit(5, 3, 10)
    ids = torch.tensor([0, 1, 2, 3])
    state = IndividualTemperatureState(4, tau_init=0.5)
    individual_temperature_loss(a, p, neg, ids, state, RULE)
    saved = state.state_dict()
    individual_temperature_loss(a, p, neg, ids, state, RULE, update=False)
    for key, value in saved.items():
        assert torch.equal(getattr(state, key), value)
    fresh = IndividualTemperatureState(4, tau_init=0.5)
    fresh.load_state_dict(saved)
    assert all(torch.equal(getattr(fresh, k), v) for k, v in saved.items())
    with pytest.raises(ValueError, match="another n_items"):
        IndividualTemperatureState(5, tau_init=0.5).load_state_dict(saved)


def test_bad_input_is_named():
    a, p = _unit(4, 3, 11), _unit(4, 3, 12)
    state = IndividualTemperatureState(4, tau_init=0.5)
    with pytest.raises(ValueError, match="repeats an id"):
        individual_temperature_loss(a, p, None, torch.tensor([0, 0, 1, 2]), state, RULE)
    with pytest.raises(ValueError, match=r"must lie in \[0, 4\)"):
        individual_temperature_loss(a, p, None, torch.tensor([0, 1, 2, 4]), state, RULE)
    with pytest.raises(ValueError, match=r"tau_min=0\.5 and tau_max=0\.1"):
        TemperatureRule(tau_min=0.5, tau_max=0.1)
    with pytest.raises(ValueError, match=r"gamma=0\.0"):
        TemperatureRule(gamma=0.0)
    with pytest.raises(ValueError, match="NaN/Inf"):
        individual_temperature_loss(a * float("nan"), p, None, torch.arange(4), state, RULE)
