"""C2's erm series: calibration points along a ball-constrained ERM fit's Newton path (issue 10 item 3)."""

import math

import torch

from crl.claims.c02_calibration import erm_path_points
from crl.synthetic import VMFUniform

TAU = 0.5


def test_erm_path_starts_at_the_constant_score_ends_converged_and_respects_the_bound() -> None:
    """If this fails, the erm series does not follow the fit from theta = 0 to convergence, or a point on the
    path breaks E* - E <= sqrt((2/tau)(L - L*)) beyond its error (C2's theorem, for every s)."""
    result = erm_path_points(TAU, 8, "independent", 4000, torch.Generator().manual_seed(0))
    x, x_se, y, y_se = (result[k] for k in ("excess", "excess_se", "gap", "gap_se"))
    assert len(x) >= 3 and result["converged"] and result["kkt_residual"] <= 1e-8
    constant_gap = VMFUniform(3, 4.0).optimal_auc() - 0.5
    assert abs(y[0] - constant_gap) <= 4.0 * y_se[0], (
        "theta = 0 is the constant score: E = 1/2 (ties count 1/2)"
    )
    assert x[-1] < x[0] / 10.0, "the fit ends far below the constant score's excess risk"
    for xi, xs, yi, ys in zip(x, x_se, y, y_se, strict=True):
        assert yi <= math.sqrt(2.0 * max(xi + 4.0 * xs, 0.0) / TAU) + 4.0 * ys
