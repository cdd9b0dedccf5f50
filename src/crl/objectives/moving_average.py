"""The moving-average estimator of SogCLR and FastCLIP: the GCL loss over a fixed pool of m shared negatives.

SogCLR (Yuan et al. 2022, "Provable stochastic optimization for global contrastive learning") and FastCLIP
(Wei et al. 2024, "FastCLIP: a suite of optimization techniques to accelerate CLIP training with limited
resources") minimise the global contrastive loss of [A] over a pool of m negatives larger than one step can embed.
With Delta_ij = s(x_i, y'_j) - s(x_i, y_i) and s(x, y) = <anchor, candidate>, anchor i (an item id 0..N-1 of the
training set) has

    g_i     = (1/m) sum_{j in pool} exp(Delta_ij / tau)        (the pool mean; the GCL value is tau * log g_i)
    g_hat_i = (1/b) sum_{j in B} exp(Delta_ij / tau)           (its minibatch estimate, B the step's b negatives)

(SSCRL: one pool shared by all anchors, B shared by the batch; SCRL: each anchor its own fixed pool of m, and B_i
its own b draws from it, passed as (n, b, d) negatives.)

and the estimator keeps a running estimate u_i of g_i, updated once per step in which item i is an anchor:

    u_i <- (1 - gamma) * u_i + gamma * g_hat_i                 (u_i <- g_hat_i on the item's first visit)

The loss of the step, over its n anchors, is

    L = (1/n) sum_i tau * g_hat_i / u_i                        (u_i: the updated value, detached)

whose gradient tau * grad g_hat_i / u_i is the gradient of tau * log g_i when u_i = g_i (the compositional
estimate). The VALUE reported is (1/n) sum_i tau * log u_i, the GCL form of [A] (``form="gcl"`` in crl), so the
logged loss is comparable with :func:`crl.objectives.contrastive_loss`'s gcl; only its gradient is the one above.
With gamma = 1 (and on every first visit) u_i = g_hat_i, so value and gradient are exactly those of the minibatch
gcl loss with the step's b negatives.

u is kept as log u (``MovingAverageState.log_u``): exp(Delta_ij / tau) overflows float32 once Delta_ij / tau > 88,
e.g. tau = 0.01 and Delta_ij = 0.9, while log g_hat_i is a log-sum-exp. gamma is a constant in (0, 1] or a
schedule (a callable step -> gamma, e.g. :func:`cosine_gamma`), read at the state's step counter, which counts the
calls and is saved with u.
"""

import math
from collections.abc import Callable

import torch
from torch import Tensor

from crl._validate import Integers, check, check_choice, check_count, check_tau
from crl.objectives._checks import REDUCTIONS, Reduction, check_embeddings, check_inputs, check_pair, upcast

GammaLike = float | Callable[[int], float]
"""A constant gamma in (0, 1], or a schedule mapping the step (0, 1, 2, ...) to one."""

_STATE_KEYS = ("log_u", "seen", "step")


class MovingAverageState:
    """Per-item running estimates u_i of the pool means g_i, for :func:`moving_average_loss`.

    Attributes:
        log_u: (n_items,) log u_i (meaningful where ``seen``).
        seen: (n_items,) bool, whether item i has been an anchor yet (its first visit sets u_i = g_hat_i).
        step: scalar int64, the number of updates so far (the argument of a gamma schedule).

    Examples:
        >>> state = MovingAverageState(10, device="cpu", dtype=torch.float64)
        >>> sorted(state.state_dict())
        ['log_u', 'seen', 'step']
    """

    def __init__(
        self, n_items: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float64
    ) -> None:
        check_count("n_items", n_items, 1)
        if not dtype.is_floating_point:
            raise ValueError(f"dtype={dtype} must be a floating dtype, e.g. torch.float64.")
        self.n_items = n_items
        self.log_u = torch.zeros(n_items, device=device, dtype=dtype)
        self.seen = torch.zeros(n_items, device=device, dtype=torch.bool)
        self.step = torch.zeros((), device=device, dtype=torch.int64)

    @property
    def u(self) -> Tensor:
        """(n_items,) u_i = exp(log u_i); NaN for items not yet seen."""
        return torch.where(self.seen, self.log_u.exp(), torch.full_like(self.log_u, math.nan))

    def state_dict(self) -> dict[str, Tensor]:
        """Copies of ``log_u``, ``seen`` and ``step`` (tensors only, for a checkpoint)."""
        return {"log_u": self.log_u.clone(), "seen": self.seen.clone(), "step": self.step.clone()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore a :meth:`state_dict` of a state with the same n_items (onto this state's device and dtype).

        Raises:
            ValueError: on missing or extra keys, or a shape that does not match n_items.
        """
        if not isinstance(state, dict) or set(state) != set(_STATE_KEYS):
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(
                f"state has keys {got}; expected {list(_STATE_KEYS)} (a MovingAverageState.state_dict())."
            )
        for key, target in (("log_u", self.log_u), ("seen", self.seen), ("step", self.step)):
            value = state[key]
            if not isinstance(value, Tensor) or value.shape != target.shape:
                shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
                raise ValueError(
                    f"state[{key!r}] has shape {shape}, expected {tuple(target.shape)}; "
                    f"it was saved for another number of items than n_items={self.n_items}."
                )
        self.log_u.copy_(state["log_u"])
        self.seen.copy_(state["seen"])
        self.step.copy_(state["step"])


def cosine_gamma(decay_steps: int, floor: float) -> Callable[[int], float]:
    """FastCLIP's schedule: gamma_t = floor + (1 - floor) * (1 + cos(pi * t / decay_steps)) / 2 for t < decay_steps,
    then ``floor`` (from 1 at step 0 down to the floor).

    Examples:
        >>> schedule = cosine_gamma(decay_steps=100, floor=0.2)
        >>> schedule(0), schedule(100), schedule(1000)
        (1.0, 0.2, 0.2)
    """
    check_count("decay_steps", decay_steps, 1)
    _check_gamma_value("floor", floor)

    def schedule(step: int) -> float:
        t = min(step, decay_steps)
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * t / decay_steps))

    return schedule


def _check_gamma_value(name: str, value: object) -> float:
    """A number in (0, 1] (``ValueError`` naming ``name`` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value <= 1.0:
        raise ValueError(
            f"{name}={value!r} must be a number in (0, 1]: 1 uses only this step's negatives, "
            "small values average over many steps (e.g. 0.1)."
        )
    return float(value)


def _resolve_gamma(gamma: GammaLike, step: Tensor) -> float:
    """gamma itself, or the schedule's value at ``step`` (read from the device only for a schedule)."""
    if callable(gamma):
        t = int(step)
        return _check_gamma_value(f"gamma(step={t})", gamma(t))
    return _check_gamma_value("gamma", gamma)


def _check_item_ids(item_ids: object, n: int, state: MovingAverageState, device: torch.device) -> Tensor:
    """(n,) distinct int64 ids in [0, n_items) on the anchors' device."""
    item_ids = check("item_ids", item_ids, Integers((n,), int64=True, what="one training-set id per anchor"))
    if item_ids.device != device:
        raise ValueError(f"item_ids is on {item_ids.device}, anchors on {device}; move them to one device.")
    low, high = torch.stack(torch.aminmax(item_ids)).tolist()  # one host sync for both
    if low < 0 or high >= state.n_items:
        raise ValueError(
            f"item_ids range over [{low}, {high}], outside [0, {state.n_items}) of the state's n_items; "
            "pass training-set ids, or a MovingAverageState sized for the whole training set."
        )
    if int(item_ids.unique().numel()) != n:
        raise ValueError("item_ids repeats an id within the batch; each anchor must be a distinct item.")
    return item_ids


def _log_g_hat(a: Tensor, p: Tensor, neg: Tensor, tau: float) -> Tensor:
    """log g_hat_i = logsumexp_j(Delta_ij / tau) - log b, with gradients (neg (b, d) shared or (n, b, d) own)."""
    scores = a @ neg.T if neg.dim() == 2 else torch.einsum("id,ijd->ij", a, neg)
    delta = scores - (a * p).sum(dim=1, keepdim=True)
    return torch.logsumexp(delta / tau, dim=1) - math.log(neg.shape[-2])


def _update(state: MovingAverageState, ids: Tensor, log_g_hat: Tensor, gamma: float) -> Tensor:
    """u_ids <- (1 - gamma) u_ids + gamma g_hat (g_hat on first visits), in log space; returns the new log u_ids."""
    with torch.no_grad():
        new = log_g_hat.detach().to(state.log_u.dtype)
        if gamma < 1.0:
            old = torch.logaddexp(state.log_u[ids] + math.log1p(-gamma), new + math.log(gamma))
            new = torch.where(state.seen[ids], old, new)
        state.log_u[ids] = new
        state.seen[ids] = True
        state.step += 1
    return new


def _check_negatives(negatives: object, anchors: Tensor) -> Tensor:
    """(b, d) shared or (n, b, d) per-anchor negatives of the anchors' dimension d."""
    ndim = negatives.ndim if isinstance(negatives, Tensor) and negatives.ndim == 3 else 2
    neg = check_embeddings("negatives", negatives, ndim)
    own_rows = ndim == 2 or neg.shape[0] == anchors.shape[0]
    if neg.shape[-1] != anchors.shape[1] or not own_rows or neg.shape[-2] == 0:
        raise ValueError(
            f"negatives has shape {tuple(neg.shape)} but anchors {tuple(anchors.shape)}; pass (b, d) shared "
            "negatives or (n, b, d) per-anchor negatives (b >= 1) of the anchors' dimension d."
        )
    return neg


def moving_average_loss(
    anchors: Tensor,
    positives: Tensor,
    negatives: Tensor,
    item_ids: Tensor,
    state: MovingAverageState,
    *,
    tau: float,
    gamma: GammaLike,
    reduction: Reduction = "mean",
) -> Tensor:
    """SogCLR / FastCLIP's GCL loss over a fixed pool, from this step's b shared negatives and the running u_i.

    Updates ``state`` in place (without gradients): u_i <- (1 - gamma) u_i + gamma g_hat_i for the n anchors'
    items (u_i <- g_hat_i on an item's first visit), then returns the loss whose gradient is
    (1/n) sum_i tau * grad g_hat_i / u_i and whose value is (1/n) sum_i tau * log u_i (module docstring).

    Args:
        anchors: (n, d) anchor embeddings f(x_i).
        positives: (n, d) positive embeddings g(y_i).
        negatives: (b, d) negatives shared by all anchors, drawn from the fixed pool of m (SSCRL), or
            (n, b, d): anchor i's own b negatives, drawn from its own fixed pool of m (SCRL).
        item_ids: (n,) int64 distinct training-set ids of the anchors, in [0, state.n_items).
        state: the running estimates, updated in place.
        tau: temperature, a finite number > 0.
        gamma: a constant in (0, 1] or a schedule step -> gamma (read at ``state.step``).
        reduction: "mean" over anchors, or "none" for the (n,) per-anchor values.

    Returns:
        The scalar loss, or the (n,) per-anchor losses.

    Raises:
        ValueError: on mismatched shapes, dtypes or devices, NaN/Inf embeddings, ids out of range or repeated,
            tau <= 0, gamma outside (0, 1], or an unknown reduction; the message names the argument.

    Examples:
        >>> a = torch.nn.functional.normalize(torch.randn(4, 3, dtype=torch.float64), dim=1)
        >>> neg = torch.nn.functional.normalize(torch.randn(5, 3, dtype=torch.float64), dim=1)
        >>> state = MovingAverageState(10)
        >>> loss = moving_average_loss(a, a, neg, torch.arange(4), state, tau=0.1, gamma=0.5)
        >>> bool(state.seen[:4].all()), int(state.step)
        (True, 1)
    """
    check_choice("reduction", reduction, REDUCTIONS)
    if not isinstance(state, MovingAverageState):
        raise ValueError(f"state is a {type(state).__name__}; pass a MovingAverageState(n_items).")
    t = check_tau(tau)
    a, p = check_pair(anchors, positives)
    neg = _check_negatives(negatives, a)
    check_inputs({"anchors": a, "positives": p, "negatives": neg})
    ids = _check_item_ids(item_ids, a.shape[0], state, a.device)
    if state.log_u.device != a.device:
        raise ValueError(
            f"state is on {state.log_u.device}, anchors on {a.device}; create it on their device."
        )
    g = _resolve_gamma(gamma, state.step)
    a, p, neg = upcast(a), upcast(p), upcast(neg)
    log_g_hat = _log_g_hat(a, p, neg, t)
    log_u = _update(state, ids, log_g_hat, g).to(log_g_hat.dtype)
    surrogate = t * torch.exp(log_g_hat.detach() - log_u) * log_g_hat
    per_anchor = t * log_u + (surrogate - surrogate.detach())
    return per_anchor.mean() if reduction == "mean" else per_anchor
