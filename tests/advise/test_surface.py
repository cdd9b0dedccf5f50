"""The error-surface fit: exact recovery of a known surface, intervals that cover, the closed-form m*."""

import math

import numpy as np
import pytest

from crl.advise.surface import SurfaceParams, fit_seed_surface, fit_surface, t_interval

N_VALUES = (250, 500, 1000, 2000)
FRACTIONS = (0.01, 0.1, 0.4, 1.0)


def _grid() -> tuple[np.ndarray, np.ndarray]:
    n = np.array([n for n in N_VALUES for _ in FRACTIONS], dtype=float)
    m = np.array([max(1, round(f * n)) for n in N_VALUES for f in FRACTIONS], dtype=float)
    return n, m


def _noisy_pilot(truth: SurfaceParams, seeds: int, noise: float, rng: np.random.Generator):
    n, m = _grid()
    rows = [
        (n, m, np.full(n.size, s), truth.error(n, m) * np.exp(rng.normal(0, noise, n.size)))
        for s in range(seeds)
    ]
    return [np.concatenate(column) for column in zip(*rows, strict=True)]


@pytest.mark.parametrize(
    "truth",
    [
        SurfaceParams(a=0.1, c=0.05, beta=0.5, b=2.0, delta=0.5, alpha=0.7, n0=707.0),
        SurfaceParams(a=0.05, c=0.02, beta=0.8, b=20.0, delta=-0.5, alpha=1.5, n0=707.0),
    ],
)
def test_noise_free_surface_is_recovered(truth: SurfaceParams) -> None:
    """Wrong optimiser, parametrisation or residuals would miss a surface that lies exactly in the family."""
    n, m = _grid()
    fit = fit_surface(n, m, truth.error(n, m), n0=truth.n0)
    assert fit.converged
    for name, value in truth.as_dict().items():
        assert getattr(fit.params, name) == pytest.approx(value, rel=1e-3, abs=1e-6), name


@pytest.mark.slow
def test_intervals_cover_the_truth_in_most_simulated_pilots() -> None:
    """Jackknife 90% intervals over 3 seeds must cover alpha, m* and a prediction beyond the pilot in most of 8
    independent simulated pilots (at 90%, 4 or fewer covers out of 8 has probability 0.005): too-narrow intervals
    fail."""
    truth = SurfaceParams(a=0.1, c=0.05, beta=0.5, b=2.0, delta=0.5, alpha=0.7, n0=707.0)
    rng = np.random.default_rng(20261130)
    covers = {"alpha": 0, "m_star": 0, "prediction": 0}
    true_m_star = truth.saturation(8000.0, 0.02 * float(truth.plateau(8000.0)))
    for _ in range(8):
        fit = fit_seed_surface(*_noisy_pilot(truth, 3, 0.02, rng), level=0.9)
        covers["alpha"] += fit.parameter_intervals()["alpha"].contains(truth.alpha)
        m_star = fit.quantity(lambda p: p.saturation(8000.0, 0.02 * float(p.plateau(8000.0))))
        covers["m_star"] += m_star.contains(true_m_star)
        covers["prediction"] += fit.predict(4000.0, 400.0).contains(float(truth.error(4000.0, 400.0)))
    assert all(count >= 5 for count in covers.values()), covers


def test_saturation_matches_a_brute_force_search() -> None:
    """m* is the smallest m with err(n, m) - F(n) <= tol: compare the closed form with a search over m."""
    params = SurfaceParams(a=0.1, c=0.05, beta=0.5, b=2.0, delta=0.5, alpha=0.7, n0=707.0)
    for n, tol in ((500.0, 0.002), (4000.0, 0.001), (100.0, 0.01)):
        m = np.arange(1, 200_000, dtype=float)
        excess = params.error(n, m) - params.plateau(n)
        first = m[np.argmax(excess <= tol)]
        assert math.ceil(params.saturation(n, tol)) == first


def test_t_interval_has_its_nominal_coverage() -> None:
    """Student-t intervals of the mean of 3 normal replicates cover the mean about 90% of the time (1000 draws)."""
    rng = np.random.default_rng(1)
    hits = sum(t_interval(rng.normal(1.0, 0.5, 3), 0.9).contains(1.0) for _ in range(1000))
    assert 0.86 < hits / 1000 < 0.94


def test_log_interval_is_geometric() -> None:
    """On the log scale the estimate is the geometric mean and the interval is symmetric in log."""
    interval = t_interval([1.0, 4.0], 0.9, log=True)
    assert interval.estimate == pytest.approx(2.0)
    assert interval.low * interval.high == pytest.approx(4.0)


def test_measured_interval_is_wider_than_the_mean_interval() -> None:
    """The interval for a measured mean adds one run's noise: it contains the interval of the expected error."""
    truth = SurfaceParams(a=0.1, c=0.05, beta=0.5, b=2.0, delta=0.5, alpha=0.7, n0=707.0)
    fit = fit_seed_surface(*_noisy_pilot(truth, 3, 0.02, np.random.default_rng(3)))
    mean, measured = fit.predict(4000, 400), fit.predict_measured(4000, 400, runs=3)
    assert measured.low < mean.low < mean.high < measured.high


@pytest.mark.parametrize(
    ("errors", "message"),
    [([0.1] * 15 + [0.0], "finite and > 0"), ([0.1] * 15 + [float("nan")], "finite and > 0")],
)
def test_bad_errors_are_refused(errors: list[float], message: str) -> None:
    n, m = _grid()
    with pytest.raises(ValueError, match=message):
        fit_surface(n, m, errors, n0=707.0)


def test_too_few_cells_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 8 cells"):
        fit_surface([1, 2, 3], [1, 2, 3], [0.1, 0.1, 0.1], n0=2.0)


@pytest.mark.parametrize(("method", "seeds", "needed"), [("jackknife", 2, 3), ("per_seed", 1, 2)])
def test_too_few_seeds_are_refused(method: str, seeds: int, needed: int) -> None:
    n, m = _grid()
    seed = np.concatenate([np.full(n.size, s) for s in range(seeds)])
    with pytest.raises(ValueError, match=f"need at least {needed}"):
        fit_seed_surface(np.tile(n, seeds), np.tile(m, seeds), seed, np.full(seed.size, 0.1), method=method)


def test_jackknife_and_per_seed_agree_on_clean_data() -> None:
    """Both interval methods must centre on the truth when the pilot is (almost) noise-free."""
    truth = SurfaceParams(a=0.1, c=0.05, beta=0.5, b=2.0, delta=0.5, alpha=0.7, n0=707.0)
    columns = _noisy_pilot(truth, 3, 1e-5, np.random.default_rng(5))
    for method in ("jackknife", "per_seed"):
        alpha = fit_seed_surface(*columns, method=method).parameter_intervals()["alpha"]
        assert alpha.estimate == pytest.approx(0.7, rel=1e-3) and alpha.contains(0.7)
