"""Closed forms of the kernel quantities for vMF kernels on the sphere (the references of C7 and C9)."""

from crl._validate import check_tau


def vmf_identity_cross_entropy(log_normaliser_tau: float, mean_resultant_kappa: float, tau: float) -> float:
    """Closed form of ``CE[M(z,.)||Q(z,.)]`` for phi = id, M = vMF(z, kappa), pi uniform on S^{d-1}.

    ``CE = -(1/tau) E_{y ~ vMF(z, kappa)} <z, y> + log E_{u ~ pi} exp(<z, u>/tau) = -A_d(kappa)/tau + log C_d(1/tau)``
    (the same for every z).

    Args:
        log_normaliser_tau: ``log C_d(1/tau)`` (e.g. ``VMFUniform(d, 1/tau).log_normaliser``).
        mean_resultant_kappa: ``A_d(kappa) = E<z, y>``.
        tau: temperature > 0.
    """
    return -mean_resultant_kappa / check_tau(tau) + log_normaliser_tau


def vmf_kl(
    kappa_from: float,
    kappa_to: float,
    mean_resultant_from: float,
    log_normaliser_from: float,
    log_normaliser_to: float,
) -> float:
    """``KL(vMF(z, kappa_from) || vMF(z, kappa_to))`` for the same mean direction, in closed form.

    ``= (kappa_from - kappa_to) A_d(kappa_from) - log C_d(kappa_from) + log C_d(kappa_to)`` (log densities
    ``kappa <z, y> - log C_d(kappa)`` against the uniform law). With phi_c(z) = (sqrt(c) z, sqrt(1-c)), the
    learned kernel is ``Q = vMF(z, c/tau)``, so ``min_c KL(M||Q)`` is 0 when ``kappa tau <= 1`` and
    ``KL(vMF(kappa) || vMF(1/tau))`` otherwise (C9).
    """
    return (kappa_from - kappa_to) * mean_resultant_from - log_normaliser_from + log_normaliser_to
