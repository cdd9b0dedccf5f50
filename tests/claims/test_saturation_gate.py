"""C6's tolerance choice, power by the one method, stability test and per-seed tables (crl.claims.saturation_gate)."""

import math
from pathlib import Path

import numpy as np
import pytest

from crl.claims import c06_saturation as c6
from crl.claims import replay
from crl.claims import saturation_gate as gate
from crl.claims.context import Fidelity
from crl.stats.saturation import QBand
from crl.sweep import Cell, CellRecord

PILOT = Path(__file__).resolve().parents[2] / "results" / "c6" / "pilot_6121_full.jsonl.gz"


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


def test_the_gate_passes_a_clear_effect_on_both_halves() -> None:
    """If this fails, the one power method does not judge C6's designs by its own rule: SSCRL's m_q ~ n against
    sqrt(n) in every other arm must decide when shrunk to its CI's lower end, FAIL when moved to -0.2, and the two
    exchangeable null replicates, judged at their true DD of 0, must never PASS."""
    curves = gate.curves_from_records(_records(24), Fidelity.QUICK)
    found = gate.design_power_of(curves, tolerance=0.05, seeds=16, resamples=20)
    assert [p.seed_set for p in found.parts] == ["replicates 0-11", "replicates 12-23"]
    for part in found.parts:
        assert (
            part.estimate == pytest.approx(0.5, abs=0.05) and part.seeds == 16 and part.measured_seeds == 12
        )
        assert part.p_decide.value >= 0.8 and part.p_fail.value >= 0.8
    assert all(c.p_pass.value == 0.0 for c in found.controls)
    assert found.passes


def test_the_gate_fails_where_the_data_cannot_decide() -> None:
    """If this fails, the gate can pass whatever the data: with seed noise of 30% and no effect the shrunk truth
    sits at the CI's lower end far below 0, the rule cannot decide, and the gate must fail."""
    curves = gate.curves_from_records(_records(24, sscrl_power=0.5, noise=0.3), Fidelity.QUICK)
    assert not gate.design_power_of(curves, tolerance=0.05, seeds=12, resamples=20).passes


def test_the_control_is_judged_at_its_true_value_of_zero() -> None:
    """If this fails, a design larger than the seed set takes the set's estimate of the control's DD for its truth:
    null2 SSCRL growing like n^0.75 in place of sqrt(n) gives the control a measured DD of 0.25, which 64 seeds
    would PASS; its true value is 0 (two exchangeable null replicates), at which it must not."""
    records = [r for r in _records(24, noise=0.01) if r.cell.params["arm"] != "null2-sscrl"] + [
        r for r in _records(24, sscrl_power=0.75, noise=0.01) if r.cell.params["arm"] == "sscrl"
    ]
    for record in records[-120:]:
        record.cell.params["arm"] = "null2-sscrl"
    curves = gate.curves_from_records(records, Fidelity.QUICK)
    found = gate.design_power_of(curves, tolerance=0.05, seeds=64, resamples=20)
    assert all(c.p_pass.value == 0.0 for c in found.controls)


def test_the_band_dd_passes_the_stability_test_on_the_pilot() -> None:
    """If this fails, C6's registered statistic (log m_q averaged over its band) has a delete-one move beyond
    c = 4 root mean square moves on the committed pilot's 64 seeds or on either half (contract v4: a judged
    statistic without jumps)."""
    curves = gate.curves_from_records(replay.read_cells(PILOT, "C6"), Fidelity.FULL)
    for name, members in [("all", np.arange(64)), *gate.halves(curves)]:
        found = gate.stability(curves, c6.TOLERANCE, members, name)
        assert found.passes, (name, found.ratio)


def test_q_is_chosen_by_censoring_then_precision_never_by_the_effect() -> None:
    """If this fails, the pilot's criterion changed: a q that censors some m_q loses to one that does not, and
    among the uncensored the smallest jackknife se wins; DD's value never enters."""
    curves = gate.curves_from_records(_records(12, noise=0.02), Fidelity.QUICK)
    chosen, table = gate.choose_q(curves, (0.001, 0.05, 0.2, QBand(0.05, 0.2)))
    by_q = {str(row.q): row for row in table}
    assert by_q["0.001"].censored > 0
    uncensored = [row for row in table if row.censored == 0]
    assert chosen == min(uncensored, key=lambda row: row.se).q
    assert "Chosen: " in gate.tolerance_markdown(chosen, table)


def test_a_fit_that_did_not_converge_keeps_the_gate_from_passing() -> None:
    """If this fails, the gate judges designs more leniently than the rule judges the run: one unconverged fit
    makes C6 INCONCLUSIVE, so no design may decide."""
    records = _records(24)
    records[0].result["converged"][0] = False
    found = gate.design_power_of(
        gate.curves_from_records(records, Fidelity.QUICK), tolerance=0.05, seeds=9, resamples=5
    )
    assert all(p.p_decide.value == 0.0 and p.p_fail.value == 0.0 for p in found.parts) and not found.passes


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
