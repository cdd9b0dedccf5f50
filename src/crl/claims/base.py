"""What a claim is and what it returns: the contract between claim modules and `crl verify`.

A claim of docs/theory.md section 7 is a :class:`Claim` subclass with its statement, source and pre-registered
rule as class attributes and one method, ``run(ctx) -> ClaimResult``. ``run`` computes its grid through
``ctx.run_cells`` (resumable, stored in SQLite), reduces it with :mod:`crl.stats`, applies the rule to the
claim *and* to its negative control (a genuine alternative whose verdict must come out FAIL), and describes
its figures as :class:`FigureSpec` data, which the report draws (claims never import :mod:`crl.report`).

The contract lives in four modules by concern; this module gathers them under one import path:

- :mod:`crl.claims.context`: :class:`Fidelity`, :class:`ClaimContext`, :func:`code_fingerprint`;
- :mod:`crl.claims.verdict`: :class:`Verdict`, :class:`Statistic` and the verdict rules;
- :mod:`crl.claims.figure_spec`: :class:`FigureSpec`, :class:`Points`, :class:`Curve` and their builders;
- :mod:`crl.claims.result`: :class:`Claim`, :class:`ClaimResult`, :class:`ControlResult`, :class:`Role`.
"""

from crl.claims.context import ClaimContext, Fidelity, code_fingerprint
from crl.claims.figure_spec import Curve, FigureSpec, Points, bound_figure, curve, loglog_figure, points
from crl.claims.result import Claim, ClaimResult, ControlResult, Role
from crl.claims.verdict import (
    Statistic,
    Verdict,
    combine_verdicts,
    verdict_above,
    verdict_at_most,
    verdict_equivalent,
    verdict_no_violations,
    verdict_rate,
)

__all__ = [
    "Claim",
    "ClaimContext",
    "ClaimResult",
    "ControlResult",
    "Curve",
    "Fidelity",
    "FigureSpec",
    "Points",
    "Role",
    "Statistic",
    "Verdict",
    "bound_figure",
    "code_fingerprint",
    "combine_verdicts",
    "curve",
    "loglog_figure",
    "points",
    "verdict_above",
    "verdict_at_most",
    "verdict_equivalent",
    "verdict_no_violations",
    "verdict_rate",
]
