"""Claim C5: the offset power law and jackknife intervals, the five parts' verdicts on synthetic series (PASS, FAIL
and INCONCLUSIVE reachable), and that C5's cells resume without recomputation (docs/claims/C5.md)."""

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crl.claims import c05_trained_gap as c5
from crl.claims import replay
from crl.claims.budget import part_level
from crl.claims.c05_trained_gap import erm_cell, offset_power_fit
from crl.claims.context import Fidelity
from crl.claims.verdict import Verdict
from crl.erm.trained import family_for, ideal_parameters
from crl.stats import INFLUENCE_BOUND, influence_ratio, seed_rate
from crl.sweep import Cell, CellRecord, SweepStore, run_cells

LEVEL = part_level(5)
GRID = (8, 16, 32, 64, 128, 256, 512, 1024)


def test_offset_power_fit_recovers_a_b_r_from_exact_values() -> None:
    """If this fails, a + b m^r is not recovered from noise-free values (to the exponent grid's refinement)."""
    x = np.array(GRID, dtype=np.float64)
    for a, b, r in ((0.007, 1.3, -1.2), (0.01, 0.4, -0.5), (0.0, 2.0, -1.0)):
        fit = offset_power_fit(x, a + b * x**r)
        assert fit.r == pytest.approx(r, abs=2e-3)
        assert fit.max_relative_residual < 2e-3


def _records(
    series: dict[tuple[str, str, int, int], np.ndarray], active: set[Any] = frozenset(), floor: float = 0.0
) -> list[CellRecord]:
    """Synthetic cell records: per (arm, regime, n, m) one row of per-seed floor-free gaps (excess = gap / 3);
    G_cv adds the fixed-s* floor b*_m = ``floor``, and G the seed's own draw of it (star_gap)."""
    out = []
    for (arm, regime, n, m), values in series.items():
        for index, value in enumerate(values):
            params = {"arm": arm, "regime": regime, "n": n, "m": m, "index": index}
            star_gap = floor * (1.0 + 0.5 * math.sin(index + n))
            result = {
                "status": "ok",
                "active": (arm, regime, m) in active,
                "gap_cv": float(value) + floor,
                "gap": float(value) + star_gap,
                "star_gap": star_gap,
                "excess_risk": float(value) / 3.0,
                "auc_gap": 0.0,
                "kkt_residual": 1e-12,
                "reason": "",
            }
            out.append(CellRecord("C5", Cell(params, index), result, "run", "now", 0.0))
    return out


def _m_series(r_scrl: float, r_sscrl: float, noise: float, seeds: int = 12, scale: float = 1.0) -> dict:
    """|G| = a + b m^r per regime with multiplicative seed noise (common per seed, as common random numbers)."""
    rng = np.random.default_rng(1)
    x = np.array(GRID, dtype=np.float64)
    shift = 1.0 + noise * rng.standard_normal((seeds, 1))
    series = {}
    for regime, r, b in (("independent", r_scrl, 1.0), ("shared", r_sscrl, 2.0 * scale)):
        curve = 0.005 + b * x**r
        own = 1.0 + noise * rng.standard_normal((seeds, x.size))
        for j, m in enumerate(GRID):
            series[("claim", regime, 1024, m)] = curve[j] * shift[:, 0] * own[:, j]
    return series


@pytest.mark.parametrize(
    ("r_scrl", "r_sscrl", "noise", "scale", "expected"),
    [
        (-1.1, -0.8, 0.01, 1.0, [Verdict.PASS, Verdict.PASS, Verdict.PASS]),
        (-0.5, -0.2, 0.01, 1.0, [Verdict.FAIL, Verdict.FAIL, Verdict.PASS]),
        (-0.9, -0.4, 0.6, 0.5, [Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE]),
    ],
)
def test_m_parts_reach_every_verdict(
    r_scrl: float, r_sscrl: float, noise: float, scale: float, expected: list[Verdict]
) -> None:
    """If this fails, parts 1-3 cannot PASS on fast decay, FAIL on slow decay, or stay INCONCLUSIVE on noise
    around the bounds (60% seed noise: not a misfit under contract v2, but intervals that straddle)."""
    data = c5.Series(_records(_m_series(r_scrl, r_sscrl, noise, scale=scale)), 12)
    verdicts, stats, _ = c5.m_parts(data, "claim", 1024, GRID, LEVEL)
    assert verdicts == expected
    assert stats, "every part reports its statistic as measured"


def test_ratio_part_fails_when_sscrl_is_below_scrl() -> None:
    """If this fails, SSCRL's |G| clearly below SCRL's does not FAIL part 3."""
    data = c5.Series(_records(_m_series(-1.0, -1.0, 0.01, scale=0.1)), 12)
    verdicts, _, _ = c5.m_parts(data, "claim", 1024, GRID, LEVEL)
    assert verdicts[2] is Verdict.FAIL


def test_binding_ball_shrinks_the_window_to_too_few_points() -> None:
    """If this fails, m where the ball binds in some seed enter the fit (the rule's window excludes them)."""
    active = {("claim", "independent", m) for m in GRID[:5]}
    data = c5.Series(_records(_m_series(-1.1, -0.8, 0.01), active), 12)
    verdicts, _, reasons = c5.m_parts(data, "claim", 1024, GRID, LEVEL)
    assert verdicts[0] is Verdict.INCONCLUSIVE and "too few points" in reasons[0]


@pytest.mark.parametrize(("slope", "expected"), [(-1.0, Verdict.PASS), (-0.1, Verdict.FAIL)])
def test_n_parts_judge_the_secants_of_the_floor_free_gap_against_minus_045(
    slope: float, expected: Verdict
) -> None:
    """If this fails, the rates in n of the floor-free gap and of the excess risk are not judged end to end
    against -0.45, or the floor b*_m (here 2 / 4096: it would bend c/n to a secant near -0.6) enters part 4."""
    rng = np.random.default_rng(2)
    grid = (256, 512, 1024, 2048, 4096)
    series = {
        ("claim", "independent", n, 256): n**slope * (1.0 + 0.02 * rng.standard_normal(12)) for n in grid
    }
    data = c5.Series(_records(series, floor=2.0 / 4096), 12)
    verdicts, stats, _ = c5.n_parts(data, grid, 256, LEVEL)
    assert verdicts == [expected, expected]
    assert stats[0].value == pytest.approx(slope, abs=0.02)
    assert "leftover floor b*_m at n = 4096: 0.000488" in stats[0].detail


def test_the_ratio_is_judged_only_where_m_is_at_most_n_over_4() -> None:
    """If this fails, m above n/4 (where both regimes share the n-floor) enter the SSCRL/SCRL ratio part."""
    data = c5.Series(_records(_m_series(-1.1, -0.8, 0.01)), 12)
    _, stats, _ = c5.m_parts(data, "claim", 1024, GRID, LEVEL)
    ratio_m = [int(s.name.split("m = ")[1].split(",")[0]) for s in stats if s.name.startswith("claim: log(")]
    assert ratio_m and max(ratio_m) <= 256


def test_a_material_significant_misfit_of_the_m_series_is_inconclusive() -> None:
    """If this fails, a window that bends away from a + b m^r (a kink) passes as a rate; noise alone does not
    block it (the first row of test_m_parts_reach_every_verdict)."""
    series = _m_series(-1.1, -0.8, 0.01)
    for j, m in enumerate(GRID):
        if m >= 128:
            series[("claim", "independent", 1024, m)] = series[("claim", "independent", 1024, m)] * (
                3.0 if j % 2 else 1.0
            )
    verdicts, _, reasons = c5.m_parts(c5.Series(_records(series), 12), "claim", 1024, GRID, LEVEL)
    assert verdicts[0] is Verdict.INCONCLUSIVE and "misfit, material and significant" in reasons[0]


def test_cells_resume_without_recomputation_and_are_deterministic(tmp_path: Path) -> None:
    """If this fails, an interrupted C5 sweep recomputes stored fits or a refit differs from the stored one."""
    sizes = {"n_eval": 512, "n_bias": 256, "arm": "claim", "n": 64, "index": 0}
    cells = [
        Cell({**sizes, "regime": regime, "m": m}, 11)
        for regime, m in (("independent", 8), ("shared", 16), ("independent", 16))
    ]
    calls: list[str] = []

    with SweepStore(tmp_path / "r.sqlite") as store:  # type: ignore[operator]
        first = run_cells(store, "C5@t", cells[:2], erm_cell, run_id="a")
        rerun = run_cells(store, "C5@t", cells, _counting(calls), run_id="b")
    assert len(calls) == 1 and [r.run_id for r in rerun] == ["a", "a", "b"]
    assert rerun[0].result == first[0].result
    assert rerun[0].result == erm_cell(cells[0])
    assert math.isfinite(rerun[2].result["kkt_residual"])


def _counting(calls: list[str]):
    """erm_cell, recording the cells it computes."""

    def fn(cell: Cell) -> dict[str, Any]:
        calls.append(cell.key)
        return erm_cell(cell)

    return fn


def test_gap_figure_draws_the_m_series_at_its_own_n() -> None:
    """If this fails, the |G|-vs-m figure mixes in the n series' points (cells at other n)."""
    series = _m_series(-1.1, -0.8, 0.01)
    series[("claim", "independent", 256, 256)] = np.full(12, 0.05)
    figure = c5._figure(c5.Series(_records(series), 12), 1024, GRID)
    scrl = next(p for p in figure.points if "SCRL" in p.label and "SSCRL" not in p.label)
    assert scrl.x == tuple(float(m) for m in GRID)


def test_the_control_is_a_heavy_tailed_class_containing_s_star() -> None:
    """If this fails, C5's control is not the pre-registered heavy-tailed setting (docs/claims/C5.md): wide Gaussian
    positives (rho 0.5, v 3), e* = tau/3 fixed so exp(s/tau) has tail index 1.5, ball 3 |theta*|; and one of its
    cells no longer fits and measures."""
    truth = c5.truth_of("control")
    assert truth.variance == 3.0 and truth.rho == 0.5 and not truth.negatives_from_positive_marginal
    family = family_for(truth, c5.TAU)
    assert family.offset == pytest.approx(c5.TAU / 3.0) and c5.TAU / (2.0 * family.offset) == pytest.approx(
        1.5
    )
    assert c5.radius_of("control") == pytest.approx(3.0 * float(ideal_parameters(truth, c5.TAU).norm()))
    cell = Cell(
        {
            "arm": "control",
            "regime": "independent",
            "n": 64,
            "m": 64,
            "index": 0,
            "n_eval": 1024,
            "n_bias": 256,
        },
        7,
    )
    result = erm_cell(cell)
    assert result["status"] == "ok" and result["gap_cv"] is not None and math.isfinite(result["gap_cv"])


def test_the_n_parts_control_reads_its_own_cells_and_fails_on_a_floor() -> None:
    """If this fails, the n-parts' control (SSCRL, one shared set of 16 negatives) does not judge its own cells
    by parts 4-5's rule: a gap with a floor that does not fall with n (here 0.3 + n^-1) must FAIL, while the
    claim's falling series in the same records still PASSes."""
    rng = np.random.default_rng(4)
    grid = (256, 512, 1024, 2048, 4096)
    series = {("claim", "independent", n, 256): n**-1.0 * (1 + 0.02 * rng.standard_normal(12)) for n in grid}
    series |= {
        ("shared-control", "shared", n, c5.SHARED_CONTROL_M): (0.3 + n**-1.0)
        * (1 + 0.02 * rng.standard_normal(12))
        for n in grid
    }
    data = c5.Series(_records(series), 12)
    claim, _, _ = c5.n_parts(data, grid, 256, LEVEL)
    control, stats, _ = c5.n_parts(data, grid, c5.SHARED_CONTROL_M, LEVEL, series=c5.SHARED_CONTROL)
    assert claim == [Verdict.PASS, Verdict.PASS]
    assert control == [Verdict.FAIL, Verdict.FAIL]
    assert "control: SSCRL, one shared set" in stats[0].name


@pytest.mark.parametrize(
    ("heavy", "shared", "expected"),
    [
        (Verdict.FAIL, Verdict.FAIL, Verdict.FAIL),
        (Verdict.FAIL, Verdict.PASS, Verdict.PASS),
        (Verdict.PASS, Verdict.FAIL, Verdict.PASS),
        (Verdict.FAIL, Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE),
    ],
)
def test_either_control_passing_makes_the_control_pass(
    heavy: Verdict, shared: Verdict, expected: Verdict
) -> None:
    """If this fails, a passing control of one family of parts is hidden by the other control's FAIL."""
    assert c5.controls_verdict(heavy, shared) is expected


def test_the_n_parts_control_has_cells_at_every_n_on_the_claims_truth() -> None:
    """If this fails, the n-parts' control lacks a cell of the claim's n grid, uses another truth or ball, or
    draws the claim's own pairs."""

    class Seeds:
        fidelity = c5.Fidelity.QUICK

        def seed_for(self, *key: object) -> int:
            return hash(key) % 2**31

        def seeds_or(self, design: int) -> int:
            return design

    cells = c5._cells(Seeds())  # type: ignore[arg-type]
    shared = [c for c in cells if c.params["arm"] == "shared-control"]
    assert sorted({c.params["n"] for c in shared}) == list(c5.N_GRIDS[c5.Fidelity.QUICK])
    assert {c.params["m"] for c in shared} == {c5.SHARED_CONTROL_M}
    assert len(shared) == len(c5.N_GRIDS[c5.Fidelity.QUICK]) * c5.SEEDS[c5.Fidelity.QUICK]
    assert c5.radius_of("shared-control") == c5.radius_of("claim")
    claim_seeds = {c.seed for c in cells if c.params["arm"] == "claim"}
    assert not claim_seeds & {c.seed for c in shared}


@pytest.mark.parametrize("table", ["full_2671.jsonl.gz", "full_3931.jsonl.gz"])
def test_the_offset_free_sscrl_rate_passes_the_stability_test(table: str) -> None:
    """If this fails, part 2's offset-free rate has a delete-one move beyond c = 4 root mean square moves on a
    committed full run (contract v4: a judged statistic without jumps), or it is no longer the rate of the
    differences D(m) = G_cv(m) - G_cv(2m) the rule states."""
    path = Path(__file__).resolve().parents[2] / "results" / "c5" / table
    records = replay.read_cells(path, "C5")
    data = c5.Series(records, 64)
    n = c5.N_FOR_M[Fidelity.FULL]
    window = [m for m in c5.M_GRIDS[Fidelity.FULL] if data.usable(("claim", "shared", n, m))]
    values = c5.differences(data, "claim", "shared", n, window)
    x = c5.doublings(window)
    assert values.shape == (64, len(x)) and len(x) >= c5.MIN_DIFFERENCES
    estimate = seed_rate(x, values, 0.999).exponent
    rows = np.array([seed_rate(x, np.delete(values, i, axis=0), 0.999).exponent for i in range(64)])
    assert influence_ratio(estimate, rows) <= INFLUENCE_BOUND
