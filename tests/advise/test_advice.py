"""Advice from a fitted surface: m* against the truth, the doubling gains, and when the advice is withheld."""

import math
from dataclasses import replace

import numpy as np
import pytest

from crl.advise.advice import ANSWER_FIELDS, LOCAL_FIELDS, advise, parameter_flags, relative_tolerance
from crl.advise.intervals import Interval
from crl.advise.surface import SurfaceFit, SurfaceParams, fit_seed_surface

PILOT = {"pilot_n_max": 2000, "pilot_m_max": 2000, "pilot_m_over_n": (0.01, 1.0)}
"""The reach of :func:`_fit`'s pilot, as a session passes it: its largest n and m, its m/n range."""

TRUTH = SurfaceParams(a=0.1, c=0.05, beta=0.5, b=2.0, delta=0.5, alpha=0.7, n0=707.0)


def _fit(truth: SurfaceParams, noise: float, seeds: int = 3, rng_seed: int = 0) -> SurfaceFit:
    rng = np.random.default_rng(rng_seed)
    n = np.array([n for n in (250, 500, 1000, 2000) for _ in range(4)], dtype=float)
    m = np.array(
        [max(1, round(f * n_i)) for n_i in (250, 500, 1000, 2000) for f in (0.01, 0.1, 0.4, 1.0)], dtype=float
    )
    columns = [
        (n, m, np.full(n.size, s), truth.error(n, m) * np.exp(rng.normal(0, noise, n.size)))
        for s in range(seeds)
    ]
    return fit_seed_surface(*[np.concatenate(c) for c in zip(*columns, strict=True)])


@pytest.fixture(scope="module")
def clean_fit() -> SurfaceFit:
    return _fit(TRUTH, 1e-4)


def test_m_star_and_gains_match_the_true_surface(clean_fit: SurfaceFit) -> None:
    """With (almost) noise-free pilots, m* and the doubling gains equal the truth's closed forms."""
    advice = advise(clean_fit, n=8000, m=16, regime="shared", **PILOT)
    tol = advice.tolerance * float(TRUTH.plateau(8000))
    assert advice.m_star.estimate == pytest.approx(TRUTH.saturation(8000, tol), rel=1e-2)
    assert advice.gain_double_m.estimate == pytest.approx(
        float(TRUTH.error(8000, 16) - TRUTH.error(8000, 32)), rel=1e-2
    )
    assert advice.gain_double_n.estimate == pytest.approx(
        float(TRUTH.error(8000, 16) - TRUTH.error(16000, 16)), rel=1e-2
    )
    assert advice.m_star_exponent.estimate == pytest.approx(TRUTH.delta / TRUTH.alpha, rel=1e-2)


def test_small_m_is_told_to_grow(clean_fit: SurfaceFit) -> None:
    advice = advise(clean_fit, n=8000, m=16, regime="shared", **PILOT)
    assert advice.supported
    assert "increase m from 16 to about" in advice.recommendation


def test_large_m_is_told_only_data_helps(clean_fit: SurfaceFit) -> None:
    advice = advise(clean_fit, n=8000, m=10**7, regime="shared", **PILOT)
    assert advice.supported and "only more data" in advice.recommendation


def test_alpha_is_compared_with_the_regime_bound(clean_fit: SurfaceFit) -> None:
    """alpha = 0.7: at least as fast as SSCRL's 1/2, slower than SCRL's 1 (0.7 < 0.9)."""
    shared = advise(clean_fit, n=8000, m=16, regime="shared", **PILOT)
    independent = advise(clean_fit, n=8000, m=16, regime="independent", **PILOT)
    assert shared.rate_comparison.startswith("at least as fast")
    assert independent.rate_comparison.startswith("slower")


def test_far_extrapolation_is_withheld(clean_fit: SurfaceFit) -> None:
    advice = advise(clean_fit, n=2000 * 40, m=16, regime="shared", **PILOT)
    assert not advice.supported
    assert "40x the largest pilot n" in advice.recommendation and "--budget" in advice.recommendation


def test_a_surface_outside_the_family_is_a_bad_fit() -> None:
    """Errors that first rise then fall in m (not of the fitted form) must be reported as a bad fit."""
    bumpy = _fit(TRUTH, 1e-4)
    cells = tuple(
        (n, m, y * (1.5 if m == max(c[1] for c in bumpy.cells if c[0] == n) else 1.0))
        for n, m, y in bumpy.cells
    )
    broken = replace(bumpy, cells=cells, cell_noise=1e-4)
    advice = advise(broken, n=4000, m=16, regime="shared", **PILOT)
    assert not advice.supported and "bad fit" in advice.recommendation


def test_noisy_pilot_gives_a_wide_m_star_and_asks_for_seeds() -> None:
    advice = advise(_fit(TRUTH, 0.3), n=8000, m=16, regime="shared", **PILOT)
    assert not advice.supported
    assert "--seeds 6" in advice.recommendation


def test_tolerance_is_at_least_the_relative_floor(clean_fit: SurfaceFit) -> None:
    assert relative_tolerance(clean_fit, 0.01) == pytest.approx(0.01)
    assert relative_tolerance(clean_fit, 0.2) == pytest.approx(0.2)


def test_advice_is_json_able(clean_fit: SurfaceFit) -> None:
    import json

    advice = advise(clean_fit, n=8000, m=16, regime="shared", **PILOT)
    document = json.loads(json.dumps(advice.as_dict()))
    assert set(document["parameters"]) == {"a", "c", "beta", "b", "delta", "alpha"}
    assert document["m_star"]["level"] == 0.9


def test_bad_n_is_refused(clean_fit: SurfaceFit) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        advise(clean_fit, n=0, m=16, regime="shared", **PILOT)


def test_a_withheld_answer_writes_no_estimate_and_a_supported_one_does(clean_fit: SurfaceFit) -> None:
    """If this fails, a withheld answer still carries m*, the gains or the predicted error as numbers in
    advice.json (a reader would take them as the answer), or a supported one lost them."""
    withheld = advise(clean_fit, n=2000 * 40, m=16, regime="shared", **PILOT)
    document = withheld.as_dict()
    assert not document["supported"]
    assert all(document[name] is None for name in ANSWER_FIELDS)
    assert document["parameters"]["alpha"]["estimate"] > 0
    supported = advise(clean_fit, n=8000, m=16, regime="shared", **PILOT).as_dict()
    assert supported["supported"] and all(supported[name] is not None for name in ANSWER_FIELDS)


@pytest.mark.parametrize(
    ("name", "interval", "on_bound", "flags"),
    [
        ("alpha", Interval(0.7, 0.6, 0.8, 0.9), False, ()),
        (
            "alpha",
            Interval(0.05, 0.05, 0.05, 0.9),
            True,
            ("zero width (pinned, not measured)", "ended on the fit's bound"),
        ),
        ("beta", Interval(1.0, 0.1, 3.5, 0.9), False, ("wider than 2 in the exponent",)),
        ("b", Interval(2.0, 0.01, 50.0, 0.9), False, ("spans more than 100x",)),
        ("a", Interval(0.1, -0.05, 0.2, 0.9), False, ("below 0 (an error floor)",)),
        ("c", Interval(0.05, 0.0, math.inf, 0.9), False, ("an infinite end",)),
    ],
)
def test_implausible_parameter_intervals_are_flagged(
    name: str, interval: Interval, on_bound: bool, flags: tuple[str, ...]
) -> None:
    assert parameter_flags(name, interval, on_bound=on_bound) == flags


def test_the_clean_fit_flags_nothing(clean_fit: SurfaceFit) -> None:
    advice = advise(clean_fit, n=8000, m=16, regime="shared", **PILOT)
    assert set(advice.flags) == {"a", "c", "beta", "b", "delta", "alpha"}
    assert not any(advice.flags.values())


def test_the_local_answer_equals_the_true_surface_and_picks_the_larger_gain(clean_fit: SurfaceFit) -> None:
    """D = err(2n, m) - err(n, 2m) against the truth's closed form, at two points where its sign differs."""
    for m, better in ((160, "doubling m (more negatives)"), (3000, "doubling n (more data)")):
        advice = advise(clean_fit, n=8000, m=m, regime="shared", **PILOT)
        truth = float(TRUTH.error(16000, m) - TRUTH.error(8000, 2 * m))
        assert advice.local_supported, advice.local_problems
        assert advice.gain_difference.estimate == pytest.approx(truth, rel=1e-2)
        assert advice.gain_difference.low <= truth <= advice.gain_difference.high or abs(truth) < 1e-3
        assert f"{better} lowers the error more" in advice.local_answer


@pytest.mark.parametrize(
    ("n", "m", "reason"),
    [
        (20000, 400, "2n is 20x the largest pilot n"),
        (8000, 16, "leave the pilot's m/n range [0.01, 1]"),
        (8000, 6000, "leave the pilot's m/n range [0.01, 1]"),
    ],
)
def test_the_local_answer_is_withheld_beyond_the_pilots_reach(
    clean_fit: SurfaceFit, n: int, m: int, reason: str
) -> None:
    """Extrapolated in n (2n past 16x the largest pilot n) or in m/n (m/n below the pilot's smallest, 2m/n above
    its largest): no local answer, and advice.json carries no gain or predicted error."""
    advice = advise(clean_fit, n=n, m=m, regime="shared", **PILOT)
    assert not advice.local_supported and any(reason in problem for problem in advice.local_problems)
    document = advice.as_dict()
    assert all(document[name] is None for name in LOCAL_FIELDS)
    assert "cannot tell whether doubling m or n gains more" in advice.local_answer


def test_a_difference_whose_interval_holds_zero_is_withheld() -> None:
    """At the m where the truth's two gains are equal, noisy pilots cannot order them."""
    from scipy.optimize import brentq

    root = brentq(lambda m: float(TRUTH.error(16000, m) - TRUTH.error(8000, 2 * m)), 100, 4000)
    advice = advise(_fit(TRUTH, 0.05, rng_seed=1), n=8000, m=round(root), regime="shared", **PILOT)
    assert advice.gain_difference.low <= 0.0 <= advice.gain_difference.high
    assert not advice.local_supported
    assert any("not told apart" in problem for problem in advice.local_problems)
