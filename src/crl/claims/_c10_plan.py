"""C10's fixed constants and grids per fidelity (docs/claims/C10.md)."""

from dataclasses import dataclass

from crl.claims.context import Fidelity
from crl.synthetic import AsymmetricSphere

MODEL = AsymmetricSphere(3, kappa=8.0, anchor_kappa=2.0, negative_law="anchor")
TAU = 0.5
TAU_PAIR = (0.25, 1.0)
K_BOUND = 0.1
N_BOUND = -0.5 + 0.05
REFERENCE_STARTS = 2
CONVERGED_GRAD = 1e-5
"""A fit counts as converged when its largest final gradient entry is at most this (10 x L-BFGS's tolerance)."""


@dataclass(frozen=True)
class Plan:
    """One fidelity's grid (docs/claims/C10.md)."""

    k_series_n: int
    k_grid: tuple[int, ...]
    n_series_k: int
    n_grid: tuple[int, ...]
    tau_n: int
    tau_k: int
    seeds: int
    n_ref: int
    n_fresh: int
    random_starts: int


PLANS = {
    Fidelity.QUICK: Plan(256, (2, 4, 8, 16, 32), 4, (128, 256, 512, 1024, 2048), 256, 4, 8, 2048, 8192, 0),
    Fidelity.STANDARD: Plan(
        512, (2, 4, 8, 16, 32, 64), 8, (256, 512, 1024, 2048, 4096), 512, 8, 24, 4096, 16384, 0
    ),
    Fidelity.FULL: Plan(
        2048,
        (2, 4, 8, 16, 32, 64, 128, 256),
        16,
        (256, 512, 1024, 2048, 4096, 8192, 16384),
        2048,
        16,
        64,
        16384,
        65536,
        1,
    ),
}
