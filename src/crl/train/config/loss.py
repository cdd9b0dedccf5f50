"""``[loss]``: the loss family, its negatives, and the fields of its estimator (:class:`EstimatorFields`) and
its temperature (:class:`TemperatureFields`), each checked by its own part of the validator."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from crl._vocab import Form, Regime
from crl.train.config.base import Section, choice_in_words
from crl.train.negative_kinds import NEGATIVES_FACTS, NegativesName, negatives_where

_GAMMA_FIELDS = ("gamma", "gamma_schedule", "gamma_decay_steps")
"""Fields that only ``estimator = "fastclip"`` reads."""


class EstimatorFields(Section):
    """``[loss]`` fields of the estimator (minibatch or fastclip) and of the pool the negatives come from."""

    estimator: Literal["minibatch", "fastclip"] = Field(
        default="minibatch",
        description="minibatch: the loss over the step's own negatives. fastclip: SogCLR/FastCLIP's moving "
        "average u_i of each item's pool mean (1/m) sum_j exp(Delta_ij/tau), so the gradient targets the gcl "
        "loss over all m = pool_size negatives while a step embeds n_negatives of them (form = 'gcl', "
        "negatives = 'shared_pool').",
    )
    gamma: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="fastclip: the weight of the step's estimate in u_i <- (1 - gamma) u_i + gamma g_hat_i; "
        "with gamma_schedule = 'cosine' the floor the schedule decays to (1 uses only the step's negatives).",
    )
    gamma_schedule: Literal["constant", "cosine"] = Field(
        default="constant",
        description="fastclip: constant gamma, or FastCLIP's cosine gamma_t = gamma + (1 - gamma) "
        "(1 + cos(pi min(t, D) / D)) / 2 from 1 at step 0 down to gamma at D = gamma_decay_steps.",
    )
    gamma_decay_steps: int = Field(
        default=0,
        ge=0,
        description="fastclip with gamma_schedule = 'cosine': D, the steps to the floor (0: optim.total_steps).",
    )
    pool_size: int = Field(
        default=0,
        ge=0,
        description="shared_pool and independent_pool: the step's n_negatives are drawn from the first pool_size "
        "training pairs, a fixed pool (fastclip's m; 0: all training pairs).",
    )


def _unmet(needs: dict[str, tuple[object, Sequence[object]]]) -> list[str]:
    """``name = value (needs ...)`` for each field whose value is not one of those it needs."""
    return [
        f"{name} = {got!r} (needs {choice_in_words(allowed)})"
        for name, (got, allowed) in needs.items()
        if got not in allowed
    ]


def check_estimator(loss: LossConfig) -> None:
    """Refuse estimator settings that cannot work together, naming the fields and the fix.

    Raises:
        ValueError: fastclip without form = 'gcl', negatives = 'shared_pool', a fixed tau or one-sided loss;
            gamma settings with the minibatch estimator; decay steps without the cosine schedule; a pool size
            with samplers that do not read it.
    """
    if loss.pool_size > 0 and not NEGATIVES_FACTS[loss.negatives].pooled:
        raise ValueError(
            f"pool_size = {loss.pool_size} needs negatives = {choice_in_words(negatives_where(lambda f: f.pooled))} "
            f"(negatives = '{loss.negatives}' does not read it); set pool_size = 0"
        )
    if loss.gamma_decay_steps > 0 and loss.gamma_schedule != "cosine":
        raise ValueError(
            f"gamma_decay_steps = {loss.gamma_decay_steps} is read only by gamma_schedule = 'cosine'; "
            "set gamma_schedule = 'cosine' or gamma_decay_steps = 0"
        )
    if loss.estimator == "minibatch":
        changed = [
            name
            for name in _GAMMA_FIELDS
            if getattr(loss, name) != EstimatorFields.model_fields[name].default
        ]
        if changed:
            raise ValueError(
                f"{', '.join(changed)} set with estimator = 'minibatch', which keeps no moving average; "
                "set estimator = 'fastclip' or remove them"
            )
        return
    wrong = _unmet(
        {
            "form": (loss.form, ("gcl",)),
            "negatives": (loss.negatives, negatives_where(lambda f: f.fastclip)),
            "symmetric": (loss.symmetric, (False,)),
            "learnable_tau": (loss.learnable_tau, (False,)),
        }
    )
    if wrong:
        raise ValueError(
            "estimator = 'fastclip' (the moving-average GCL loss over a fixed pool of shared negatives, "
            f"one-sided, at a fixed tau) does not work with {'; '.join(wrong)}"
        )


_PER_SAMPLE_FIELDS = ("tau_min", "tau_max", "tau_rho", "tau_lr", "tau_momentum")


class TemperatureFields(Section):
    """``[loss]`` fields of the temperature: one global tau, or one tau_i per training item (iSogCLR)."""

    temperature: Literal["global", "per_sample"] = Field(
        default="global",
        description="global: one tau (fixed or learnable_tau). per_sample: iSogCLR's tau_i per training item, "
        "tau_i <- clamp(tau_i - tau_lr v_i, tau_min, tau_max) with v_i the momentum of d/dtau_i of "
        "tau_i log g_i + tau_rho tau_i (form = 'gcl', one-sided, in_batch or shared_pool negatives).",
    )
    tau_min: float = Field(default=0.05, gt=0, description="per_sample: lower bound of every tau_i.")
    tau_max: float = Field(default=1.0, gt=0, description="per_sample: upper bound of every tau_i.")
    tau_rho: float = Field(
        default=0.3, ge=0, description="per_sample: the KL radius rho (larger: larger tau_i)."
    )
    tau_lr: float = Field(
        default=0.01, ge=0, description="per_sample: the step size eta of the tau_i update."
    )
    tau_momentum: float = Field(
        default=0.9, gt=0, le=1, description="per_sample: beta in v_i <- (1 - beta) v_i + beta G_i."
    )


def check_temperature(loss: LossConfig) -> None:
    """Refuse per-sample settings that cannot work, naming the fields and the fix.

    Raises:
        ValueError: per-sample fields with temperature = 'global'; per_sample with another form than gcl, a
            symmetric loss, a learnable tau, the fastclip estimator, other negatives than in_batch/shared_pool,
            or tau outside [tau_min, tau_max].
    """
    if loss.temperature == "global":
        changed = [
            name
            for name in _PER_SAMPLE_FIELDS
            if getattr(loss, name) != TemperatureFields.model_fields[name].default
        ]
        if changed:
            raise ValueError(
                f"{', '.join(changed)} set with temperature = 'global'; set temperature = 'per_sample' or remove them"
            )
        return
    wrong = _unmet(
        {
            "form": (loss.form, ("gcl",)),
            "symmetric": (loss.symmetric, (False,)),
            "learnable_tau": (loss.learnable_tau, (False,)),
            "estimator": (loss.estimator, ("minibatch",)),
            "negatives": (loss.negatives, negatives_where(lambda f: f.per_sample_temperature)),
        }
    )
    if wrong:
        raise ValueError(
            "temperature = 'per_sample' (iSogCLR: the gcl loss, one-sided, shared negatives, tau_i updated by its "
            f"own rule) does not work with {'; '.join(wrong)}"
        )
    if not loss.tau_min <= loss.tau <= loss.tau_max:
        raise ValueError(
            f"tau = {loss.tau} (every tau_i's start) must lie in [tau_min, tau_max] = [{loss.tau_min}, "
            f"{loss.tau_max}]"
        )


class LossConfig(EstimatorFields, TemperatureFields):
    """``[loss]``: the contrastive objective, its negatives and its estimator (docs/theory.md sections 1-2,
    docs/estimators.md; the estimator's fields are in :class:`EstimatorFields`, the temperature's in
    :class:`TemperatureFields`)."""

    form: Form = Field(
        default="infonce",
        description="infonce = log(1 + sum_j exp(Delta_ij/tau)); dcl = log sum_j exp(Delta_ij/tau); "
        "gcl = tau log((1/m) sum_j exp(Delta_ij/tau)) ([A]'s L_hat).",
    )
    symmetric: bool = Field(
        default=False, description="Average the x->y and y->x directions (CLIP); shared regime only."
    )
    tau: float = Field(default=0.1, gt=0, description="Temperature tau (its initial value when learnable).")
    learnable_tau: bool = Field(
        default=False, description="Learn tau (stored as log(1/tau), clamped at max_inverse_tau)."
    )
    max_inverse_tau: float = Field(
        default=100.0, gt=0, description="Upper bound on 1/tau for a learnable tau."
    )
    negatives: NegativesName = Field(
        default="in_batch",
        description="Negative sampler. Regime 'shared' (SSCRL): in_batch (the other positives of the global "
        "batch, m = K*n - 1), shared_pool (m pool items per step, shared by the batch), queue (the m most "
        "recent positives). Regime 'independent' (SCRL): independent_pool (m pool items per anchor), mined "
        "(m hard negatives per anchor from an index of the pool: crl.negatives.mining). Fixed, [A]'s exact L_hat "
        "over all m negatives at every step (crl.negatives.fixed): fixed_pool (SSCRL: one pool of m of the "
        "source's candidates, chosen once by a keyed hash), fixed_sets (SCRL: anchor i's own set S_i of m).",
    )
    n_negatives: int = Field(
        default=0,
        ge=0,
        description="m for shared_pool, independent_pool, queue, mined, fixed_pool and fixed_sets (0 with in_batch, "
        "where m = K*n - 1).",
    )
    mine_window: list[int] = Field(
        default_factory=lambda: [10, 100],
        min_length=2,
        max_length=2,
        description="negatives = 'mined': the 1-based ranks (lo, hi) of the candidates in each anchor's ranking.",
    )
    mine_margin: float = Field(
        default=0.0,
        description="negatives = 'mined': keep candidates scoring <= the positive's score - margin.",
    )
    mine_refresh_every: int = Field(
        default=100,
        ge=1,
        description="negatives = 'mined': rebuild the index of the pool every this many steps.",
    )

    @model_validator(mode="after")
    def _negatives_are_consistent(self) -> LossConfig:
        facts = NEGATIVES_FACTS[self.negatives]
        if not facts.sized and self.n_negatives != 0:
            raise ValueError(
                f"n_negatives = {self.n_negatives} is not allowed with negatives = '{self.negatives}' (m = K*n - 1 "
                f"there); set n_negatives = 0 or choose {choice_in_words(negatives_where(lambda f: f.sized))}"
            )
        if facts.sized and self.n_negatives < 1:
            raise ValueError(
                f"negatives = '{self.negatives}' needs n_negatives (m) >= 1, got {self.n_negatives}"
            )
        if facts.mined and not 1 <= self.mine_window[0] <= self.mine_window[1]:
            raise ValueError(f"mine_window = {list(self.mine_window)}; pass [lo, hi] with 1 <= lo <= hi")
        if self.symmetric and (facts.per_anchor or facts.fixed):
            why = (
                "SCRL is one-sided" if facts.per_anchor else "the exact L_hat over a fixed pool is one-sided"
            )
            raise ValueError(
                f"symmetric = true is not allowed with negatives = '{self.negatives}' ({why}); "
                "set symmetric = false or use in_batch, shared_pool or queue"
            )
        if self.learnable_tau and 1.0 / self.tau > self.max_inverse_tau:
            raise ValueError(
                f"tau = {self.tau} gives 1/tau above max_inverse_tau = {self.max_inverse_tau}; "
                "raise max_inverse_tau or tau"
            )
        check_estimator(self)
        check_temperature(self)
        return self

    @property
    def regime(self) -> Regime:
        """The regime of the negatives kind: 'independent' (SCRL) or 'shared' (SSCRL)."""
        return NEGATIVES_FACTS[self.negatives].regime
