"""Empirical risk minimisation on the synthetic truths (claim C5; C2's erm series).

- :mod:`crl.erm.lifted`: score families linear in lifted features, ``x^T W y + b^T y (+ e|y|^2)``, and [A]'s L_hat
  on a fixed sample (SCRL n x m or SSCRL m shared negatives) with its gradient and Hessian;
- :mod:`crl.erm.convex`: the ERM over a norm ball, solved to a stated KKT tolerance, reporting whether the ball
  binds;
- :mod:`crl.erm.trained`: sample, fit and measure one cell (G, the excess risk, E* - E) with crl's exact
  estimators;
- :mod:`crl.erm.mlp`: a non-convex family, a small MLP embedding onto the sphere, fitted by L-BFGS from restarts.
"""

from crl.erm.convex import KKT_TOLERANCE, BallFit, fit_ball, gradient_mapping_norm, project_ball
from crl.erm.lifted import EmpiricalRisk, LiftedFamily, RiskDerivatives
from crl.erm.mlp import EmbeddingScore, MlpFit, SphereEmbedding, fit_mlp, mlp_empirical_risk
from crl.erm.trained import (
    ErmRecord,
    TrainedMetrics,
    erm_record,
    family_for,
    ideal_parameters,
    sample_risk,
    trained_metrics,
)

__all__ = [
    "KKT_TOLERANCE",
    "BallFit",
    "EmbeddingScore",
    "EmpiricalRisk",
    "ErmRecord",
    "LiftedFamily",
    "MlpFit",
    "RiskDerivatives",
    "SphereEmbedding",
    "TrainedMetrics",
    "erm_record",
    "family_for",
    "fit_ball",
    "fit_mlp",
    "gradient_mapping_norm",
    "ideal_parameters",
    "mlp_empirical_risk",
    "project_ball",
    "sample_risk",
    "trained_metrics",
]
