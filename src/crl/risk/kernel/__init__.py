"""[B]'s learned kernel Q_tau^phi, its cross-entropy to the positive kernel M, and the O(1/k) gaps of Props. 1-2.

Setting ([B], docs/theory.md section 5): anchors z ~ pi, positives y ~ M(z, .), negatives ~ pi, an embedding phi onto
the unit sphere and scores s(z, z') = <phi(z), phi(z')>. With the log-partition
``log N(z) = log ∫ exp(s(z, z')/tau) pi(dz')`` the learned kernel and its divergences are

- ``log dQ(z, .)/dpi (z') = s(z, z')/tau - log N(z)``; eq. 8: ``|log dQ/dpi| <= 2/tau`` for every phi;
- ``KL(Q(z,.) || pi) = ∫ (dQ/dpi) log(dQ/dpi) dpi``; ``KL(M(z,.) || Q(z,.)) = ∫ log(dM/dQ) dM``;
- ``CE[M(z,.) || Q(z,.)] = -∫ log(dQ/dpi) dM = -(1/tau) ∫ s(z, z') M(z, dz') + log N(z)
  = KL(M||Q) - KL(M||pi)``.

[B]'s risk is ``R(phi; k, tau) = E[infonce] - log k`` (DCL variant ``R~ = E[dcl] - log k``), the loss values
coming from :func:`crl.objectives.contrastive_loss_from_scores`. Prop. 1 bounds ``∫ CE dpi - R`` by O(1/k);
Prop. 2 bounds the distance of R to the *ideal search* over k unseen points xi_i ~ pi.

**crl's choice for the ideal search (Prop. 2).** [B]'s exact normalisation of ``M_hat_k`` was not confirmed;
crl uses the unbiased importance-weighted estimate of M(z, .) on the k unseen points,
``M_hat_k(z, .) = (1/k) sum_i w_i delta_{xi_i}`` with ``w_i = dM(z, .)/dpi (xi_i)`` (total mass
``wbar = (1/k) sum_i w_i``, mean 1), the learned search ``Q_hat_k(z, {xi_i}) = softmax_i(s(z, xi_i)/tau)``,
and the cross-entropy taken, like CE[M||Q] above, relative to the reference law, here the empirical law
``pi_k = (1/k) sum_i delta_{xi_i}`` of the unseen points:
``CE[M_hat_k || Q_hat_k] = -∫ log(dQ_hat_k/dpi_k) dM_hat_k = -(1/k) sum_i w_i log(k softmax_i)``
(= KL(M_hat_k||Q_hat_k) - KL(M_hat_k||pi_k), as for the population kernels). Because ``E wbar = 1``,
``E CE[M_hat_k||Q_hat_k] - R~ = Cov(wbar, log Wbar)`` exactly (``W_j = exp(s(z, xi_j)/tau)``), an O(1/k)
quantity of the size ``(4/(tau k)) E|dM/dpi|^2`` bounds. (Relative to the counting measure instead, the
cross-entropy would exceed R by log k + O(1/k): the choice of reference law is what makes Prop. 2 an O(1/k)
statement.)

**Variance reduction.** Both gaps are O(1/k) differences of O(1) quantities, so the plain per-draw
differences have a relative error growing like sqrt(k) (C7/C8 would need k times more draws at each k). The
estimators here are algebraically rearranged, unbiased per-draw versions whose relative standard error does
not grow with k (details in :func:`integrated_cross_entropy_gap` and :func:`ideal_search_gap`); the plain
versions are returned alongside as ``naive``.

The parts, one module each: :mod:`.quadrature` (the Gauss rule on S^2), :mod:`.learned` (Q, its log-partition,
divergences and eq. 8), :mod:`.gaps` (per-draw risk and gap estimators), :mod:`.bounds` (Props. 1-2's bounds
and crl's leading-order constants), :mod:`.vmf` (closed forms for vMF kernels), :mod:`.counting` (the ideal
search's counting-measure variant, without importance weights, reported beside crl's choice).
"""

from crl.risk.kernel.bounds import (
    GapCoefficients,
    asymptotic_gap_coefficients,
    cross_entropy_gap_bounds,
    ideal_search_bound,
)
from crl.risk.kernel.counting import (
    counting_gap_limit,
    counting_search_cross_entropy,
    counting_search_gap,
)
from crl.risk.kernel.gaps import (
    GapDraws,
    contrastive_risk_draws,
    ideal_search_cross_entropy,
    ideal_search_gap,
    integrated_cross_entropy_gap,
)
from crl.risk.kernel.learned import (
    KernelDivergences,
    kernel_divergences,
    learned_log_density_ratio,
    learned_log_partition,
    temperature_bound,
)
from crl.risk.kernel.quadrature import uniform_sphere_quadrature
from crl.risk.kernel.vmf import vmf_identity_cross_entropy, vmf_kl

__all__ = [
    "GapCoefficients",
    "GapDraws",
    "KernelDivergences",
    "asymptotic_gap_coefficients",
    "contrastive_risk_draws",
    "counting_gap_limit",
    "counting_search_cross_entropy",
    "counting_search_gap",
    "cross_entropy_gap_bounds",
    "ideal_search_bound",
    "ideal_search_cross_entropy",
    "ideal_search_gap",
    "integrated_cross_entropy_gap",
    "kernel_divergences",
    "learned_log_density_ratio",
    "learned_log_partition",
    "temperature_bound",
    "uniform_sphere_quadrature",
    "vmf_identity_cross_entropy",
    "vmf_kl",
]
