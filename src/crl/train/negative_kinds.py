"""The kinds of ``[loss] negatives`` and what each one is: one table that the config's checks
(:mod:`crl.train.config`), the run's builders (:mod:`crl.train.build`) and the advisor read.

A new kind is its name in :data:`NegativesName`, its facts in :data:`NEGATIVES_FACTS` and its sampler in
:data:`crl.train.build.NEGATIVE_KINDS`. The facts live here, below both the config and the builders, because the
builders import the config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from crl._vocab import Regime

__all__ = ["NEGATIVES_FACTS", "NegativesFacts", "NegativesName", "negatives_where"]

NegativesName = Literal[
    "in_batch", "shared_pool", "independent_pool", "queue", "mined", "fixed_pool", "fixed_sets"
]
"""The values of ``[loss] negatives``."""


@dataclass(frozen=True)
class NegativesFacts:
    """What one ``[loss] negatives`` kind is.

    Attributes:
        regime: "shared" (SSCRL: one set of m negatives for the batch) or "independent" (SCRL: m of its own per
            anchor, so the loss is one-sided).
        sized: m is ``[loss] n_negatives`` (at least 1); otherwise m comes from the batch (K n - 1) and
            n_negatives stays 0.
        pooled: the negatives are drawn from the first ``[loss] pool_size`` training pairs, which it reads.
        holds_inputs: the negatives are inputs embedded at each step (P numbers each), not stored embeddings.
        mined: hard negatives from an index of the pool, chosen by ``mine_window``, ``mine_margin`` and
            ``mine_refresh_every``.
        fastclip: ``estimator = "fastclip"`` takes it (a fixed pool of shared negatives).
        per_sample_temperature: ``temperature = "per_sample"`` takes it.
        fixed: [A]'s fixed negative sample, chosen once by a keyed hash over the source's candidates
            (:mod:`crl.negatives.fixed`): every step scores each anchor against all m of its negatives exactly
            (:func:`crl.objectives.masked_contrastive_loss`), one-sided, so ``symmetric`` is refused.
    """

    regime: Regime
    sized: bool = True
    pooled: bool = False
    holds_inputs: bool = True
    mined: bool = False
    fastclip: bool = False
    per_sample_temperature: bool = False
    fixed: bool = False

    @property
    def per_anchor(self) -> bool:
        """Each anchor has m negatives of its own (n m rows per step), not m shared by the batch."""
        return self.regime == "independent"


NEGATIVES_FACTS: dict[str, NegativesFacts] = {
    "in_batch": NegativesFacts("shared", sized=False, per_sample_temperature=True),
    "shared_pool": NegativesFacts("shared", pooled=True, fastclip=True, per_sample_temperature=True),
    "independent_pool": NegativesFacts("independent", pooled=True),
    "queue": NegativesFacts("shared", holds_inputs=False),
    "mined": NegativesFacts("independent", mined=True),
    "fixed_pool": NegativesFacts("shared", fixed=True),
    "fixed_sets": NegativesFacts("independent", fixed=True),
}
"""The facts of each ``[loss] negatives`` kind, in the order the config lists them."""


def negatives_where(fact: Callable[[NegativesFacts], bool]) -> tuple[str, ...]:
    """The kinds whose facts satisfy ``fact``, in the order of :data:`NEGATIVES_FACTS`."""
    return tuple(name for name, facts in NEGATIVES_FACTS.items() if fact(facts))
