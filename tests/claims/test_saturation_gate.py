"""C6's tolerance choice, power gate and per-seed tables (crl.claims.saturation_gate)."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from crl.claims import c06_saturation as c6
from crl.claims import saturation_gate as gate
from crl.claims.context import Fidelity
from crl.sweep import Cell, CellRecord


def _records(seeds: int, sscrl_power: float = 1.0, noise: float = 0.001) -> list[CellRecord]:
    """C6's quick grid with excess(m) = (1 + (k/m)^4)/n, so m_q = k q^(-1/4): k = n^sscrl_power for SSCRL and
    sqrt(n) for SCRL and all four null arms (seed noise ``noise``, relative)."""
    rng = np.random.default_rng(5)
    records = []
    for arm in c6.ARMS:
        for n, m_values in zip(c6.PLANS[Fidelity.QUICK]["n"], c6.m_grids(Fidelity.QUICK), strict=True):
            k = float(n) ** sscrl_power if arm == "sscrl" else math.sqrt(n)
            grid = np.array(m_values, dtype=np.float64)
            for r in range(seeds):
                excess = (1.0 + (k / grid) ** 4) / n * (1.0 + noise * rng.standard_normal(grid.size))
                params = {"arm": arm, "n": n, "replicate": r, "m_grid": grid.astype(int).tolist()}
                result = {"excess": excess.tolist(), "converged": [True] * grid.size}
                records.append(CellRecord("C6", Cell(params, r), result, "run", "now", 0.0))
    return records


def test_shares_carry_the_exact_binomial_interval() -> None:
    """If this fails, a power figure's interval is not Clopper-Pearson: 0 of 200 must still allow about 1.8%
    (the exact upper end, 1 - 0.025^(1/200)), and 160 of 200 must match scipy's exact interval."""
    none = gate.share(0, 200)
    assert none.value == 0.0 and none.low == 0.0
    assert none.high == pytest.approx(1.0 - 0.025 ** (1 / 200), rel=1e-9)
    some = gate.share(160, 200)
    reference = scipy_stats.beta.ppf([0.025, 0.975], [160, 161], [41, 40])
    assert (some.low, some.high) == pytest.approx(tuple(reference), rel=1e-9)


def test_the_gate_passes_a_clear_effect_on_both_halves() -> None:
    """If this fails, the gate does not judge subsamples by C6's own rule: SSCRL's m_q ~ n against sqrt(n) in
    every other arm must decide when shrunk to its CI's lower end, FAIL when moved to -0.2, and the two alike null
    replicates must never PASS (with resamples drawn with replacement they PASSed 55% of the time: repeated
    seeds make the delete-one jackknife too narrow)."""
    curves = gate.curves_from_records(_records(24), Fidelity.QUICK)
    halves = gate.power_gate(curves, q=0.05, seeds=9, resamples=20)
    assert [h.half for h in halves] == [0, 1] and all(h.seeds_in_half == 12 for h in halves)
    for h in halves:
        assert h.estimate == pytest.approx(0.5, abs=0.05)
        assert h.p_decide.value >= 0.8 and h.p_fail.value >= 0.8 and h.p_control_pass.value == 0.0
        assert h.passes
    assert "passes" in gate.gate_markdown(halves, 0.05, 9)
    with pytest.raises(ValueError, match="without replacement"):
        gate.power_gate(curves, q=0.05, seeds=12, resamples=2)


def test_the_gate_fails_where_the_data_cannot_decide() -> None:
    """If this fails, the gate can pass whatever the data: with seed noise of 30% and no effect the shrunk truth
    sits at the CI's lower end far below 0, the rule cannot decide, and the gate must fail."""
    curves = gate.curves_from_records(_records(24, sscrl_power=0.5, noise=0.3), Fidelity.QUICK)
    halves = gate.power_gate(curves, q=0.05, seeds=9, resamples=20)
    assert not all(h.passes for h in halves)


def test_q_is_chosen_by_censoring_then_precision_never_by_the_effect() -> None:
    """If this fails, the pilot's criterion changed: a q that censors some m_q loses to one that does not, and
    among the uncensored the smallest jackknife se wins; DD's value never enters."""
    curves = gate.curves_from_records(_records(12, noise=0.02), Fidelity.QUICK)
    chosen, table = gate.choose_q(curves, (0.001, 0.05, 0.2))
    by_q = {row.q: row for row in table}
    assert by_q[0.001].censored > 0
    uncensored = [row for row in table if row.censored == 0]
    assert chosen == min(uncensored, key=lambda row: (row.se, row.q)).q
    assert "Chosen: q = " in gate.tolerance_markdown(chosen, table)


def test_a_fit_that_did_not_converge_keeps_the_gate_from_passing() -> None:
    """If this fails, the gate judges subsamples more leniently than the rule judges the run: one unconverged fit
    makes C6 INCONCLUSIVE, so no subsample may decide."""
    records = _records(24)
    records[0].result["converged"][0] = False
    halves = gate.power_gate(gate.curves_from_records(records, Fidelity.QUICK), q=0.05, seeds=9, resamples=5)
    assert all(h.p_decide.value == 0.0 and h.p_fail.value == 0.0 and not h.passes for h in halves)


def _one_m_cell(n: int, converged: bool) -> CellRecord:
    """An SSCRL cell at ``n``, replicate 0, holding one value of m."""
    params = {"arm": "sscrl", "n": n, "replicate": 0}
    return CellRecord("C6", Cell(params, 0), {"excess": [1.0], "converged": [converged]}, "run", "now", 0.0)


def test_cells_are_read_on_the_fidelitys_own_n_grid() -> None:
    """If this fails, a finer run's cells read at a coarser fidelity keep the n outside its plan (standard's gate
    on the full pilot would use n = 512), or a grid the cells do not cover gives a KeyError instead of a message
    naming the fidelity."""
    records = _records(12)
    curves = gate.curves_from_records([*records, _one_m_cell(128, converged=False)], Fidelity.QUICK)
    assert curves.grid_n == tuple(c6.PLANS[Fidelity.QUICK]["n"]) and curves.unconverged == 0
    with pytest.raises(ValueError, match=r"fidelity='standard'.*none at n = \[128, 256\]"):
        gate.curves_from_records(records, Fidelity.STANDARD)
    short = [r for r in records if r.cell.params["n"] != 4]
    with pytest.raises(ValueError, match="1 values of m"):
        gate.curves_from_records([*short, _one_m_cell(4, converged=True)], Fidelity.QUICK)
