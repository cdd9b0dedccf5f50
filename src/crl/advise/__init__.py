"""``crl advise``: more negatives or more data? Answered at the user's (N, M) by a local doubling pilot.

The pilot's cells and their estimate D_hat with its drift (:mod:`crl.advise.local`), trained by the recipe map
(:func:`crl.train.locked.train_shape`) through the sweep engine (:mod:`crl.advise.pilot`), a held-out error per
cell (:mod:`crl.advise.heldout`), the answer with its calibrated interval, the direction's chance of being right
(:mod:`crl.advise.reliability`) and the options' costs (:mod:`crl.advise.answer`), a figure
(:mod:`crl.advise.figure`); :mod:`crl.advise.session` ties them together.
docs/advisor.md is the user's guide.
"""

from crl.advise.answer import Answer, OptionCost, Q, answer_of
from crl.advise.heldout import EvalSizes, Metric, heldout_error
from crl.advise.local import (
    LocalEstimate,
    MeasuredDifference,
    calibrate_q,
    local_estimate,
    measured_difference,
    pilot_points,
    truth_points,
)
from crl.advise.session import AdviseOptions, AdviseResult, plan_session, run_session

__all__ = [
    "AdviseOptions",
    "AdviseResult",
    "Answer",
    "EvalSizes",
    "LocalEstimate",
    "MeasuredDifference",
    "Metric",
    "OptionCost",
    "Q",
    "answer_of",
    "calibrate_q",
    "heldout_error",
    "local_estimate",
    "measured_difference",
    "pilot_points",
    "plan_session",
    "run_session",
    "truth_points",
]
