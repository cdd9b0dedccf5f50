"""The pre-registered claims of docs/theory.md section 7 (one module ``cNN_<name>.py`` each) and their contract.

Claim authors import everything from here::

    from crl.claims import Claim, ClaimContext, Fidelity, Statistic, Verdict, loglog_figure, points

See docs/claims_engine.md for how to add a claim.
"""

from crl.claims import base
from crl.claims.base import *  # noqa: F403  (the contract's names; their one list is base.__all__)
from crl.claims.registry import Registry, UnknownClaimError, default_registry, discover_claims, validate_claim

__all__ = [
    *base.__all__,
    "Registry",
    "UnknownClaimError",
    "default_registry",
    "discover_claims",
    "validate_claim",
]
