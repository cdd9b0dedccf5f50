"""C5's cells: one ball-constrained ERM fit on a synthetic truth and its measurements (docs/claims/C5.md).

A cell is (arm, regime, n, m, seed index) at the fidelity's evaluation sizes; its seed derives from (arm, n, seed
index) only, so seed i draws the same n pairs at every m and in both regimes (common random numbers: the n-floor's
noise is shared along the m axis and between the regimes, and the jackknife over seeds keeps seed i's cells
together). Each anchor's negatives are drawn after the pairs, independently per cell.
"""

from typing import Any

from crl.erm.trained import erm_record, ideal_parameters
from crl.sweep import Cell
from crl.synthetic import GaussianTwoTower, VMFUniform
from crl.synthetic.base import GroundTruth

TAU = 0.5
KAPPA = 4.0
"""vMF concentration of the claim's truth: s* = tau kappa <x, y>, |s*| <= 2."""
RHO = 0.9
"""Correlation of the control's Gaussian two-tower truth."""
DIM = 3
RADIUS_FACTOR = 1.5
"""The ball's radius R = 1.5 |theta*|: contains s* with room, binds where the sample is (nearly) separable."""


def truth_of(arm: str) -> GroundTruth:
    """The claim's bounded truth (VMFUniform(3, kappa = 4)) or the control's unbounded one (GaussianTwoTower)."""
    if arm == "claim":
        return VMFUniform(DIM, KAPPA)
    if arm == "control":
        return GaussianTwoTower(DIM, RHO)
    raise ValueError(f"arm={arm!r} is not known; use 'claim' or 'control'.")


def radius_of(arm: str) -> float:
    """R = RADIUS_FACTOR |theta*| for the arm's truth."""
    return RADIUS_FACTOR * float(ideal_parameters(truth_of(arm), TAU).norm())


def erm_cell(cell: Cell) -> dict[str, Any]:
    """Fit and measure one cell (:func:`crl.erm.trained.erm_record`); failures come back as records."""
    p = cell.params
    arm = str(p["arm"])
    return erm_record(
        truth_of(arm),
        n=int(p["n"]),
        m=int(p["m"]),
        tau=TAU,
        regime=p["regime"],
        radius=radius_of(arm),
        seed=cell.seed,
        n_eval=int(p["n_eval"]),
        n_bias=int(p["n_bias"]),
    )
