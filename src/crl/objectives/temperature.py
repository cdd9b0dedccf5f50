"""The temperature tau, fixed or learned, in the form every loss accepts."""

import math

import torch
from torch import Tensor, nn

from crl._validate import check_real
from crl.objectives._checks import check_tau_value


class Temperature(nn.Module):
    """A temperature tau > 0 stored as the log of its inverse, as CLIP stores its logit scale.

    The parameter is ``log_inverse = log(1/tau)``; the forward pass returns
    ``tau = exp(-clamp(log_inverse, max=log(max_inverse)))``, so 1/tau never exceeds ``max_inverse`` (CLIP clamps
    1/tau <= 100). The clamp has zero gradient beyond the bound, so a learned tau rests there instead of diverging.

    Args:
        init: initial tau (> 0). CLIP starts at 0.07.
        learnable: if False tau is a buffer and never changes.
        max_inverse: upper bound on 1/tau (> 0).

    Raises:
        ValueError: if ``init`` or ``max_inverse`` is not a finite positive number, or ``1/init > max_inverse``.
        TypeError: if ``init`` or ``max_inverse`` is not a real number (a bool, a string), or ``learnable`` is
            not a bool.

    Examples:
        >>> t = Temperature(0.07)
        >>> round(float(t()), 4)
        0.07
    """

    def __init__(self, init: float = 0.07, learnable: bool = True, max_inverse: float = 100.0) -> None:
        super().__init__()
        if check_real("init", init) <= 0.0:
            raise ValueError(f"init={init!r} must be a finite temperature > 0 (CLIP uses 0.07).")
        if check_real("max_inverse", max_inverse) <= 0.0:
            raise ValueError(f"max_inverse={max_inverse!r} must be a finite number > 0 (CLIP uses 100).")
        if not isinstance(learnable, bool):
            raise TypeError(f"learnable={learnable!r} must be True or False, got {type(learnable).__name__}.")
        if 1.0 / init > max_inverse:
            raise ValueError(
                f"init={init!r} gives 1/tau={1.0 / init:.4g} > max_inverse={max_inverse!r}; "
                f"raise max_inverse or start at tau >= {1.0 / max_inverse:.4g}."
            )
        self.max_inverse = float(max_inverse)
        value = torch.tensor(math.log(1.0 / init), dtype=torch.float32)
        if learnable:
            self.log_inverse = nn.Parameter(value)
        else:
            self.register_buffer("log_inverse", value)

    def forward(self) -> Tensor:
        """Return tau as a 0-dim tensor (differentiable when learnable)."""
        return torch.exp(-self.log_inverse.clamp(max=math.log(self.max_inverse)))

    def extra_repr(self) -> str:
        """``tau=0.07, learnable=True``: the value read without autograd, so printing a learnable one does not
        warn about converting a tensor that requires grad."""
        with torch.no_grad():
            tau = float(self())
        return f"tau={tau:.4g}, learnable={isinstance(self.log_inverse, nn.Parameter)}"


TauLike = float | Tensor | Temperature


def resolve_tau(tau: TauLike) -> Tensor:
    """Turn a float, a scalar tensor or a :class:`Temperature` into a checked scalar tensor tau > 0.

    Raises:
        ValueError: if tau is not finite or not > 0.
        TypeError: if tau is of another type.
    """
    if isinstance(tau, Temperature):
        value = tau()
    elif isinstance(tau, Tensor):
        value = tau
    elif isinstance(tau, int | float) and not isinstance(tau, bool):
        value = torch.tensor(float(tau), dtype=torch.float64)
    else:
        raise TypeError(f"tau must be a float, a scalar tensor or a Temperature, got {type(tau).__name__}.")
    check_tau_value(value)
    return value
