"""DiscreteLatent: class-level closed forms vs brute-force enumeration vs Monte Carlo (docs/theory.md 6.4)."""

import math
from itertools import product

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from crl.synthetic import DiscreteLatent


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _brute_force_law(
    sizes: list[int], weights: list[float], include_anchor: bool
) -> tuple[np.ndarray, np.ndarray]:
    """pi (N,) and the kernel P[x, y] (N, N) written item by item from the stated conventions."""
    classes = [k for k, size in enumerate(sizes) for _ in range(size)]
    total = sum(weights)
    pi = np.array([weights[c] / total / sizes[c] for c in classes])
    kernel = np.zeros((len(classes), len(classes)))
    for i, j in product(range(len(classes)), repeat=2):
        if classes[i] == classes[j] and (include_anchor or i != j):
            kernel[i, j] = 1.0 / (sizes[classes[i]] - (0 if include_anchor else 1))
    return pi, kernel


def _brute_force_truths(pi: np.ndarray, kernel: np.ndarray) -> tuple[float, float, float]:
    """(E_x KL(p+_x||p-), E* with ties counted 1/2, E|dM/dpi|^2) by triple loops, p- = pi @ kernel."""
    negative = pi @ kernel
    n = len(pi)
    kl = auc = moment = 0.0
    for x in range(n):
        for y in range(n):
            if kernel[x, y] > 0:
                kl += pi[x] * kernel[x, y] * math.log(kernel[x, y] / negative[y])
                moment += pi[x] * kernel[x, y] ** 2 / pi[y]
            for y2 in range(n):
                r, r2 = kernel[x, y] / negative[y], kernel[x, y2] / negative[y2]
                win = 1.0 if r > r2 else 0.5 if r == r2 else 0.0
                auc += pi[x] * kernel[x, y] * negative[y2] * win
    return kl, auc, moment


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(2, 4), min_size=1, max_size=4),
    st.lists(st.floats(0.1, 3.0), min_size=4, max_size=4),
    st.booleans(),
)
def test_exact_values_equal_item_by_item_enumeration(
    sizes: list[int], raw: list[float], include: bool
) -> None:
    """L*, E* (ties 1/2) and E|dM/dpi|^2 from the class formulas equal the brute-force sums over items."""
    weights = raw[: len(sizes)]
    model = DiscreteLatent(sizes, class_weights=weights, include_anchor=include)
    pi, kernel = _brute_force_law(sizes, weights, include)
    kl, auc, moment = _brute_force_truths(pi, kernel)
    assert np.allclose(pi @ kernel, pi)  # the positives' marginal is pi, as documented
    assert model.mean_kl() == pytest.approx(kl, abs=1e-12)
    assert model.optimal_risk(0.7) == pytest.approx(-0.7 * kl, abs=1e-12)
    assert model.optimal_auc() == pytest.approx(auc, abs=1e-12)
    assert model.density_ratio_second_moment() == pytest.approx(moment, rel=1e-12)


@pytest.mark.parametrize("include", [True, False])
def test_densities_match_the_enumerated_kernel(include: bool) -> None:
    """log p+_x(y), log p-(y), log_ratio (-inf off-class) and dM/dpi over all item pairs, with broadcasting."""
    sizes, weights = [2, 3, 2], [0.2, 0.5, 0.3]
    model = DiscreteLatent(sizes, class_weights=weights, include_anchor=include)
    pi, kernel = _brute_force_law(sizes, weights, include)
    items = model.one_hot(torch.arange(model.n_items))
    with np.errstate(divide="ignore"):
        expected_log_kernel = np.log(kernel)
    assert np.array_equal(
        model.log_positive_density(items[:, None], items[None]).numpy(), expected_log_kernel
    )
    assert np.allclose(model.log_negative_density(items).numpy(), np.log(pi))
    assert np.allclose(model.anchor_density_ratio(items[:, None], items[None]).numpy(), kernel / pi[None, :])
    assert np.exp(model.log_positive_density(items[:, None], items[None]).numpy()).sum(1) == pytest.approx(
        1.0
    )


def test_closed_forms_of_the_documented_conventions() -> None:
    """include_anchor: L* = -tau H(w), E* = 1 - sum w^2 / 2, E|dM/dpi|^2 = K."""
    weights = [0.5, 0.3, 0.2]
    model = DiscreteLatent([4, 1, 3], class_weights=weights)
    entropy = -sum(w * math.log(w) for w in weights)
    assert model.optimal_risk(2.0) == pytest.approx(-2.0 * entropy, rel=1e-14)
    assert model.optimal_auc() == pytest.approx(1.0 - 0.5 * sum(w * w for w in weights), rel=1e-14)
    assert model.density_ratio_second_moment() == pytest.approx(3.0, rel=1e-14)


@pytest.mark.parametrize("include", [True, False])
def test_samplers_follow_the_stated_laws(include: bool) -> None:
    """Anchor frequencies ≈ pi, negatives ≈ pi, positives stay in the anchor's class (never the anchor if excluded)."""
    sizes, weights = [2, 3, 2], [0.2, 0.5, 0.3]
    model = DiscreteLatent(sizes, class_weights=weights, include_anchor=include)
    pi, kernel = _brute_force_law(sizes, weights, include)
    n = 60000
    generator = _generator(0)
    x, y = model.sample(n, generator)
    anchors, positives = model.item_index(x), model.item_index(y)
    negatives = model.item_index(model.sample_negatives((300, 200), generator)).reshape(-1)
    tolerance = 5 * np.sqrt(pi * (1 - pi) / n)
    assert np.all(np.abs(np.bincount(anchors.numpy(), minlength=7) / n - pi) < tolerance)
    assert np.all(np.abs(np.bincount(negatives.numpy(), minlength=7) / n - pi) < tolerance)
    pair_counts = np.zeros((7, 7))
    np.add.at(pair_counts, (anchors.numpy(), positives.numpy()), 1.0)
    conditional = pair_counts / pair_counts.sum(1, keepdims=True)
    assert np.all(conditional[kernel == 0] == 0)
    assert np.allclose(conditional, kernel, atol=0.03)


def test_monte_carlo_agrees_with_exact_values() -> None:
    """MC of E log_ratio, E* (ties 1/2), E dM/dpi(x, y) and E_{p-} exp(log_ratio) = 1."""
    model = DiscreteLatent([3, 5, 2], class_weights=[0.3, 0.3, 0.4], include_anchor=False)
    n = 40000
    generator = _generator(1)
    x, y = model.sample(n, generator)
    negatives = model.sample_negatives((n,), generator)
    log_ratio, log_ratio_negative = model.log_ratio(x, y), model.log_ratio(x, negatives)
    wins = (log_ratio > log_ratio_negative).double() + 0.5 * (log_ratio == log_ratio_negative).double()
    for sample, exact in (
        (log_ratio, model.mean_kl()),
        (wins, model.optimal_auc()),
        (model.anchor_density_ratio(x, y), model.density_ratio_second_moment()),
        (torch.exp(log_ratio_negative), 1.0),
    ):
        standard_error = float(sample.std()) / math.sqrt(n)
        assert abs(float(sample.mean()) - exact) < 4.5 * standard_error


def test_bad_arguments_raise_value_error_naming_them() -> None:
    """Empty/non-integer sizes, singleton classes without the anchor, bad weights, non-one-hot points."""
    with pytest.raises(ValueError, match="class_sizes"):
        DiscreteLatent([])
    with pytest.raises(ValueError, match="class_sizes"):
        DiscreteLatent([2, 0])
    with pytest.raises(ValueError, match="class_sizes"):
        DiscreteLatent([2, 1], include_anchor=False)
    with pytest.raises(ValueError, match="class_weights"):
        DiscreteLatent([2, 2], class_weights=[1.0])
    with pytest.raises(ValueError, match="class_weights"):
        DiscreteLatent([2, 2], class_weights=[1.0, 0.0])
    model = DiscreteLatent([2, 2])
    with pytest.raises(ValueError, match="one-hot"):
        model.log_ratio(torch.full((4,), 0.25, dtype=torch.float64), model.one_hot(torch.tensor(0)))
