"""The ``[loss]`` fields of the per-sample temperature (iSogCLR, docs/estimators.md).

``temperature = "per_sample"`` trains with :func:`crl.objectives.individual_temperature_loss`: each training item i
keeps a temperature tau_i of its own in [tau_min, tau_max], started at ``tau`` and moved by iSogCLR's update (Qiu
et al. 2023) with step ``tau_lr``, momentum ``tau_momentum`` and KL radius ``tau_rho``. These fields sit in a base
class of :class:`crl.train.config.LossConfig`; :func:`check_temperature` is its validator's part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from crl.train.config_kinds import Section

if TYPE_CHECKING:
    from crl.train.config import LossConfig

__all__ = ["TemperatureFields", "check_temperature"]

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
    needs = {
        "form": (loss.form, "gcl"),
        "symmetric": (loss.symmetric, False),
        "learnable_tau": (loss.learnable_tau, False),
        "estimator": (loss.estimator, "minibatch"),
    }
    wrong = [f"{name} = {got!r} (needs {want!r})" for name, (got, want) in needs.items() if got != want]
    if loss.negatives not in ("in_batch", "shared_pool"):
        wrong.append(f"negatives = {loss.negatives!r} (needs 'in_batch' or 'shared_pool')")
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
