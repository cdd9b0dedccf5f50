"""Per-sample temperature (iSogCLR): a temperature tau_i of its own for each training item, updated by its rule.

Qiu et al. 2023, "Not All Semantics are Created Equal: Contrastive Self-supervised Learning with Automatic
Temperature Individualization" (ICML 2023, arXiv:2305.11965). Item i of the training set (ids 0..N-1) has its own
tau_i in [tau_min, tau_max]; the objective is the KL-regularised (distributionally robust) global contrastive loss

    F(w, tau) = (1/N) sum_i [ tau_i log g_i(w; tau_i) + rho tau_i ],   g_i = (1/m) sum_j exp(Delta_ij / tau_i),

with Delta_ij = s(x_i, y'_j) - s(x_i, y_i). A step over the batch's n anchors (ids i) with b negatives does

    g_hat_i = (1/b) sum_j exp(Delta_ij / tau_i)                          (the step's estimate of g_i)
    s_i    <- (1 - gamma) s_i + gamma g_hat_i                            (s_i = g_hat_i on the item's first visit)
    model gradient  (1/n) sum_i tau_i grad_w g_hat_i / s_i              (the gradient of tau_i log g_i at s_i = g_i)
    G_i     = log s_i + rho - (1/b) sum_j (exp(Delta_ij/tau_i) / s_i) Delta_ij / tau_i
            = d/dtau_i [tau_i log g_i + rho tau_i] with s_i for g_i, clipped to [-grad_clip, grad_clip]
    v_i    <- (1 - beta) v_i + beta G_i                                  (momentum, the paper's u_i)
    tau_i  <- clamp(tau_i - eta v_i, tau_min, tau_max)

Every tau_i starts at ``tau_init``, v_i at 0. The paper's reference code starts s_i at 0; here (as in crl's
moving-average estimator) the first visit sets s_i = g_hat_i, which only removes a 1/gamma bias of the first steps.
The value returned is (1/n) sum_i tau_i log s_i, the GCL form with each anchor's own temperature; its gradient is
the one above. The step's anchors use their tau_i before this step's update. s_i is kept as log s_i (float64).

Cost: one forward GEMM for the statistics of G_i (no graph), then the model gradient through the tiled kernel with
the per-anchor weights tau_i g_hat_i / (n s_i) known in advance (its 3-GEMM forecast path on the CPU).
"""

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import Integers, check, check_choice, check_count, check_real
from crl.objectives._blocks import spans
from crl.objectives._checks import TILINGS, Tiling, check_embeddings, check_inputs, check_pair, upcast
from crl.objectives._lse import Kernel, row_lse
from crl.objectives._mask import LeaveOut

_STATE_KEYS = ("tau", "log_s", "v", "seen", "step")
_STATS_ELEMENTS = 1 << 21
"""Scores per chunk of the statistics pass (8 MiB of float32)."""


@dataclass(frozen=True)
class TemperatureRule:
    """The constants of iSogCLR's update (symbols of the module docstring).

    Attributes:
        tau_min, tau_max: the bounds of every tau_i (0 < tau_min <= tau_max).
        rho: the KL radius of the robust objective (larger rho, larger tau_i).
        eta: step size of the tau_i update.
        beta: momentum weight of G_i in v_i, in (0, 1].
        gamma: weight of g_hat_i in the moving average s_i, in (0, 1].
        grad_clip: G_i is clipped to [-grad_clip, grad_clip].
    """

    tau_min: float = 0.05
    tau_max: float = 1.0
    rho: float = 0.3
    eta: float = 0.01
    beta: float = 0.9
    gamma: float = 0.9
    grad_clip: float = 5.0

    def __post_init__(self) -> None:
        values = {name: check_real(name, getattr(self, name)) for name in _RULE_FIELDS}
        if not 0.0 < values["tau_min"] <= values["tau_max"]:
            raise ValueError(
                f"tau_min={self.tau_min} and tau_max={self.tau_max} need 0 < tau_min <= tau_max."
            )
        for name in ("beta", "gamma"):
            if not 0.0 < values[name] <= 1.0:
                raise ValueError(f"{name}={values[name]} must lie in (0, 1] (e.g. 0.9).")
        for name in ("eta", "grad_clip", "rho"):
            if values[name] < 0.0:
                raise ValueError(f"{name}={values[name]} must be >= 0.")


_RULE_FIELDS = ("tau_min", "tau_max", "rho", "eta", "beta", "gamma", "grad_clip")


class IndividualTemperatureState:
    """Per-item tau_i, log s_i, v_i and first-visit flags of :func:`individual_temperature_loss`.

    Attributes:
        tau: (n_items,) the current tau_i (``tau_init`` until the item is visited).
        log_s: (n_items,) log s_i (meaningful where ``seen``).
        v: (n_items,) the momentum v_i of the tau_i update.
        seen: (n_items,) bool, whether item i has been an anchor yet.
        step: scalar int64, the number of updates so far.

    Examples:
        >>> state = IndividualTemperatureState(10, tau_init=0.1)
        >>> sorted(state.state_dict())
        ['log_s', 'seen', 'step', 'tau', 'v']
    """

    def __init__(self, n_items: int, tau_init: float, device: torch.device | str = "cpu") -> None:
        check_count("n_items", n_items, 1)
        if check_real("tau_init", tau_init) <= 0.0:
            raise ValueError(f"tau_init={tau_init!r} must be a temperature > 0.")
        self.n_items = n_items
        self.tau = torch.full((n_items,), float(tau_init), device=device, dtype=torch.float64)
        self.log_s = torch.zeros(n_items, device=device, dtype=torch.float64)
        self.v = torch.zeros(n_items, device=device, dtype=torch.float64)
        self.seen = torch.zeros(n_items, device=device, dtype=torch.bool)
        self.step = torch.zeros((), device=device, dtype=torch.int64)

    def state_dict(self) -> dict[str, Tensor]:
        """Copies of the five tensors (for a checkpoint)."""
        return {key: getattr(self, key).clone() for key in _STATE_KEYS}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore a :meth:`state_dict` saved for the same n_items.

        Raises:
            ValueError: on missing or extra keys or a shape that does not match n_items.
        """
        if not isinstance(state, dict) or set(state) != set(_STATE_KEYS):
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"state has keys {got}; expected {sorted(_STATE_KEYS)}.")
        for key in _STATE_KEYS:
            target, value = getattr(self, key), state[key]
            if not isinstance(value, Tensor) or value.shape != target.shape:
                raise ValueError(
                    f"state[{key!r}] does not have shape {tuple(target.shape)}; it was saved for another n_items."
                )
        for key in _STATE_KEYS:
            getattr(self, key).copy_(state[key])


def _checked_ids(item_ids: object, n: int, n_items: int, device: torch.device) -> Tensor:
    """(n,) distinct int64 ids in [0, n_items) on ``device``."""
    item_ids = check("item_ids", item_ids, Integers((n,), int64=True, what="one training-set id per anchor"))
    if item_ids.device != device:
        raise ValueError(f"item_ids is on {item_ids.device}, anchors on {device}; move them to one device.")
    if item_ids.device.type == "cpu":
        if int(item_ids.min()) < 0 or int(item_ids.max()) >= n_items:
            raise ValueError(f"item_ids must lie in [0, {n_items}) (the state's n_items).")
        if int(item_ids.unique().numel()) != n:
            raise ValueError("item_ids repeats an id within the batch; each anchor must be a distinct item.")
    return item_ids


def _statistics(q: Tensor, c: Tensor, pos: Tensor, leave: LeaveOut) -> tuple[Tensor, Tensor]:
    """Per anchor, lse_i = log sum_j exp(S_ij) and E_i = sum_j softmax_j(S_ij) (S_ij - pos_i), S = q c^T, no graph.

    ``pos`` holds the positives' logits s_ii / tau_i; chunks of rows keep the memory to O(chunk x b).
    """
    n, b = q.shape[0], c.shape[0]
    lse, mean_delta = torch.empty(n, dtype=q.dtype, device=q.device), torch.empty_like(pos)
    for r0, r1 in spans(n, max(1, _STATS_ELEMENTS // b)):
        scores = leave.apply(q[r0:r1] @ c.T, r0, r1, 0, b)
        lse[r0:r1] = torch.logsumexp(scores, dim=1)
        weights = (scores - lse[r0:r1, None]).exp_()
        finite = scores.nan_to_num(neginf=0.0)
        mean_delta[r0:r1] = (weights * finite).sum(dim=1) - pos[r0:r1]
    return lse, mean_delta


def individual_temperature_loss(
    anchors: Tensor,
    positives: Tensor,
    negatives: Tensor | None,
    item_ids: Tensor,
    state: IndividualTemperatureState,
    rule: TemperatureRule,
    *,
    update: bool = True,
    tiling: Tiling = "auto",
) -> Tensor:
    """iSogCLR's loss of a step and (with ``update``) its update of s_i, v_i and tau_i (module docstring).

    Args:
        anchors: (n, d) anchor embeddings.
        positives: (n, d) positive embeddings.
        negatives: (b, d) shared negatives, or None for the batch's other positives (b = n - 1).
        item_ids: (n,) distinct int64 training-set ids of the anchors.
        state: the per-item state (sized for the training set).
        rule: the update's constants.
        update: update the state (False: evaluate with the current tau_i and s_i, changing nothing).
        tiling: "auto", "dense" or "tiled", for the model gradient's log-sum-exps.

    Returns:
        The scalar (1/n) sum_i tau_i log s_i with the gradient (1/n) sum_i tau_i grad g_hat_i / s_i.

    Raises:
        ValueError: on bad shapes, NaN/Inf embeddings (CPU), ids out of range or repeated.
    """
    check_choice("tiling", tiling, TILINGS)
    a, p = check_pair(anchors, positives)
    n = a.shape[0]
    named = {"anchors": a, "positives": p}
    if negatives is not None:
        named["negatives"] = check_embeddings("negatives", negatives, 2)
    elif n < 2:
        raise ValueError("negatives=None uses the other positives of the batch, so it needs n >= 2 anchors.")
    check_inputs(named)
    ids = _checked_ids(item_ids, n, state.n_items, a.device)
    a, p = upcast(a), upcast(p)
    c = p if negatives is None else upcast(negatives)
    leave = LeaveOut(0 if negatives is None else None)
    b = c.shape[0] - (1 if negatives is None else 0)
    tau = state.tau[ids].to(a.dtype)
    q = a / tau[:, None]
    pos = (a * p).sum(dim=1) / tau
    with torch.no_grad():
        lse, mean_delta = _statistics(q.detach(), c.detach(), pos.detach(), leave)
        log_g_hat = (lse - pos.detach() - math.log(b)).double()
        log_s = _moving_average(state, ids, log_g_hat, rule.gamma, update)
        ratio = (log_g_hat - log_s).exp()
        weights = (tau.double() * ratio / n).to(a.dtype)
    if update:
        _update_temperature(state, ids, log_s, ratio * mean_delta.double(), rule)
    kernel = Kernel(tiling, None, forecast=True)
    lse_w = row_lse(a, c, tau=tau, leave=leave, kernel=kernel, forecast=lambda _lse, r0, r1: weights[r0:r1])
    surrogate = (weights * (lse_w - pos)).sum()
    value = (tau.double() * log_s).mean().to(a.dtype)
    return value + (surrogate - surrogate.detach())


def _moving_average(
    state: IndividualTemperatureState, ids: Tensor, log_g_hat: Tensor, gamma: float, update: bool
) -> Tensor:
    """log s_i after s_i <- (1 - gamma) s_i + gamma g_hat_i (g_hat_i on first visits); stored when ``update``."""
    seen = state.seen[ids]
    new = log_g_hat
    if gamma < 1.0:
        mixed = torch.logaddexp(state.log_s[ids] + math.log1p(-gamma), log_g_hat + math.log(gamma))
        new = torch.where(seen, mixed, log_g_hat)
    if update:
        state.log_s[ids] = new
        state.seen[ids] = True
    return new


def _update_temperature(
    state: IndividualTemperatureState,
    ids: Tensor,
    log_s: Tensor,
    weighted_delta: Tensor,
    rule: TemperatureRule,
) -> None:
    """G_i = log s_i + rho - (g_hat_i / s_i) E_i, clipped; v_i <- (1 - beta) v_i + beta G_i; tau_i <- clamp."""
    grad = (log_s + rule.rho - weighted_delta).clamp(-rule.grad_clip, rule.grad_clip)
    v = (1.0 - rule.beta) * state.v[ids] + rule.beta * grad
    state.v[ids] = v
    state.tau[ids] = (state.tau[ids] - rule.eta * v).clamp(rule.tau_min, rule.tau_max)
    state.step += 1
