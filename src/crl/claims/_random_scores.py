"""The models and random scores shared by C1 and C2: three models with exact answers and random scores on them.

Models: ``VMFUniform(3, kappa=4)``, ``GaussianTwoTower(4, rho=0.6)`` and ``DiscreteLatent([3, 4, 5])``. Scores:
random :class:`~crl.metrics.risk.FeatureScore` objects for the continuous models (closed-form log Z_s and score
laws) and random score tables for the discrete one (everything exact by enumeration).
"""

import torch

from crl.metrics.risk import FeatureScore, FiniteLaw, ideal_feature_score
from crl.synthetic import DiscreteLatent, GaussianTwoTower, VMFUniform
from crl.synthetic.base import GroundTruth

TAU = 0.5
"""Default temperature of the random scores (C1's tau)."""
RHO = 0.6
"""Correlation rho of the Gaussian two-tower model."""
GAUSS_DIM = 4
"""Dimension of the Gaussian two-tower model."""


def make_model(name: str) -> GroundTruth:
    """The three models of part (a) (module docstring)."""
    if name == "vmf":
        return VMFUniform(3, kappa=4.0)
    if name == "gaussian":
        return GaussianTwoTower(GAUSS_DIM, rho=RHO)
    return DiscreteLatent([3, 4, 5], class_weights=[0.5, 0.3, 0.2])


def random_feature_score(
    truth: GroundTruth, index: int, generator: torch.Generator, tau: float = TAU
) -> FeatureScore:
    """A random score for a continuous model: cycles through four kinds by ``index``.

    0: a random linear map ``x -> a G x`` (G standard normal, a log-uniform in [0.1, 10] times tau);
    1: random MLP features ``x -> A tanh(B x)`` (16 hidden units); 2: s* perturbed,
    ``x -> (f*(x) + eps a G x)`` with eps log-uniform in [1e-3, 1]; 3: a random direction with the curvature of
    s* rescaled (Gaussian model) or a rotation of s* (sphere).
    """
    d = truth.dim
    ideal = ideal_feature_score(truth, tau)
    assert ideal is not None
    kind = index % 4
    scale = tau * float(10.0 ** (2.0 * torch.rand((), generator=generator, dtype=torch.float64) - 1.0))
    g = torch.randn(d, d, generator=generator, dtype=torch.float64)
    curvature = ideal.curvature * float(2.0 * torch.rand((), generator=generator, dtype=torch.float64))
    if kind == 0:
        return FeatureScore(lambda x: x @ (scale * g).T, curvature=curvature)
    if kind == 1:
        inner = torch.randn(16, d, generator=generator, dtype=torch.float64)
        outer = scale * torch.randn(d, 16, generator=generator, dtype=torch.float64) / 4.0
        return FeatureScore(lambda x: torch.tanh(x @ inner.T) @ outer.T, curvature=curvature)
    if kind == 2:
        eps = float(10.0 ** (-3.0 * torch.rand((), generator=generator, dtype=torch.float64)))
        base = ideal.features
        return FeatureScore(
            lambda x: base(x) + eps * tau * (x @ g.T), curvature=ideal.curvature * (1.0 + eps)
        )
    rotation, _ = torch.linalg.qr(g)
    base = ideal.features
    return FeatureScore(lambda x: base(x @ rotation.T), curvature=curvature)


def random_table(law: FiniteLaw, index: int, generator: torch.Generator, tau: float = TAU) -> torch.Tensor:
    """A random score table: pure noise (even index) or ``tau log(r + delta)`` plus noise (odd index)."""
    shape = law.positive_probs.shape
    noise = torch.randn(shape, generator=generator, dtype=torch.float64)
    scale = float(10.0 ** (2.0 * torch.rand((), generator=generator, dtype=torch.float64) - 1.0))
    if index % 2 == 0:
        return tau * scale * noise
    delta = float(10.0 ** (-3.0 * torch.rand((), generator=generator, dtype=torch.float64)))
    eps = float(10.0 ** (-3.0 * torch.rand((), generator=generator, dtype=torch.float64)))
    return tau * torch.log(torch.exp(law.log_ratio()) + delta) + tau * eps * noise
