"""``crl advise``: more negatives or more data? Answered from a pilot of the user's own training runs.

A pilot over (n, m) (:mod:`crl.advise.pilot`) through the sweep engine, a held-out error per cell
(:mod:`crl.advise.heldout`), a fitted error surface with an n-m interaction (:mod:`crl.advise.surface`) and
Student-t intervals over seeds (:mod:`crl.advise.intervals`), advice at the user's n (:mod:`crl.advise.advice`),
a figure (:mod:`crl.advise.figure`) and a check against cells the pilot did not see (:mod:`crl.advise.check`);
:mod:`crl.advise.session` ties them together. docs/advisor.md is the user's guide.
"""

from crl.advise.advice import Advice, advise
from crl.advise.check import CheckSummary, check_points, summarise_checks
from crl.advise.heldout import EvalSizes, Metric, heldout_error
from crl.advise.pilot import PilotDesign, PilotPoint, design_pilot, pilot_cell, pilot_config
from crl.advise.session import AdviseOptions, AdviseResult, plan_session, run_session
from crl.advise.surface import Interval, SurfaceFit, SurfaceParams, fit_seed_surface, fit_surface, t_interval

__all__ = [
    "Advice",
    "AdviseOptions",
    "AdviseResult",
    "CheckSummary",
    "EvalSizes",
    "Interval",
    "Metric",
    "PilotDesign",
    "PilotPoint",
    "SurfaceFit",
    "SurfaceParams",
    "advise",
    "check_points",
    "design_pilot",
    "fit_seed_surface",
    "fit_surface",
    "heldout_error",
    "pilot_cell",
    "pilot_config",
    "plan_session",
    "run_session",
    "summarise_checks",
    "t_interval",
]
