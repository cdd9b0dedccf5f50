"""crl.claims.power: the resampling engine against the noncentral-t power of a one-sample t test, and C10's and
C5's part powers on constructed cells whose verdicts are known."""

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from crl.claims import c10_generalisation as c10
from crl.claims import power
from crl.claims.context import Fidelity
from crl.claims.verdict import Statistic, Verdict, verdict_above
from crl.sweep import Cell, CellRecord, SweepStore

LEVEL = 0.95


def _mean_judge(values: np.ndarray):
    """A one-sided part on a mean: Student-t interval at LEVEL, PASS above 0."""

    def judge(index: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
        sample = values[index] + shift
        half = stats.t.ppf(0.5 + LEVEL / 2, sample.size - 1) * sample.std(ddof=1) / math.sqrt(sample.size)
        statistic = Statistic("mean", float(sample.mean()), sample.mean() - half, sample.mean() + half, LEVEL)
        return verdict_above(statistic, 0.0), statistic

    return judge


def test_part_power_matches_the_noncentral_t_power_of_a_t_test() -> None:
    """If this fails, the engine's P(PASS) after shrinking is not the power a t test has at that truth: 2,000
    standard normal draws stand in for the population, 20 seeds per resample, truth moved to the CI's lower end."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal(2000) + 0.3
    spec = power.PartSpec("mean", 0.0, None, False, _mean_judge(values))
    result = power.part_power(spec, values.size, 20, 1000, np.random.default_rng(1))
    effect = result.shrunk
    critical = stats.t.ppf(0.5 + LEVEL / 2, 19)
    expected = stats.nct.sf(critical, 19, effect * math.sqrt(20))
    assert result.p_pass == pytest.approx(expected, abs=0.04)
    mirrored = stats.nct.cdf(-critical, 19, -effect * math.sqrt(20))
    assert result.failing == pytest.approx(-effect)
    assert result.p_fail == pytest.approx(mirrored, abs=0.04)


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
    """If this fails, C10's power does not follow the noise of its seeds, or its control (flat in n) could PASS."""
    seeds = 16
    with SweepStore(tmp_path / "results.sqlite") as store:
        for record in _c10_records(noise, seeds):
            store.put("C10@abc", record.cell, record.result, run_id="run", wall_s=0.0)
    parts, control = power.power_table(tmp_path, "C10", Fidelity.QUICK, resamples=40)
    by_name = {p.part: p for p in parts}
    n_part = by_name["C10 secant slope of the gap in n"]
    assert n_part.estimate == pytest.approx(-1.0, abs=0.1 if decides else 1.0)
    assert (n_part.p_decide >= 0.8) is decides
    assert control.p_pass == 0.0
    assert all(p.resamples == 40 and p.seeds == seeds for p in parts)
    assert "| control |" in power.markdown("C10", parts, control)


def test_a_run_folder_without_the_claim_is_named(tmp_path: Path) -> None:
    """If this fails, a folder without a store or without the claim's cells gives a traceback, not the fix."""
    with pytest.raises(ValueError, match=r"results\.sqlite"):
        power.stored_records(tmp_path, "C5")
    SweepStore(tmp_path / "results.sqlite").close()
    with pytest.raises(ValueError, match=r"crl verify --claims C5"):
        power.stored_records(tmp_path, "C5")
    with pytest.raises(ValueError, match=r"claim='C3'"):
        power.power_table(tmp_path, "C3", Fidelity.QUICK)
