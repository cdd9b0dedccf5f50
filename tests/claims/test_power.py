"""crl.claims.power, the one power method: its normal designs against the sample mean and covariance, its
P(decide) and P(FAIL) against the noncentral-t power of a t test, and C10's and C5's parts (crl.claims.power_claims)
on constructed and committed cells."""

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from crl.claims import c05_trained_gap as c5
from crl.claims import c10_generalisation as c10
from crl.claims import power, power_claims, replay
from crl.claims.budget import part_level
from crl.claims.context import Fidelity
from crl.claims.verdict import Statistic, Verdict, verdict_above
from crl.sweep import Cell, CellRecord, SweepStore

LEVEL = 0.95
RESULTS = Path(__file__).resolve().parents[2] / "results"


def test_normal_designs_have_the_seed_sets_mean_and_covariance() -> None:
    """If this fails, a design's seeds are not drawn from N(mu, Sigma) of the measured rows: the draws' mean and
    covariance must match the sample's (here 5 seeds of 3 values: Sigma is singular, p >= S0 - 1 is allowed), and
    centred at a fitted model's curve they keep the measured covariance."""
    values = np.random.default_rng(0).normal(size=(5, 3)) * [1.0, 2.0, 0.5] + [1.0, -1.0, 3.0]
    draws = power.normal_designs(values, 50, 2000, np.random.default_rng(1)).reshape(-1, 3)
    assert draws.mean(axis=0) == pytest.approx(values.mean(axis=0), abs=0.03)
    assert np.cov(draws.T) == pytest.approx(np.cov(values.T), abs=0.03)
    centre = np.array([0.0, 5.0, -2.0])
    moved = power.normal_designs(values, 50, 2000, np.random.default_rng(1), centre).reshape(-1, 3)
    assert moved.mean(axis=0) == pytest.approx(centre, abs=0.03)
    assert np.cov(moved.T) == pytest.approx(np.cov(values.T), abs=0.03)
    with pytest.raises(ValueError, match="NaN"):
        power.normal_designs(np.array([[1.0], [np.nan], [2.0]]), 5, 2, np.random.default_rng(0))


def _mean_judge(values: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
    """A one-sided part on a mean: Student-t interval at LEVEL, PASS above 0."""
    sample = values[:, 0] + shift
    half = stats.t.ppf(0.5 + LEVEL / 2, sample.size - 1) * sample.std(ddof=1) / math.sqrt(sample.size)
    statistic = Statistic("mean", float(sample.mean()), sample.mean() - half, sample.mean() + half, LEVEL)
    return verdict_above(statistic, 0.0), statistic


def test_part_power_matches_the_noncentral_t_power_of_a_t_test() -> None:
    """If this fails, the engine's P(decide) at the shrunk truth and P(FAIL) at its mirror are not the powers a
    t test has there: 40 measured seeds, a design of 80 (larger than the set: the point of the method)."""
    values = np.random.default_rng(0).standard_normal((40, 1)) + 0.5
    spec = power.PartSpec("mean", 0.0, None, False, values, _mean_judge)
    result = power.part_power(spec, "set", 80, 2000, np.random.default_rng(1))
    sd = float(values.std(ddof=1))
    critical = stats.t.ppf(0.5 + LEVEL / 2, 79)
    noncentral = result.shrunk / sd * math.sqrt(80)
    decide = stats.nct.sf(critical, 79, noncentral) + stats.nct.cdf(-critical, 79, noncentral)
    assert result.p_decide.value == pytest.approx(decide, abs=0.035)
    assert result.failing == pytest.approx(-result.shrunk)
    assert result.p_fail.value == pytest.approx(stats.nct.cdf(-critical, 79, -noncentral), abs=0.035)
    assert result.p_decide.low <= result.p_decide.value <= result.p_decide.high


def test_shares_carry_the_exact_binomial_interval() -> None:
    """If this fails, a power figure's interval is not Clopper-Pearson: 0 of 400 must still allow about 0.9%
    (the exact upper end, 1 - 0.025^(1/400)), and 320 of 400 must match scipy's exact interval."""
    none = power.share(0, 400)
    assert none.value == 0.0 and none.low == 0.0
    assert none.high == pytest.approx(1.0 - 0.025 ** (1 / 400), rel=1e-9)
    some = power.share(320, 400)
    assert (some.low, some.high) == pytest.approx(tuple(stats.beta.ppf([0.025, 0.975], [320, 321], [81, 80])))


def test_one_seed_set_is_refused() -> None:
    """If this fails, a gate can be computed on a single seed set, which the contract does not allow."""
    with pytest.raises(ValueError, match="at least two"):
        power.design_power("C0", [power.SeedSetSpecs("one", [], [])], 10)


def _c10_records(noise: float, seeds: int) -> list[CellRecord]:
    """C10's quick plan with gaps 0.1 k^0 n^-1 (claim), flat in n (control), G(tau small) - G(tau large) = 0.02."""
    plan = c10.PLANS[Fidelity.QUICK]
    rng = np.random.default_rng(3)
    points = [("claim", plan.k_series_n, k, c10.TAU) for k in plan.k_grid]
    points += [("claim", n, plan.n_series_k, c10.TAU) for n in plan.n_grid]
    points += [("claim", plan.tau_n, plan.tau_k, tau) for tau in c10.TAU_PAIR]
    points += [("shared", n, plan.n_series_k, c10.TAU) for n in plan.n_grid]
    records = []
    for arm, n, k, tau in points:
        for r in range(seeds):
            base = 0.1 * 256 / n if arm == "claim" else 0.1
            if tau == c10.TAU_PAIR[0]:
                base += 0.02
            gap = base * (1.0 + noise * rng.standard_normal())
            params = {"arm": arm, "n": n, "k": k, "tau": tau, "replicate": r}
            records.append(
                CellRecord("C10", Cell(params, r), {"gap": gap, "grad_max": 0.0}, "run", "now", 0.0)
            )
    return records


@pytest.mark.parametrize(("noise", "decides"), [(0.02, True), (0.6, False)])
def test_c10_power_is_high_with_little_noise_and_low_with_much(
    noise: float, decides: bool, tmp_path: Path
) -> None:
    """If this fails, C10's power does not follow the noise of its seeds, or its control (flat in n) could PASS;
    one run's seeds are split into two halves, the two seed sets."""
    with SweepStore(tmp_path / "results.sqlite") as store:
        for record in _c10_records(noise, 16):
            store.put("C10@abc", record.cell, record.result, run_id="run", wall_s=0.0)
    found = power_claims.claim_power([tmp_path], "C10", Fidelity.QUICK, seeds=16, resamples=40)
    n_parts = [p for p in found.parts if p.part == "C10 secant slope of the gap in n"]
    assert len(n_parts) == 2 and all(p.measured_seeds == 8 and p.seeds == 16 for p in n_parts)
    assert all(p.estimate == pytest.approx(-1.0, abs=0.1 if decides else 1.0) for p in n_parts)
    assert all((p.p_decide.value >= 0.8) is decides for p in n_parts)
    assert all(c.p_pass.value == 0.0 for c in found.controls)
    assert "| control: C10" in power.markdown(found)


def test_c5s_parts_on_its_two_committed_runs() -> None:
    """If this fails, C5's engine does not rebuild its parts from the committed tables as the claim's own rule
    reads the records: each part's statistic from the engine's per-seed matrix must equal the rule applied to the
    table's Series directly (SCRL offset law, offset-free SSCRL rate), and both controls must be built."""
    tables = [RESULTS / "c5" / "full_2671.jsonl.gz", RESULTS / "c5" / "full_3931.jsonl.gz"]
    found = power_claims.claim_power(tables, "C5", Fidelity.FULL, seeds=64, resamples=3)
    level = part_level(c5.CLAIM.parts)
    n = c5.N_FOR_M[Fidelity.FULL]
    for table in tables:
        data = c5.Series(replay.read_cells(table, "C5"), 64)
        windows = {
            regime: [m for m in c5.M_GRIDS[Fidelity.FULL] if data.usable(("claim", regime, n, m))]
            for regime in ("independent", "shared")
        }
        _, scrl, _ = c5.exponent_part(data, "claim", "independent", n, windows["independent"], level, "r")
        _, sscrl, _ = c5.difference_part(data, "claim", "shared", n, windows["shared"], level)
        estimates = {p.part: p.estimate for p in found.parts if p.seed_set == str(table)}
        assert estimates["C5 r in m, SCRL"] == pytest.approx(scrl[0].value, abs=1e-12)
        assert estimates["C5 r in m, SSCRL (offset-free)"] == pytest.approx(sscrl[0].value, abs=1e-12)
    assert len(found.parts) == 10 and len(found.controls) == 4


def test_one_run_is_split_into_halves_of_each_arms_seeds() -> None:
    """If this fails, a single C5 table is halved by the largest seed number of any arm: its heavy-tailed control
    (more seeds than the claim at standard) would leave one half without claim cells."""
    (first, first_records), (second, second_records) = power_claims.seed_sets(
        [RESULTS / "c5" / "full_3931.jsonl.gz"], "C5"
    )
    for records in (first_records, second_records):
        claim = {r.cell.params["index"] for r in records if r.cell.params["arm"] != "control"}
        control = {r.cell.params["index"] for r in records if r.cell.params["arm"] == "control"}
        assert claim == set(range(32)) and control == set(range(32))
    assert first != second


def test_bad_sources_are_named(tmp_path: Path) -> None:
    """If this fails, a folder without a store, a claim without a power calculation or a table of another
    claim gives a traceback, not the fix."""
    with pytest.raises(ValueError, match=r"results\.sqlite"):
        replay.records_of(tmp_path, "C5")
    with pytest.raises(ValueError, match=r"claim='C11'"):
        power_claims.claim_power([tmp_path], "C11", Fidelity.QUICK, seeds=4)
    with pytest.raises(ValueError, match="reconstruction check, not a verdict"):
        power_claims.design_seeds("C8", Fidelity.FULL)
    with pytest.raises(ValueError, match="holds cells of C5"):
        replay.records_of(RESULTS / "c5" / "full_3931.jsonl.gz", "C6")


def test_the_decide_truth_never_crosses_the_bound() -> None:
    """If this fails, P(decide) is computed at a truth on the FAIL side of the bound (C6's pilot half with CI
    [-0.389, 0.881] put it at -0.389, where deciding means FAILing): a CI that contains the bound gives the truth
    bound + 2 delta on the PASS side, one that does not gives its end nearest the bound."""
    values = np.zeros((3, 1))
    lower = power.PartSpec("DD", 0.0, 0.1, False, values, _mean_judge)
    upper = power.PartSpec("r", -0.4, 0.1, True, values, _mean_judge)
    assert power.decide_truth(lower, Statistic("DD", 0.25, -0.389, 0.881)) == pytest.approx(0.2)
    assert power.decide_truth(lower, Statistic("DD", 0.5, 0.1, 0.9)) == pytest.approx(0.1)
    assert power.decide_truth(upper, Statistic("r", -1.0, -1.2, -0.9)) == pytest.approx(-0.9)
    assert power.decide_truth(upper, Statistic("r", -0.5, -0.7, -0.3)) == pytest.approx(-0.6)
