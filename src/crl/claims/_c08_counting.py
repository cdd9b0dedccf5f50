"""C8's counting-measure variant, reported beside crl's reconstruction and not judged.

``M_hat_k^# = (1/k) sum_i delta_{xi_i}`` (no importance weights; :mod:`crl.metrics.risk.kernel.counting`): its
gap tends to ``D = ∫ (E_{M(z,.)} s - E_pi s)/tau dpi(z)`` (DCL: equal to D at every k; InfoNCE: D - O(1/k)),
not to 0. Each (series, form) gets its own rate, fitted like the claim's, and D by quadrature.
"""

from collections.abc import Mapping, Sequence

from crl._vocab import KernelForm
from crl.claims._kernel_series import FORM_ORDER, KAPPA, SERIES, fit_series, series_label
from crl.claims._sphere_kernel import ANCHOR_QUADRATURE, DIM, QUADRATURE, DrawSummary, sphere_embedding
from crl.claims.context import ClaimContext
from crl.claims.verdict import Statistic
from crl.metrics.risk import uniform_sphere_quadrature
from crl.metrics.risk.kernel import counting_gap_limit
from crl.synthetic.vmf import VMFUniform

Limits = Mapping[tuple[str, float], float]
"""(phi kind, tau) -> D."""


def counting_limits(phi_seed: int) -> dict[tuple[str, float], float]:
    """D for every (phi, tau) series, by the product Gauss rules of :mod:`crl.claims._sphere_kernel`."""
    model = VMFUniform(DIM, KAPPA)
    anchors, anchor_weights = uniform_sphere_quadrature(*ANCHOR_QUADRATURE)
    nodes, weights = uniform_sphere_quadrature(*QUADRATURE)
    log_m = model.log_positive_density(anchors[:, None, :], nodes[None, :, :])
    limits = {}
    for kind, tau in SERIES:
        embed = sphere_embedding(kind, phi_seed)
        scores = embed(anchors) @ embed(nodes).T
        limits[(kind, tau)] = counting_gap_limit(
            scores, log_m, tau=tau, support_weights=weights, anchor_weights=anchor_weights
        )
    return limits


def counting_statistics(
    ctx: ClaimContext,
    gaps: Mapping[tuple[str, float, KernelForm], Sequence[DrawSummary]],
    ks: Sequence[int],
    limits: Limits,
) -> list[Statistic]:
    """The rate of the counting-measure variant's |gap| vs k for every (series, form), naming D (not judged).

    Args:
        gaps: (phi kind, tau, form) -> the variant's per-draw gap summary at each k of ``ks``.
    """
    statistics = []
    for kind, tau in SERIES:
        for form in FORM_ORDER:
            summaries = gaps[(kind, tau, form)]
            series = fit_series(
                series_label(form, kind, tau),
                ks,
                [s.mean for s in summaries],
                [s.se for s in summaries],
                ctx.rng("counting-rate", kind, tau, form),
                level=ctx.level,
            )
            statistics.append(
                Statistic.from_rate(
                    f"counting-measure variant (not judged): rate of |gap| vs k, {series.label}; "
                    f"gap at k = {ks[-1]}: {series.values[-1]:.4g}, limit D = {limits[(kind, tau)]:.4g}",
                    series.fit,
                )
            )
    return statistics
