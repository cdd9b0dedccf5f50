"""The discrete latent-class model (docs/theory.md section 6.4): N items in K classes, positives share a class.

Items 0..N-1 are observed as one-hot vectors in R^N (d = N); item i belongs to class c(i), class k holds n_k
items (items are numbered class by class). Conventions (crl's own, stated here):

- anchor law pi: class k with probability w_k, then an item uniform within the class: ``pi(i) = w_c/n_c``;
- positive kernel: an item uniform within the anchor's class, the anchor itself included
  (``include_anchor=True``: ``p+_x(j) = 1/n_c``) or excluded (``include_anchor=False``:
  ``p+_x(j) = 1/(n_c - 1)`` for j != x, needs every n_k >= 2);
- p- = the positives' marginal, which equals pi under both conventions (sum over the class of pi(i) p+_i(j)).

Against counting measure on the N one-hot vectors, with r_x(y) = p+_x(y)/p-(y) and k = c(x):

- include: ``r = 1/w_k`` on x's class, 0 elsewhere; ``E_x KL = -sum_k w_k log w_k`` (the class entropy);
  ``E* = sum_k w_k (1 - w_k/2)`` (a negative from x's class ties and counts 1/2); ``E|dM/dpi|^2 = K``;
- exclude: ``r = n_k/((n_k - 1) w_k)`` on x's class minus x, 0 elsewhere;
  ``E_x KL = sum_k w_k log(n_k/((n_k-1) w_k))``; ``E* = sum_k w_k (1 - w_k (n_k-1)/(2 n_k))``;
  ``E|dM/dpi|^2 = sum_k n_k/(n_k - 1)``.

These sums over classes are the exact enumeration over items, grouped by class (every item of a class has the
same row of the kernel up to relabelling).
"""

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from crl._validate import check_count, check_generator
from crl.synthetic.base import ExactModel, check_dtype, check_points, check_shape


def _check_class_sizes(class_sizes: Sequence[int], include_anchor: bool) -> tuple[int, ...]:
    """Validate class sizes: a non-empty sequence of integers >= 1 (>= 2 when the anchor is excluded)."""
    minimum = 1 if include_anchor else 2
    sizes = tuple(class_sizes)
    if not sizes or not all(isinstance(s, int) and not isinstance(s, bool) and s >= minimum for s in sizes):
        raise ValueError(
            f"class_sizes must be a non-empty sequence of integers >= {minimum} "
            f"(include_anchor={include_anchor}), got class_sizes={class_sizes!r}"
        )
    return sizes


def _check_class_weights(class_weights: Sequence[float] | None, sizes: tuple[int, ...]) -> tuple[float, ...]:
    """Validate class weights (> 0, one per class) and normalise them; None means proportional to sizes."""
    if class_weights is None:
        total = sum(sizes)
        return tuple(s / total for s in sizes)
    given = tuple(class_weights)
    if len(given) != len(sizes) or not all(
        isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w) and w > 0 for w in given
    ):
        raise ValueError(
            f"class_weights must hold {len(sizes)} finite numbers > 0 (one per class), "
            f"got class_weights={class_weights!r}"
        )
    weights = tuple(float(w) for w in given)
    weight_sum = math.fsum(weights)
    return tuple(w / weight_sum for w in weights)


class DiscreteLatent(ExactModel):
    """N one-hot items in K latent classes; positives are drawn from the anchor's class (docs/theory.md 6.4).

    Args:
        class_sizes: n_k, the number of items of each class (items are numbered class by class).
        class_weights: w_k, the probability of drawing an anchor from class k (normalised); None: ∝ n_k,
            i.e. anchors uniform over items.
        include_anchor: whether the positive may be the anchor itself (True: uniform over the class).
        dtype: dtype of sampled one-hot vectors.

    Raises:
        ValueError: empty or non-integer class sizes, a class of size < 2 with include_anchor=False, weights
            that are not > 0 or not one per class, or a non-floating dtype.

    Examples:
        >>> model = DiscreteLatent([2, 3], class_weights=[0.5, 0.5])
        >>> model.optimal_auc()
        0.75
    """

    def __init__(
        self,
        class_sizes: Sequence[int],
        class_weights: Sequence[float] | None = None,
        include_anchor: bool = True,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        self.include_anchor = bool(include_anchor)
        self.class_sizes = _check_class_sizes(class_sizes, self.include_anchor)
        self.class_weights = _check_class_weights(class_weights, self.class_sizes)
        self._dim = sum(self.class_sizes)
        self._dtype = check_dtype(dtype)
        sizes = torch.tensor(self.class_sizes)
        self.item_classes = torch.repeat_interleave(torch.arange(len(self.class_sizes)), sizes)
        """c(i) for every item i, shape (N,)."""
        self.class_offsets = torch.cumsum(sizes, 0) - sizes
        """Index of the first item of each class, shape (K,)."""
        weights = torch.tensor(self.class_weights, dtype=torch.float64)
        self.anchor_probs = (weights / sizes)[self.item_classes]
        """pi(i) = w_c(i) / n_c(i), shape (N,); also p-."""

    def __repr__(self) -> str:
        return (
            f"DiscreteLatent(class_sizes={list(self.class_sizes)}, "
            f"class_weights={[round(w, 6) for w in self.class_weights]}, include_anchor={self.include_anchor})"
        )

    @property
    def n_items(self) -> int:
        """N, the number of items (= d)."""
        return self._dim

    @property
    def n_classes(self) -> int:
        """K, the number of classes."""
        return len(self.class_sizes)

    @property
    def base_measure(self) -> str:
        """Counting measure on the N one-hot vectors."""
        return f"counting measure on the {self.dim} one-hot vectors of R^{self.dim}"

    @property
    def negative_law(self) -> str:
        """p- = the positives' marginal, which equals pi."""
        return "the positives' marginal (= the anchor law pi: class w_k, then uniform within the class)"

    def one_hot(self, items: Tensor) -> Tensor:
        """One-hot vectors of item indices: shape ``items.shape + (N,)``, the model's dtype."""
        return torch.nn.functional.one_hot(items, self.dim).to(self.dtype)

    def item_index(self, points: Tensor) -> Tensor:
        """Item indices of one-hot vectors (shape (..., N) -> (...)); ValueError if a row is not one-hot."""
        check_points("points", points, self.dim)
        is_binary = bool(torch.all((points == 0) | (points == 1)))
        if not is_binary or not bool(torch.all(points.sum(dim=-1) == 1)):
            raise ValueError("points must be one-hot vectors of the N items (use model.one_hot(indices))")
        return points.argmax(dim=-1)

    def _draw_items(self, probs: Tensor, n: int, generator: torch.Generator) -> Tensor:
        """n i.i.d. item indices from ``probs`` (on the generator's device)."""
        if n == 0:
            return torch.zeros(0, dtype=torch.long, device=generator.device)
        return torch.multinomial(probs.to(generator.device), n, replacement=True, generator=generator)

    def sample_anchors(self, n: int, generator: torch.Generator) -> Tensor:
        """n one-hot anchors x ~ pi, shape (n, N)."""
        check_generator(generator)
        return self.one_hot(self._draw_items(self.anchor_probs, check_count("n", n, 0), generator))

    def sample_positives(self, x: Tensor, generator: torch.Generator) -> Tensor:
        """For each one-hot anchor, an item uniform within its class (anchor excluded if include_anchor=False)."""
        check_generator(generator)
        anchors = self.item_index(x).to(generator.device)
        classes = self.item_classes.to(generator.device)[anchors]
        sizes = torch.tensor(self.class_sizes, device=generator.device)[classes]
        offsets = self.class_offsets.to(generator.device)[classes]
        uniform = torch.rand(anchors.shape, generator=generator, dtype=torch.float64, device=generator.device)
        if self.include_anchor:
            position = torch.floor(uniform * sizes).long().clamp(max=sizes - 1)
            return self.one_hot(offsets + position).to(x.device)
        position = torch.floor(uniform * (sizes - 1)).long().clamp(max=sizes - 2)
        anchor_position = anchors - offsets
        position = position + (position >= anchor_position).long()
        return self.one_hot(offsets + position).to(x.device)

    def sample_negatives(self, shape: Sequence[int], generator: torch.Generator) -> Tensor:
        """Negatives y' ~ p- = pi, one-hot, shape ``tuple(shape) + (N,)``."""
        check_generator(generator)
        sizes = check_shape(shape)
        items = self._draw_items(self.anchor_probs, math.prod(sizes), generator)
        return self.one_hot(items.reshape(sizes))

    def _log_kernel(self, x_items: Tensor, y_items: Tensor) -> Tensor:
        """``log p+_x(y)`` from item indices (broadcasting), float64."""
        classes = self.item_classes.to(x_items.device)
        same_class = classes[x_items] == classes[y_items]
        sizes = torch.tensor(self.class_sizes, dtype=torch.float64, device=x_items.device)[classes[x_items]]
        if self.include_anchor:
            allowed, count = same_class, sizes
        else:
            allowed, count = same_class & (x_items != y_items), sizes - 1.0
        return torch.where(allowed, -torch.log(count), torch.full_like(count, -math.inf))

    def log_positive_density(self, x: Tensor, y: Tensor) -> Tensor:
        """``log p+_x(y)`` against counting measure: ``-log n_c`` (or ``-log(n_c - 1)``) in x's class, else -inf."""
        return self._log_kernel(self.item_index(x), self.item_index(y)).to(torch.result_type(x, y))

    def log_negative_density(self, y: Tensor) -> Tensor:
        """``log p-(y) = log(w_c / n_c)`` against counting measure."""
        items = self.item_index(y)
        return torch.log(self.anchor_probs.to(y.device)[items]).to(y.dtype)

    def mean_kl(self) -> float:
        """``-sum_k w_k log w_k`` (include_anchor) or ``sum_k w_k log(n_k/((n_k-1) w_k))`` (exclude)."""
        return sum(w * math.log(self._class_ratio(k)) for k, w in enumerate(self.class_weights))

    def _class_ratio(self, k: int) -> float:
        """The likelihood ratio r = p+_x/p- on the support of p+_x for an anchor of class k."""
        w, size = self.class_weights[k], self.class_sizes[k]
        return 1.0 / w if self.include_anchor else size / ((size - 1) * w)

    def optimal_auc(self) -> float:
        """``E* = sum_k w_k (1 - P[y' in supp p+_x]/2)``: y' in the support ties (1/2), elsewhere loses."""
        return sum(w * (1.0 - 0.5 / self._class_ratio(k)) for k, w in enumerate(self.class_weights))

    def anchor_density_ratio(self, z: Tensor, z2: Tensor) -> Tensor:
        """``dM(z, .)/dpi (z2) = p+_z(z2) / pi(z2)``: the class ratio r on the support, 0 elsewhere."""
        return torch.exp(self.log_ratio(z, z2))

    def density_ratio_second_moment(self) -> float:
        """``sum_z pi(z) sum_z2 p+_z(z2)^2 / pi(z2) = sum_k w_k r_k``: K (include) or ``sum_k n_k/(n_k-1)``."""
        return sum(w * self._class_ratio(k) for k, w in enumerate(self.class_weights))
