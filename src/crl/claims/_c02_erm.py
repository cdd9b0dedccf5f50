"""C2's erm series: calibration points of models fit to convergence, along their optimisation paths (issue 10).

One cell fits the ball-constrained ERM of :mod:`crl.erm` (C5's class ``x^T W y + b^T y`` and solver, ball
``1.5 |theta*|``) on ``VMFUniform(3, kappa=4)`` with n pairs and a fixed negative set of m (SCRL n x m or SSCRL m
shared) at one tau, records every Newton iterate from theta = 0 to the KKT tolerance, and measures each iterate's
``(L(s) - L*, E* - E(s))`` by :func:`crl.claims._random_scores.feature_point`.
"""

from typing import Any

import torch

from crl._vocab import Regime
from crl.claims._random_scores import KAPPA, feature_point
from crl.erm import fit_ball, ideal_parameters, sample_risk
from crl.synthetic import VMFUniform

ERM_PAIRS = 1024
RADIUS_FACTOR = 1.5


def erm_path_points(
    tau: float, m: int, regime: Regime, n_anchors: int, generator: torch.Generator
) -> dict[str, Any]:
    """Per iterate of one ERM fit's Newton path: x, its se, y, its se (lists), and whether the fit converged."""
    truth = VMFUniform(3, KAPPA)
    risk = sample_risk(truth, ERM_PAIRS, m, tau, regime, generator)
    path: list[torch.Tensor] = [torch.zeros(risk.family.n_params, dtype=torch.float64)]
    radius = RADIUS_FACTOR * float(ideal_parameters(truth, tau).norm())
    fit = fit_ball(risk, radius, on_step=path.append)
    found = [feature_point(truth, risk.family.score(theta), tau, n_anchors, generator) for theta in path]
    result: dict[str, Any] = {
        key: [f[key] for f in found] for key in ("excess", "excess_se", "gap", "gap_se")
    }
    return {**result, "converged": fit.converged, "kkt_residual": fit.kkt_residual, "active": fit.active}
