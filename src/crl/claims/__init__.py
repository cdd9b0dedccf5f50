"""The pre-registered claims of docs/theory.md section 7 (one module ``cNN_<name>.py`` each) and their contract.

Claim authors import everything from here::

    from crl.claims import Claim, ClaimContext, Fidelity, Statistic, Verdict, loglog_figure, points

See docs/claims_engine.md for how to add a claim.
"""

from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    ControlResult,
    Curve,
    Fidelity,
    FigureSpec,
    Points,
    Statistic,
    Verdict,
    bound_figure,
    combine_verdicts,
    curve,
    loglog_figure,
    points,
    verdict_above,
    verdict_at_most,
    verdict_equivalent,
    verdict_no_violations,
    verdict_rate,
)
from crl.claims.registry import Registry, UnknownClaimError, default_registry, discover_claims, validate_claim

__all__ = [
    "Claim",
    "ClaimContext",
    "ClaimResult",
    "ControlResult",
    "Curve",
    "Fidelity",
    "FigureSpec",
    "Points",
    "Registry",
    "Statistic",
    "UnknownClaimError",
    "Verdict",
    "bound_figure",
    "combine_verdicts",
    "curve",
    "default_registry",
    "discover_claims",
    "loglog_figure",
    "points",
    "validate_claim",
    "verdict_above",
    "verdict_at_most",
    "verdict_equivalent",
    "verdict_no_violations",
    "verdict_rate",
]
